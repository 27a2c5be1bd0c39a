"""refpos.encodings.bias_table: the properties of window bias tables (docs/bias-table.md), each shown to fail on a
deliberately wrong variant; the catalogue of mistakes and its identifier; bad inputs; the pipeline encoding.

The anchors are refpos/tests/test_anchors_bias_table.py; the contract's properties spec_tests/test_bias_table.py.
Tolerances: an index and a gathered bias are exact; Swin v2 and BEiT's resampling compare within the kind's bound
(:func:`refpos.encodings.bias_table_mistakes.bias_table_bound`), or within a few ulps where the test says why.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos.backend import to_numpy
from refpos.encodings.bias_table import WindowBias, beit_bias, beit_resample_table, swin_bias, swinv2_bias, window_bias
from refpos.encodings.bias_table_index import beit_relative_index, relative_rows, swin_relative_index, window_offsets
from refpos.encodings.bias_table_mistakes import (
    BIAS_TABLE_MISTAKES,
    BiasTableInputs,
    bias_table_bound,
    identify_bias_table,
)

windows = st.tuples(st.integers(1, 7), st.integers(1, 7))


def _index(window) -> np.ndarray:
    return np.asarray(to_numpy(swin_relative_index(window)))


def _offsets(window) -> tuple[np.ndarray, np.ndarray]:
    return tuple(np.asarray(to_numpy(a)) for a in window_offsets(window))


def _rows_of_offsets_are_a_bijection(index: np.ndarray, window) -> bool:
    """Every pair reads a row of the table, pairs of one offset read one row, different offsets different rows."""
    dh, dw = _offsets(window)
    seen: dict[tuple[int, int], int] = {}
    for offset, row in zip(zip(dh.ravel().tolist(), dw.ravel().tolist(), strict=True), index.ravel().tolist(),
                           strict=True):
        if seen.setdefault(offset, row) != row:
            return False
    rows = list(seen.values())
    return len(set(rows)) == len(rows) == relative_rows(window) and min(rows) >= 0 and max(rows) < len(rows)


@given(window=windows)
def test_the_swin_index_is_a_bijection_of_offsets_onto_the_table(window):
    assert _rows_of_offsets_are_a_bijection(_index(window), window)
    wh, ww = window
    centre = (wh - 1) * (2 * ww - 1) + (ww - 1)
    assert np.all(np.diag(_index(window)) == centre)  # a token and itself: offset (0, 0), the centre row


def test_the_bijection_property_fails_on_wrong_indices():
    window = (3, 4)
    (wh, ww), (dh, dw) = window, _offsets(window)
    stride = (dh + wh - 1) * (2 * ww) + (dw + ww - 1)  # past the table
    by_window = (dh + wh) * (2 * ww - 1) + (dw + ww)  # past the table
    flattened = dh * ww + dw + wh * ww  # the 1-D token distance: offsets collide
    for wrong in (stride, by_window, flattened):
        assert not _rows_of_offsets_are_a_bijection(wrong, window)


@given(window=windows, seed=st.integers(0, 2**32 - 1), form=st.sampled_from(["swin", "swinv2"]))
def test_the_bias_depends_only_on_the_offset(xp, window, seed, form):
    """Pairs at the same (Δh, Δw) get the same bias, in every head; the offset is the query minus the key."""
    rng = np.random.default_rng(seed)
    if form == "swin":
        table = rng.standard_normal((relative_rows(window), 2))
        bias = np.asarray(to_numpy(swin_bias(xp.asarray(table), window)))
    else:
        mlp = (rng.standard_normal((2, 16)), rng.standard_normal(16), rng.standard_normal((16, 2)))
        bias = np.asarray(to_numpy(swinv2_bias(window, *(xp.asarray(a) for a in mlp), pretrained_window=None)))
    dh, dw = _offsets(window)
    for offset in set(zip(dh.ravel().tolist(), dw.ravel().tolist(), strict=True)):
        a, b = np.nonzero((dh == offset[0]) & (dw == offset[1]))
        assert np.all(bias[:, a, b] == bias[:, a[:1], b[:1]])
    if form == "swin":  # the row of the offset (Δh, Δw), query minus key
        wh, ww = window
        rows = (dh + wh - 1) * (2 * ww - 1) + (dw + ww - 1)
        np.testing.assert_array_equal(bias, np.moveaxis(table[rows], -1, 0))


def test_bias_only_of_the_offset_fails_on_a_bias_of_positions():
    """The property's check rejects a table read by the query's own row (a position, not an offset)."""
    window = (3, 3)
    dh, dw = _offsets(window)
    rows = np.arange(9)[:, None] + 0 * dh
    bias = np.random.default_rng(0).standard_normal(9)[rows]
    same = [(bias[(dh == i) & (dw == j)] == bias[(dh == i) & (dw == j)][0]).all() for i in range(-2, 3)
            for j in range(-2, 3)]
    assert not all(same)


@given(window=windows, seed=st.integers(0, 2**32 - 1))
def test_beit_adds_three_cls_rows_around_the_swin_block(xp, window, seed):
    rng = np.random.default_rng(seed)
    r = relative_rows(window)
    table = rng.standard_normal((r + 3, 2))
    bias = np.asarray(to_numpy(beit_bias(xp.asarray(table), window, table_window=window)))
    np.testing.assert_array_equal(bias[:, 1:, 1:], to_numpy(swin_bias(xp.asarray(table[:r]), window)))
    assert np.all(bias[:, 0, 1:] == table[r][:, None])  # CLS query, patch keys
    assert np.all(bias[:, 1:, 0] == table[r + 1][:, None])  # patch queries, CLS key
    np.testing.assert_array_equal(bias[:, 0, 0], table[r + 2])


@given(window=st.integers(1, 9), new=windows, seed=st.integers(0, 2**32 - 1))
def test_beit_resampling_keeps_the_cls_rows_and_a_constant_table(xp, window, new, seed):
    """The same window is the identity; the CLS rows are never resampled; a constant table stays constant (the
    two weights of each axis sum to 1: within 4 roundings of the constant)."""
    rng = np.random.default_rng(seed)
    r = relative_rows((window, window))
    table = rng.standard_normal((r + 3, 2))
    same = to_numpy(beit_resample_table(xp.asarray(table), window, (window, window)))
    np.testing.assert_array_equal(same, table)
    out = np.asarray(to_numpy(beit_resample_table(xp.asarray(table), window, new)))
    assert out.shape == (relative_rows(new) + 3, 2)
    np.testing.assert_array_equal(out[-3:], table[-3:])
    constant = np.full((r + 3, 2), 1.7)
    resampled = np.asarray(to_numpy(beit_resample_table(xp.asarray(constant), window, new)))
    assert np.all(np.abs(resampled - 1.7) <= 4 * 2.0**-53 * 1.7)


@given(window=st.integers(1, 9), pretrained=st.one_of(st.none(), st.integers(2, 12)), seed=st.integers(0, 2**32 - 1))
def test_swinv2_bias_lies_in_0_16_and_is_even_in_the_offset_when_the_mlp_is(xp, window, pretrained, seed):
    """``16·σ`` keeps the bias in (0, 16); an MLP even in its input (``w1`` of the offset's sign pattern
    cancelled) makes the bias of (Δh, Δw) that of (−Δh, −Δw): the coordinates are odd in the offset."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((2, 8))
    w1 = np.concatenate([w1, -w1], axis=1)  # relu(c·w) + relu(−c·w) = |c·w|: even in c
    w2 = np.tile(rng.standard_normal((8, 3)), (2, 1))
    b1 = np.zeros(16)
    bias = np.asarray(to_numpy(swinv2_bias(window, *(xp.asarray(a) for a in (w1, b1, w2)),
                                           pretrained_window=pretrained)))
    assert np.all((bias > 0) & (bias < 16))
    # (a, b) ↔ (b, a) is −Δ: the same 16 products summed in another order, within 1e-13 of the bias (≤ 16)
    np.testing.assert_allclose(bias, np.swapaxes(bias, 1, 2), rtol=0, atol=16e-13)


