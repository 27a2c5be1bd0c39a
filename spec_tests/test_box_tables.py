r"""Spec: a document token's box positions (docs/box-tables.md#the-math): ``box_positions``.

The oracle follows the formula with Python loops, independently of any implementation; each property is shown
failing on a tiny wrong implementation (``test_the_properties_catch_mutants``).

Tolerance (docs/box-tables.md#mistakes, derived for a float32 computation, ``u`` the unit roundoff of
``INFO["dtype"]``): the rows read are the tables' values, exact; the five additions of the six rows round, so per
entry ``5u·Σ|rows|·(1 + 6u)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.golden.exact.ulp import MANTISSA
from refpos.testing.strategies_box_tables import box_calls


def unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def oracle(x_table, y_table, h_table, w_table, bbox, u=None):
    """``X[x0] + Y[y0] + X[x1] + Y[y1] + H[y1 − y0] + W[x1 − x0]`` per token, in loops; with ``u``: the bound of a
    port computing at unit roundoff ``u`` (module docstring)."""
    boxes = np.asarray(bbox).reshape(-1, 4)
    width = len(x_table[0])
    out = np.zeros((len(boxes), width))
    for n, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
        for k in range(width):
            terms = [x_table[x0][k], y_table[y0][k], x_table[x1][k], y_table[y1][k], h_table[y1 - y0][k],
                     w_table[x1 - x0][k]]
            out[n, k] = 5 * u * sum(abs(float(t)) for t in terms) * (1 + 6 * u) if u else sum(map(float, terms))
    return out.reshape(*np.shape(bbox)[:-1], width)


def matches(fn, call, u: float) -> None:
    got = np.asarray(fn(**call), dtype=np.float64)
    expected = oracle(**call)
    assert got.shape == expected.shape
    assert np.all(np.abs(got - expected) <= oracle(**call, u=u)), f"largest error {np.abs(got - expected).max():.3g}"


def translation_moves_corner_rows_only(fn, call) -> None:
    """A box moved by ``(dx, dy)`` keeps its height and width: its output changes by the corner rows alone."""
    b = np.asarray(call["bbox"])
    if int(b[..., 2].max()) + 1 >= len(call["x_table"]) or int(b[..., 3].max()) + 1 >= len(call["y_table"]):
        return
    moved = b + np.array([1, 1, 1, 1])
    change = np.asarray(fn(**{**call, "bbox": moved})) - np.asarray(fn(**call))
    x, y = np.asarray(call["x_table"]), np.asarray(call["y_table"])
    corners = (x[moved[..., 0]] + y[moved[..., 1]] + x[moved[..., 2]] + y[moved[..., 3]]
               - x[b[..., 0]] - y[b[..., 1]] - x[b[..., 2]] - y[b[..., 3]])
    np.testing.assert_allclose(change, corners, rtol=0, atol=1e-5 * (1 + np.abs(corners).max()))


@given(call=box_calls())
def test_the_positions_match_the_formula(impl, call):
    matches(require(impl, "box_positions"), call, unit(impl))


@given(call=box_calls())
def test_a_moved_box_changes_by_its_corner_rows(impl, call):
    translation_moves_corner_rows_only(require(impl, "box_positions"), call)


def refuses_outside_the_tables(fn) -> None:
    """A corner past its table, a negative coordinate, a negative height or width (``x1 < x0``, ``y1 < y0``), a box
    of three values: a ``ValueError`` naming ``bbox``, nothing clipped or wrapped into the table."""
    tables = {f"{t}_table": np.ones((8, 3)) for t in "xyhw"}
    fn(**tables, bbox=np.array([[[1, 2, 5, 6]]]))
    for bbox in ([[[1, 2, 8, 6]]], [[[5, 2, 1, 6]]], [[[1, 6, 5, 2]]], [[[-1, 2, 5, 6]]], [[[1, 2, 5]]]):
        with pytest.raises(ValueError, match="bbox"):
            fn(**tables, bbox=np.array(bbox))


def test_bad_input_names_the_parameter(impl):
    fn = require(impl, "box_positions")
    refuses_outside_the_tables(fn)
    tables = {f"{t}_table": np.ones((8, 3)) for t in "xyhw"}
    with pytest.raises(ValueError, match="w_table"):
        fn(**{**tables, "w_table": np.ones((8, 4))}, bbox=np.array([[[1, 2, 5, 6]]]))
    with pytest.raises(TypeError, match="bbox"):
        fn(**tables, bbox=np.array([[[1.0, 2.0, 5.0, 6.0]]]))


def test_the_properties_catch_mutants():
    """Each property fails on a tiny wrong implementation: x and y swapped, the height and width tables left out,
    the height read from the width table; a port that wraps a negative extent to the table's last rows (NumPy
    indexing) or clips a coordinate into the table instead of refusing it."""
    u = 2.0**-53
    rng = np.random.default_rng(0)
    call = {f"{t}_table": rng.standard_normal((16, 3)) for t in "xyhw"}
    call["bbox"] = np.array([[[1, 2, 9, 5], [3, 7, 4, 12], [0, 0, 6, 1]]])

    def swapped(**c):
        return oracle(**{**c, "x_table": c["y_table"], "y_table": c["x_table"]})

    def no_extent(**c):
        return oracle(**{**c, "h_table": 0 * c["h_table"], "w_table": 0 * c["w_table"]})

    def height_from_width(**c):
        return oracle(**{**c, "h_table": c["w_table"]})

    for check in (lambda: matches(swapped, call, u), lambda: matches(no_extent, call, u),
                  lambda: matches(height_from_width, call, u)):
        with pytest.raises(AssertionError):
            check()
    matches(oracle, call, u)
    translation_moves_corner_rows_only(oracle, call)

    def wraps(**c):  # NumPy reads row −1 of a negative extent, and a box of three values as far as it goes
        b = np.asarray(c["bbox"])
        if b.shape[-1] != 4:
            return np.zeros((*b.shape[:-1], 3))
        return sum(np.asarray(t)[i] for t, i in ((c["x_table"], b[..., 0]), (c["y_table"], b[..., 1]),
                                                  (c["x_table"], b[..., 2] % 8), (c["y_table"], b[..., 3] % 8),
                                                  (c["h_table"], b[..., 3] - b[..., 1]),
                                                  (c["w_table"], b[..., 2] - b[..., 0])))

    def clips(**c):  # every coordinate clipped into the table first
        b = np.asarray(c["bbox"])
        if b.shape[-1] != 4:
            raise ValueError("bbox must hold four values")
        return oracle(**{**c, "bbox": np.clip(b, 0, len(c["x_table"]) - 1)}) * 0

    for port in (wraps, clips):
        with pytest.raises(pytest.fail.Exception):
            refuses_outside_the_tables(port)
