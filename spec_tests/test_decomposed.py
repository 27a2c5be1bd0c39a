"""Spec: decomposed relative positions (docs/decomposed.md): the query's terms against the tables of the height
and width offsets, the coordinates scaled to the longer grid, the tables resampled to ``2·max(q, k) − 1`` rows.

The oracle (refpos/golden/cases/grid_exact.py, in float64) loops over the pairs with the row index in exact rationals;
tolerance :func:`refpos.encodings.decomposed.decomposed_error_bound` at the unit roundoff of the declared dtype.
Each property is shown failing on a tiny wrong adapter (``test_*_catches_*``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.encodings.decomposed import decomposed_error_bound
from refpos.golden.cases.grid_exact import apply_taps, axis_taps, decomposed_terms
from refpos.golden.exact.ulp import MANTISSA
from refpos.testing import strategies_decomposed as dst


def _unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def check_decomposed(impl, case: dict) -> None:
    add = require(impl, "add_decomposed_rel_pos")
    expected = case["attn"] + decomposed_terms(case["q"], case["rel_pos_h"], case["rel_pos_w"], case["q_size"],
                                               case["k_size"])
    got = np.asarray(add(**case))
    u = _unit(impl)
    bound = decomposed_error_bound(case["q"], case["rel_pos_h"], case["rel_pos_w"], case["q_size"], case["k_size"],
                                   unit_roundoff=u) + 2 * u * float(np.abs(expected).max())
    np.testing.assert_allclose(got, expected, rtol=0, atol=bound)


@given(case=dst.decomposed_inputs())
def test_decomposed_relative_positions_match_the_formula(impl, case):
    check_decomposed(impl, case)


@given(case=dst.decomposed_inputs(max_side=5))
def test_with_equal_grids_the_term_depends_only_on_the_offset(impl, case):
    """One query vector everywhere, tables of ``2n − 1`` rows: ``T[y, x, y', x']`` is a function of the offsets."""
    add = require(impl, "add_decomposed_rel_pos")
    n = case["q_size"][0]
    q = np.broadcast_to(case["q"][:, :1], (2, n * n, case["q"].shape[-1])).copy()
    table = np.resize(case["rel_pos_h"], (2 * n - 1, q.shape[-1]))
    terms = np.asarray(add(np.zeros((2, n * n, n * n)), q, table, table, [n, n], [n, n])).reshape(2, n, n, n, n)
    # two entries of the same formula, each within its bound (decomposed_error_bound), twice
    u = _unit(impl)
    bound = decomposed_error_bound(q, table, table, [n, n], [n, n], unit_roundoff=u)
    bound += 2 * u * float(np.abs(terms).max())  # the result stored in the dtype, as in check_decomposed
    np.testing.assert_allclose(terms[:, 1:, 1:, 1:, 1:], terms[:, :-1, :-1, :-1, :-1], rtol=0, atol=2 * bound)


def _adapter(**functions) -> SimpleNamespace:
    return SimpleNamespace(INFO={"name": "mutant", "dtype": "float64"}, **functions)


def test_the_decomposed_check_catches_a_missing_ratio():
    from refpos.testing.adapter import add_decomposed_rel_pos as reference

    rng = np.random.default_rng(2)
    case = {"attn": np.zeros((1, 8, 8)), "q": rng.standard_normal((1, 8, 3)), "rel_pos_h": rng.standard_normal((7, 3)),
            "rel_pos_w": rng.standard_normal((7, 3)), "q_size": [4, 2], "k_size": [2, 4]}
    check_decomposed(_adapter(add_decomposed_rel_pos=reference), case)

    def unscaled(attn, q, rel_pos_h, rel_pos_w, q_size, k_size):
        out = np.array(attn, dtype=np.float64)
        for axis, table in ((0, rel_pos_h), (1, rel_pos_w)):
            n_q, n_k = q_size[axis], k_size[axis]
            resized = apply_taps(table, axis_taps(table.shape[0], 2 * max(n_q, n_k) - 1, mode="linear"), 0)
            for index in np.ndindex(q_size[0], q_size[1], k_size[0], k_size[1]):
                i, j = index[axis], index[2 + axis]
                row = resized[i - j + n_k - 1]  # the q/k ratio left out
                query = q[..., index[0] * q_size[1] + index[1], :]
                out[..., index[0] * q_size[1] + index[1], index[2] * k_size[1] + index[3]] += (query * row).sum(-1)
        return out

    with pytest.raises(AssertionError):
        check_decomposed(_adapter(add_decomposed_rel_pos=unscaled), case)
