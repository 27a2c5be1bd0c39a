r"""Spec: factorised tables read at per-patch indices (docs/axis-tables.md#the-math): ``axis_table_positions``.

The oracle follows the formula with Python loops, independently of any implementation; each property is shown
failing on a tiny wrong implementation (``test_the_properties_catch_mutants``).

Tolerance (docs/axis-tables.md#mistakes, derived for a float32 computation): ``(2u + u²)·(|a| + |b|)`` per entry,
``a`` and ``b`` the two rows' entries read, ``u`` the unit roundoff of ``INFO["dtype"]``; a padding patch adds
exactly zero.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.golden.exact.ulp import MANTISSA
from refpos.testing.strategies_axis_tables import axis_table_calls

#: per variant: whether the first index reads the row table, and the padding rule (none, patch, axis)
RULES = {"pix2struct": (True, "none"), "gemma4": (False, "patch"), "gemma4_unified": (False, "axis")}


def unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def oracle(indices, row_table, column_table, variant, magnitude=False):
    """``m_r·E_row[max(r, 0)] + m_c·E_col[max(c, 0)]`` per patch, in loops (``magnitude``: of the absolute values)."""
    row_first, padding = RULES[variant]
    width = len(row_table[0])
    out = np.zeros((*indices.shape[:-1], width))
    for p in np.ndindex(indices.shape[:-1]):
        first, second = int(indices[p][0]), int(indices[p][1])
        r, c = (first, second) if row_first else (second, first)
        keep_r = keep_c = not (padding == "patch" and first == -1 and second == -1)
        if padding == "axis":
            keep_r, keep_c = r != -1, c != -1
        for k in range(width):
            a, b = float(row_table[max(r, 0)][k]), float(column_table[max(c, 0)][k])
            if magnitude:
                a, b = abs(a), abs(b)
            out[p][k] = (a if keep_r else 0.0) + (b if keep_c else 0.0)
    return out


def matches(fn, call, u: float) -> None:
    got = np.asarray(fn(**call), dtype=np.float64)
    expected = oracle(**call)
    assert got.shape == expected.shape
    atol = (2 * u + u * u) * oracle(**call, magnitude=True)
    assert np.all(np.abs(got - expected) <= atol), f"largest error {np.abs(got - expected).max():.3g}"


def factorises(fn, call) -> None:
    """Moving a patch along its row changes only the column table's part: e(r, c) − e(r, c') is the same on every
    row (exact for float32 tables: each is a difference of the same two stored values)."""
    row_first, _ = RULES[call["variant"]]
    rows, cols = len(call["row_table"]), len(call["column_table"])
    pairs = [(r, c) for r in range(rows) for c in range(cols)]
    indices = np.array([(r, c) if row_first else (c, r) for r, c in pairs], dtype=np.int64)
    got = np.asarray(fn(**{**call, "indices": indices}), dtype=np.float64).reshape(rows, cols, -1)
    expected = oracle(**{**call, "indices": indices}).reshape(rows, cols, -1)
    atol = 4 * 2.0**-24 * (np.abs(expected).max() + 1.0)
    np.testing.assert_allclose(got - got[:, :1], expected - expected[:, :1], atol=atol)


@given(call=axis_table_calls())
def test_the_positions_match_the_formula(impl, call):
    matches(require(impl, "axis_table_positions"), call, unit(impl))


@given(call=axis_table_calls())
def test_the_positions_factorise_over_rows_and_columns(impl, call):
    factorises(require(impl, "axis_table_positions"), call)


def test_a_padding_patch_adds_exactly_zero(impl):
    fn = require(impl, "axis_table_positions")
    table = np.arange(12.0).reshape(3, 4) + 1
    for variant in ("gemma4", "gemma4_unified"):
        out = np.asarray(fn(np.array([[-1, -1], [0, 2]]), table, 2 * table, variant), dtype=np.float64)
        assert np.all(out[0] == 0.0) and np.all(out[1] != 0.0), variant


def test_an_index_past_its_table_names_the_parameter(impl):
    fn = require(impl, "axis_table_positions")
    with pytest.raises(ValueError, match="indices"):
        fn(np.array([[3, 0]]), np.ones((3, 2)), np.ones((3, 2)), "pix2struct")
    with pytest.raises(ValueError, match="indices"):
        fn(np.array([[-1, 0]]), np.ones((3, 2)), np.ones((3, 2)), "pix2struct")


def test_the_properties_catch_mutants():
    """Each property fails on a tiny wrong implementation: the axes swapped, indices from 1, padding read."""
    u = 2.0**-53
    rng = np.random.default_rng(0)
    call = {"indices": np.array([[0, 1], [2, 0], [1, 1], [-1, -1], [-1, 2]]), "row_table": rng.standard_normal((3, 4)),
            "column_table": rng.standard_normal((3, 4)), "variant": "gemma4_unified"}

    def swapped(indices, row_table, column_table, variant):
        return oracle(indices, column_table, row_table, variant)

    def from_one(indices, row_table, column_table, variant):
        return oracle(np.where(indices > 0, indices - 1, indices), row_table, column_table, variant)

    def padding_read(indices, row_table, column_table, variant):
        return oracle(np.maximum(indices, 0), row_table, column_table, variant)

    def row_only(indices, row_table, column_table, variant):
        return oracle(indices, row_table, 0 * column_table + column_table[:1], variant)

    for check in (lambda: matches(swapped, call, u), lambda: matches(from_one, call, u),
                  lambda: matches(padding_read, call, u), lambda: factorises(row_only, call)):
        with pytest.raises(AssertionError):
            check()
    matches(oracle, call, u)
    factorises(oracle, call)
