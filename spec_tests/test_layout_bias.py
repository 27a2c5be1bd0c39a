r"""Spec: a document model's relative layout bias (docs/layout-bias.md#the-math): ``layout_bias``.

The oracle follows the formula with Python loops and its own bucket function (T5's, written from the paper's
description), independently of any implementation; each property is shown failing on a tiny wrong implementation
(``test_the_properties_catch_mutants``).

Tolerance (docs/layout-bias.md#mistakes, derived for a float32 computation, ``u`` the unit roundoff of
``INFO["dtype"]``): the three rows read are the tables' values, exact; two additions and the division by ``√d``
round, so per entry ``4u·(1 + 4u)·Σ|rows|/√d``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.golden.exact.ulp import MANTISSA
from refpos.testing.strategies_layout_bias import layout_calls


def unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def bucket(rel: int, buckets: int, distance: int) -> int:
    """T5's bidirectional bucket: half the buckets per direction, half of those exact, the rest logarithmic up to
    ``distance``."""
    half = buckets // 2
    exact = half // 2
    n = abs(rel)
    if n < exact:
        b = n
    else:
        b = min(exact + int(math.log(n / exact) / math.log(distance / exact) * (half - exact)), half - 1)
    return b + (half if rel > 0 else 0)


def oracle(rel_table, x_table, y_table, positions, bbox, max_distance, max_2d_distance, head_dim, u=None):
    """``(R[b(Δp)] + X[b2(Δx0)] + Y[b2(Δy1)]) / √d`` per head and pair, in loops; with ``u``: the bound of a port
    at unit roundoff ``u`` (module docstring)."""
    p = list(np.asarray(positions).reshape(-1))
    boxes = np.asarray(bbox).reshape(-1, 4).tolist()
    heads, t = len(rel_table[0]), len(p)
    out = np.zeros((heads, t, t))
    for i in range(t):
        for j in range(t):
            rows = (rel_table[bucket(int(p[j] - p[i]), len(rel_table), max_distance)],
                    x_table[bucket(boxes[j][0] - boxes[i][0], len(x_table), max_2d_distance)],
                    y_table[bucket(boxes[j][3] - boxes[i][3], len(y_table), max_2d_distance)])
            for h in range(heads):
                terms = [float(r[h]) for r in rows]
                out[h, i, j] = (4 * u * (1 + 4 * u) * sum(map(abs, terms)) if u else sum(terms)) / math.sqrt(head_dim)
    return out[None]


def matches(fn, call, u: float) -> None:
    got = np.asarray(fn(**call), dtype=np.float64)
    expected = oracle(**call)
    assert got.shape == expected.shape
    assert np.all(np.abs(got - expected) <= oracle(**call, u=u)), f"largest error {np.abs(got - expected).max():.3g}"


def shift_invariant(fn, call) -> None:
    """Every place and every coordinate moved by one amount: the bias is unchanged (it reads differences only)."""
    moved = {**call, "positions": np.asarray(call["positions"]) + 7, "bbox": np.asarray(call["bbox"]) + 3}
    np.testing.assert_array_equal(np.asarray(fn(**moved)), np.asarray(fn(**call)))


@given(call=layout_calls())
def test_the_bias_matches_the_formula(impl, call):
    matches(require(impl, "layout_bias"), call, unit(impl))


@given(call=layout_calls())
def test_the_bias_reads_differences_only(impl, call):
    shift_invariant(require(impl, "layout_bias"), call)


def test_bad_input_names_the_parameter(impl):
    fn = require(impl, "layout_bias")
    rel, xy = np.ones((32, 2)), np.ones((64, 2))
    good = {"rel_table": rel, "x_table": xy, "y_table": xy, "positions": np.arange(3),
            "bbox": np.array([[[1, 2, 5, 6], [3, 4, 9, 9], [0, 0, 1, 1]]]), "head_dim": 4}
    fn(**good)
    with pytest.raises(ValueError, match="y_table"):
        fn(**{**good, "y_table": np.ones((64, 3))})
    with pytest.raises(ValueError, match="x_table"):
        fn(**{**good, "x_table": None})
    with pytest.raises(ValueError, match="bbox"):
        fn(**{**good, "bbox": None})
    with pytest.raises(ValueError, match="max_distance"):
        fn(**{**good, "max_distance": 8})  # not beyond the 8 exact buckets of 32
    with pytest.raises(ValueError, match="rel_table"):
        fn(**{**good, "rel_table": np.ones((31, 2))})


def test_the_properties_catch_mutants():
    """Each property fails on a tiny wrong implementation: the x and y tables swapped in what they read, the y
    distances between top edges, the bias not divided by √d; a port reading absolute places is not shift
    invariant."""
    u = 2.0**-53
    rng = np.random.default_rng(0)
    call = {"rel_table": rng.standard_normal((32, 2)), "x_table": rng.standard_normal((64, 2)),
            "y_table": rng.standard_normal((64, 2)), "positions": np.arange(5),
            "bbox": np.array([[[10, 20, 30, 40], [12, 25, 300, 41], [400, 5, 420, 600], [0, 300, 999, 310],
                               [9, 18, 35, 44]]]), "max_distance": 128, "max_2d_distance": 256, "head_dim": 16}

    def swapped(**c):
        return oracle(**{**c, "bbox": np.asarray(c["bbox"])[..., [3, 1, 2, 0]]})

    def top_edge(**c):
        return oracle(**{**c, "bbox": np.asarray(c["bbox"])[..., [0, 1, 2, 1]]})

    def unscaled(**c):
        return oracle(**{**c, "head_dim": 1})

    for port in (swapped, top_edge, unscaled):
        with pytest.raises(AssertionError):
            matches(port, call, u)
    matches(oracle, call, u)
    shift_invariant(oracle, call)

    def absolute(**c):  # the 1-D table read at the places themselves
        out = oracle(**c)
        return out + np.asarray(c["positions"])[None, None, :, None]

    with pytest.raises(AssertionError):
        shift_invariant(absolute, call)