def test_swinv2_pretrained_window_equal_to_the_window_changes_nothing(xp):
    rng = np.random.default_rng(3)
    mlp = [xp.asarray(a) for a in (rng.standard_normal((2, 8)), rng.standard_normal(8), rng.standard_normal((8, 2)))]
    np.testing.assert_array_equal(to_numpy(swinv2_bias(6, *mlp, pretrained_window=None)),
                                  to_numpy(swinv2_bias(6, *mlp, pretrained_window=6)))


# ------------------------------------------------------------------------------------------------ mistakes
def _standard_inputs() -> list[BiasTableInputs]:
    """One input per form and situation, each able to show every mistake of its form."""
    rng = np.random.default_rng(37)

    def mlp():
        return rng.standard_normal((2, 64)), rng.standard_normal(64), 0.2 * rng.standard_normal((64, 3))

    return [BiasTableInputs("swin", (7, 7), table=rng.standard_normal((169, 3))),
            BiasTableInputs("swin", (4, 6), table=rng.standard_normal((77, 3))),
            BiasTableInputs("beit", (5, 5), table=rng.standard_normal((84, 3)), table_window=(5, 5)),
            BiasTableInputs("beit", (7, 6), table=rng.standard_normal((84, 3)), table_window=(5, 5)),
            BiasTableInputs("swinv2", (8, 8), mlp=mlp(), pretrained_window=None),
            BiasTableInputs("swinv2", (12, 12), mlp=mlp(), pretrained_window=(8, 8))]


def test_every_mistake_is_shown_by_a_standard_input_and_named_from_its_output():
    shown = set()
    for inputs in _standard_inputs():
        reference, bound = inputs.reference(), bias_table_bound(inputs)
        for mistake in BIAS_TABLE_MISTAKES:
            wrong = mistake.compute(inputs) if inputs.form in mistake.forms else None
            if wrong is None:
                continue
            values, _ = wrong
            if values.shape == reference.shape:
                assert np.abs(values - reference).max() > 100 * bound.max(), mistake.name
            assert identify_bias_table(values, inputs) == mistake.name
            assert identify_bias_table(values.astype(np.float32), inputs) == mistake.name
            shown.add(mistake.name)
    assert shown == {m.name for m in BIAS_TABLE_MISTAKES}


