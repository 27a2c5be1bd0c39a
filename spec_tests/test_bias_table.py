"""Spec: relative position bias tables of windows (``window_bias``; docs/bias-table.md).

Tokens of a ``Wh × Ww`` window are numbered row-major; a (query a, key b) pair is ``(Δh, Δw) = (h_a − h_b,
w_a − w_b)`` apart. The oracles below loop over the pairs with the formulas of docs/bias-table.md#the-math,
independently of any implementation:

* ``swin``: ``table[(Δh + Wh − 1)(2Ww − 1) + (Δw + Ww − 1), h]``;
* ``beit``: CLS is token 0; rows ``R``, ``R + 1``, ``R + 2`` (``R = (2Wh − 1)(2Ww − 1)``) for CLS→patch,
  patch→CLS, CLS→CLS; the patch rows of a table made for another (square) window resampled bilinearly with
  half-pixel centres, no antialias;
* ``swinv2``: ``16·σ(relu(c·w1 + b1)·w2)`` at ``c = sign(x)·log2(1 + |x|)/3``, ``x = 8Δ/(S − 1)``.

Properties: the bias of a pair depends only on its offset; BEiT's CLS rows sit where they belong; Swin v2's bias
lies in (0, 16). Tolerances: ``encoding_support.tol`` (sums of a dozen O(1) terms) by the declared dtype. The
``test_mutant_*`` tests run each check on a deliberately wrong ``window_bias`` (a catalogued mistake of
refpos.encodings.bias_table_mistakes) and show it fails.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from encoding_support import tol
from hypothesis import given
from support import assert_within, require

from refpos.testing.strategies_bias_table import window_bias_cases


def _offsets(window: list[int]) -> list[tuple[int, int, int, int]]:
    """``(a, b, Δh, Δw)`` of every pair of the window."""
    wh, ww = window
    return [(a, b, a // ww - b // ww, a % ww - b % ww) for a in range(wh * ww) for b in range(wh * ww)]


def _bilinear_axis(n_in: int, n_out: int, i: int) -> tuple[int, int, float]:
    s = max((n_in / n_out) * (i + 0.5) - 0.5, 0.0)
    j = min(math.floor(s), n_in - 1)
    return j, min(j + 1, n_in - 1), s - j


def _beit_rows(table: np.ndarray, side: int, window: list[int]) -> np.ndarray:
    """The table's patch rows at the window (resampled when the sides differ), then its three CLS rows."""
    if [side, side] == list(window):
        return table
    n_in, (oh, ow) = 2 * side - 1, (2 * window[0] - 1, 2 * window[1] - 1)
    image = table[:-3].reshape(n_in, n_in, -1)
    out = np.empty((oh, ow, table.shape[1]))
    for r in range(oh):
        r0, r1, lr = _bilinear_axis(n_in, oh, r)
        for c in range(ow):
            c0, c1, lc = _bilinear_axis(n_in, ow, c)
            top = (1 - lc) * image[r0, c0] + lc * image[r0, c1]
            bottom = (1 - lc) * image[r1, c0] + lc * image[r1, c1]
            out[r, c] = (1 - lr) * top + lr * bottom
    return np.concatenate([out.reshape(oh * ow, -1), table[-3:]])


def _swinv2_rows(case: dict) -> np.ndarray:
    wh, ww = case["window"]
    sides = case["pretrained_window"] or case["window"]
    rows = []
    for dh in range(-(wh - 1), wh):
        for dw in range(-(ww - 1), ww):
            c = []
            for delta, side in ((dh, sides[0]), (dw, sides[1])):
                x = 8.0 * delta / (side - 1) if side > 1 else 0.0
                c.append(math.copysign(math.log2(1 + abs(x)) / 3, x) if x else 0.0)
            hidden = np.maximum(np.array(c) @ case["w1"] + case["b1"], 0.0)
            rows.append(16 / (1 + np.exp(-(hidden @ case["w2"]))))
    return np.array(rows)


def oracle(case: dict) -> np.ndarray:
    """The bias ``(H, N, N)`` (BEiT ``(H, N + 1, N + 1)``) from the module docstring's formulas."""
    wh, ww = case["window"]
    r = (2 * wh - 1) * (2 * ww - 1)
    if case["form"] == "swin":
        rows = case["table"]
    elif case["form"] == "beit":
        rows = _beit_rows(case["table"], case["table_window"][0], case["window"])
    else:
        rows = _swinv2_rows(case)
    cls = 1 if case["form"] == "beit" else 0
    n = wh * ww + cls
    out = np.empty((rows.shape[1], n, n))
    for a, b, dh, dw in _offsets(case["window"]):
        out[:, a + cls, b + cls] = rows[(dh + wh - 1) * (2 * ww - 1) + (dw + ww - 1)]
    if cls:
        out[:, 0, 1:], out[:, 1:, 0], out[:, 0, 0] = rows[r][:, None], rows[r + 1][:, None], rows[r + 2]
    return out


# ------------------------------------------------------------------------------------------------- checks
def check_formula(window_bias, case: dict, impl) -> None:
    assert_within(window_bias(**case), oracle(case), **tol(impl))


def check_only_offset(window_bias, case: dict, impl) -> None:
    """Pairs of one offset get one bias (the patch block of BEiT)."""
    bias = window_bias(**case)
    bias = bias[:, 1:, 1:] if case["form"] == "beit" else bias
    first: dict[tuple[int, int], tuple[int, int]] = {}
    for a, b, dh, dw in _offsets(case["window"]):
        a0, b0 = first.setdefault((dh, dw), (a, b))
        assert_within(bias[:, a, b], bias[:, a0, b0], **tol(impl))