def test_a_correct_port_is_named_nothing():
    """The reference, and a port computing in float32 (the rows, the MLP and the sigmoid), match no mistake."""
    for inputs in _standard_inputs():
        assert identify_bias_table(inputs.reference(), inputs) is None
        assert identify_bias_table(inputs.reference().astype(np.float32), inputs) is None
        if inputs.form == "swinv2":
            w1, b1, w2 = (a.astype(np.float32) for a in inputs.mlp)
            coords = np.asarray(to_numpy(refpos.encodings.bias_table.swinv2_log_coords(
                inputs.window, pretrained_window=inputs.pretrained_window))).astype(np.float32).reshape(-1, 2)
            z = np.maximum(coords @ w1 + b1, np.float32(0)) @ w2
            rows = np.float32(16) / (np.float32(1) + np.exp(-z))
            port = np.moveaxis(rows[np.asarray(to_numpy(swin_relative_index(inputs.window)))], -1, 0)
            assert port.dtype == np.float32
            assert identify_bias_table(port, inputs) is None


# ------------------------------------------------------------------------------------------ inputs, encoding
@pytest.mark.parametrize(("call", "name"), [
    (lambda: swin_relative_index(0), "window"),
    (lambda: swin_relative_index((3, 4, 5)), "window"),
    (lambda: swin_relative_index(2.0), "window"),
    (lambda: swin_bias(np.zeros((10, 2)), 2), "table"),
    (lambda: beit_bias(np.zeros((13, 2)), 3, table_window=2), "table"),
    (lambda: beit_bias(np.zeros((6 * 8 + 3 - 6, 2)), 3, table_window=(3, 4)), "table"),
    (lambda: swinv2_bias(4, np.zeros((3, 8)), np.zeros(8), np.zeros((8, 2)), pretrained_window=None), "w1"),
    (lambda: swinv2_bias(4, np.zeros((2, 8)), np.zeros(8), np.zeros((8, 2)), pretrained_window=1),
     "pretrained_window"),
    (lambda: window_bias("swin", 2, table=np.zeros((9, 2)), table_window=2), "table_window"),
    (lambda: window_bias("beit", 2, table=np.zeros((12, 2))), "table_window"),
    (lambda: window_bias("swin-v3", 2), "form"),
])
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


def test_a_non_square_beit_table_is_refused_only_when_it_must_be_resampled():
    table = np.zeros((5 * 7 + 3, 2))
    assert np.asarray(to_numpy(beit_bias(table, (3, 4), table_window=(3, 4)))).shape == (2, 13, 13)
    with pytest.raises(ValueError, match="table_window must be square"):
        beit_bias(table, (4, 4), table_window=(3, 4))


def test_window_bias_in_the_pipeline_is_the_bias_added_to_the_logits(xp):
    """A Swin window layer: self_attention with WindowBias equals softmax(q·kᵀ/√d + B)·v, computed here."""
    rng = np.random.default_rng(5)
    window, heads, d = (3, 3), 2, 4
    table = rng.standard_normal((relative_rows(window), heads))
    bias = swin_bias(xp.asarray(table), window)
    weights = refpos.AttentionWeights(*(xp.asarray(rng.standard_normal((8, 8))) for _ in range(3)), n_heads=heads)
    x = rng.standard_normal((9, 8))
    _, trace = refpos.self_attention(xp.asarray(x), weights, encoding=WindowBias(bias))
    q, k, v = (np.asarray(to_numpy(trace[name])) for name in ("Q", "K", "V"))  # (H, T, d): unbatched
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(d) + np.asarray(to_numpy(bias))
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected = expected / expected.sum(-1, keepdims=True) @ v
    np.testing.assert_allclose(np.asarray(to_numpy(trace["O"])), expected, rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="k_positions"):
        WindowBias(bias).bias(xp.asarray([0, 1]), xp.asarray([0, 9]), heads)
    assert np.asarray(to_numpy(beit_relative_index(1))).tolist() == [[3, 1], [2, 0]]
    assert _index(1).tolist() == [[0]]


# -------------------------------------------------------------------------------------------------- goldens
def test_golden_cases_are_certified_within_their_tolerance():
    """Every case of refpos.golden.bias_table_cases: refpos's float64 bias within the case's float64 tolerance of
    the mpmath values, and the reference adapter reproduces it through the case's call."""
    from refpos.golden.bias_table_cases import bias_table_cases
    from refpos.golden.manifest import case_entry
    from refpos.testing.adapter import window_bias as contract_window_bias

    for case in bias_table_cases():
        entry = case_entry(case, {}, certify=True)
        assert entry["outputs"]["bias"]["certified"]["within_float64_tolerance"], case.id
        args = [case.inputs[a["input"]] if "input" in a else a["value"] for a in case.parameters["call"]["args"]]
        np.testing.assert_array_equal(contract_window_bias(*args), case.outputs["bias"].array)