def check_cls_rows(window_bias, case: dict, impl) -> None:
    """BEiT at the table's window: CLS→patch reads row R, patch→CLS row R + 1, CLS→CLS row R + 2."""
    case = {**case, "window": case["table_window"]}
    bias, table = window_bias(**case), case["table"]
    assert bias.shape[1] == bias.shape[2] == case["window"][0] ** 2 + 1
    assert_within(bias[:, 0, 1:], np.broadcast_to(table[-3][:, None], bias[:, 0, 1:].shape), **tol(impl))
    assert_within(bias[:, 1:, 0], np.broadcast_to(table[-2][:, None], bias[:, 1:, 0].shape), **tol(impl))
    assert_within(bias[:, 0, 0], table[-1], **tol(impl))


def check_swinv2_range(window_bias, case: dict, impl) -> None:
    """16·σ: every entry in (0, 16), and the offset 0 (a token and itself) at 16·σ(relu(b1)·w2)."""
    bias = window_bias(**case)
    assert np.all((bias > 0) & (bias < 16))
    centre = 16 / (1 + np.exp(-(np.maximum(case["b1"], 0.0) @ case["w2"])))
    diagonal = np.diagonal(bias, axis1=1, axis2=2)
    assert_within(diagonal, np.broadcast_to(centre[:, None], diagonal.shape), **tol(impl))


# -------------------------------------------------------------------------------------------------- tests
@given(case=window_bias_cases())
def test_window_bias_matches_the_formula(impl, case):
    check_formula(require(impl, "window_bias"), case, impl)


@given(case=window_bias_cases())
def test_the_bias_depends_only_on_the_offset(impl, case):
    check_only_offset(require(impl, "window_bias"), case, impl)


@given(case=window_bias_cases(forms=("beit",)))
def test_beit_cls_rows_are_the_last_three(impl, case):
    check_cls_rows(require(impl, "window_bias"), case, impl)


@given(case=window_bias_cases(forms=("swinv2",)))
def test_swinv2_bias_lies_in_0_16(impl, case):
    check_swinv2_range(require(impl, "window_bias"), case, impl)


def test_the_swin_rows_of_a_2x2_window(impl):
    """Row r of a table holding r: the index itself, query minus key, row stride 2Ww − 1 = 3."""
    window_bias = require(impl, "window_bias")
    got = window_bias("swin", [2, 2], table=np.arange(9.0)[:, None])
    np.testing.assert_array_equal(got[0], [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]])


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"form": "swin", "window": [2, 2], "table": np.zeros((9, 1)), "table_window": [2, 2]}, "table_window"),
    ({"form": "beit", "window": [2, 2], "table": np.zeros((12, 1))}, "table_window"),
    ({"form": "swin", "window": [2, 2], "table": np.zeros((10, 1))}, "table"),
])
def test_bad_arguments_name_the_parameter(impl, kwargs, name):
    window_bias = require(impl, "window_bias")
    with pytest.raises(ValueError, match=name):
        window_bias(**kwargs)


# ------------------------------------------------------------------------------------------------ mutants
def _mutant(mistake_name: str):
    """``window_bias`` computing the catalogued mistake ``mistake_name`` (refpos.encodings.bias_table_mistakes)."""
    from refpos.encodings.bias_table_mistakes import BIAS_TABLE_MISTAKES, BiasTableInputs

    mistake = next(m for m in BIAS_TABLE_MISTAKES if m.name == mistake_name)

    def window_bias(form, window, table=None, table_window=None, w1=None, b1=None, w2=None, pretrained_window=None):
        inputs = BiasTableInputs(form, tuple(window), table=table,
                                 table_window=None if table_window is None else tuple(table_window),
                                 mlp=None if w1 is None else (w1, b1, w2),
                                 pretrained_window=None if pretrained_window is None else tuple(pretrained_window))
        wrong = mistake.compute(inputs)
        return inputs.reference() if wrong is None else wrong[0]
    return window_bias


def _fixed(form: str) -> dict:
    rng = np.random.default_rng(7)
    if form == "swin":
        return {"form": "swin", "window": [3, 4], "table": rng.standard_normal((35, 2))}
    if form == "beit":
        return {"form": "beit", "window": [4, 5], "table": rng.standard_normal((28, 2)), "table_window": [3, 3]}
    return {"form": "swinv2", "window": [5, 5], "w1": rng.standard_normal((2, 8)), "b1": rng.standard_normal(8),
            "w2": rng.standard_normal((8, 2)), "pretrained_window": [4, 4]}


REFERENCE = SimpleNamespace(INFO={"dtype": "float64"})


@pytest.mark.parametrize(("check", "mistake", "form"), [
    (check_formula, "index_row_stride", "swin"), (check_formula, "index_key_minus_query", "swin"),
    (check_formula, "beit_resample_align_corners", "beit"), (check_formula, "cpb_window_normalised", "swinv2"),
    (check_only_offset, "beit_cls_last", "beit"), (check_cls_rows, "beit_cls_rows_swapped", "beit"),
    (check_swinv2_range, "cpb_no_squash", "swinv2"), (check_swinv2_range, "cpb_sigmoid_without_16", "swinv2"),
])
def test_mutant_fails_the_check(check, mistake, form):
    with pytest.raises(AssertionError):
        check(_mutant(mistake), _fixed(form), REFERENCE)
