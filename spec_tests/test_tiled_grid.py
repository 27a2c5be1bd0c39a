r"""Spec: a tiled image's positions before the local encoder (docs/tiled-grid.md#the-math):
``tiled_input_positions``.

The oracle follows the formula with Python loops, independently of any implementation; each property is shown
failing on a tiny wrong implementation (``test_the_properties_catch_mutants``).

Tolerance (docs/tiled-grid.md#mistakes, derived for a float32 computation, ``u`` the unit roundoff of
``INFO["dtype"]``): with ``t = tanh g`` returned within ``2u|t|`` and each product and sum rounded once, per entry
of the grid ``u(2|t|(|E| + |G|) + 2|1 − t||E| + |t||G| + |P|)(1 + 4u)``; on a patch also ``3u|t_pre||A_pre|(1 + 4u)``
for its pre-tile row and ``u|e|(1 + 4u)`` for the sum.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.golden.exact.ulp import MANTISSA
from refpos.testing.strategies_tiled_grid import tiled_grid_calls


def unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def oracle(embedding, tile_table, gate, pre_table, pre_gate, post_table, post_gate, aspect_ratio_id, max_num_tiles,
           u=None):
    """``(1 − tanh g)E_i + tanh g·G[a]_{t,i}`` plus ``tanh(g_pre)·A_pre[a]_t`` on the patches ``i ≥ 1``, in loops;
    with ``u``: the bound of a port computing at unit roundoff ``u`` (module docstring)."""
    rows, width = len(embedding), len(embedding[0])
    t, t_pre = math.tanh(gate), math.tanh(pre_gate)
    out = np.zeros((max_num_tiles, rows, width))
    for tile in range(max_num_tiles):
        for i in range(rows):
            for k in range(width):
                e = float(embedding[i][k])
                g = float(tile_table[aspect_ratio_id][(tile * rows + i) * width + k])
                a = float(pre_table[aspect_ratio_id][tile * width + k]) if i >= 1 else 0.0
                p = (1 - t) * e + t * g
                if u is None:
                    out[tile, i, k] = p + t_pre * a
                    continue
                bound = u * (2 * abs(t) * (abs(e) + abs(g)) + 2 * abs(1 - t) * abs(e) + abs(t * g) + abs(p))
                if i >= 1:
                    bound += u * (3 * abs(t_pre * a) + abs(p + t_pre * a))
                out[tile, i, k] = bound * (1 + 4 * u)
    return out


def matches(fn, call, u: float) -> None:
    got = np.asarray(fn(**call), dtype=np.float64)
    expected = oracle(**call)
    assert got.shape == expected.shape
    atol = oracle(**call, u=u)
    assert np.all(np.abs(got - expected) <= atol), f"largest error {np.abs(got - expected).max():.3g}"


def post_adds_nothing(fn, call) -> None:
    """The post-tile table and gate come after the local encoder: other values leave the output as it is."""
    other = {**call, "post_table": call["post_table"][::-1] + 1.0, "post_gate": -call["post_gate"] - 0.5}
    np.testing.assert_array_equal(np.asarray(fn(**other)), np.asarray(fn(**call)))


def class_row_without_pre(fn, call) -> None:
    """The class row of each tile gains no pre-tile row: another pre-tile table leaves it as it is."""
    other = {**call, "pre_table": call["pre_table"] + 1.0}
    np.testing.assert_array_equal(np.asarray(fn(**other))[:, 0], np.asarray(fn(**call))[:, 0])


@given(call=tiled_grid_calls())
def test_the_positions_match_the_formula(impl, call):
    matches(require(impl, "tiled_input_positions"), call, unit(impl))


@given(call=tiled_grid_calls())
def test_the_post_tile_table_adds_nothing_before_the_local_encoder(impl, call):
    post_adds_nothing(require(impl, "tiled_input_positions"), call)


@given(call=tiled_grid_calls())
def test_the_class_row_gains_no_pre_tile_row(impl, call):
    class_row_without_pre(require(impl, "tiled_input_positions"), call)


def test_bad_input_names_the_parameter(impl):
    fn = require(impl, "tiled_input_positions")
    call = {"embedding": np.ones((3, 2)), "tile_table": np.ones((4, 2 * 3 * 2)), "gate": 0.5,
            "pre_table": np.ones((4, 2 * 2)), "pre_gate": 0.5, "post_table": np.ones((4, 2 * 2)), "post_gate": 0.5,
            "aspect_ratio_id": 1, "max_num_tiles": 2}
    fn(**call)
    for change, name in [({"aspect_ratio_id": 4}, "aspect_ratio_id"), ({"tile_table": np.ones((4, 10))}, "tile_table"),
                         ({"max_num_tiles": 3}, "tile_table"), ({"post_table": np.ones((3, 4))}, "post_table")]:
        with pytest.raises(ValueError, match=name):
            fn(**{**call, **change})
    with pytest.raises(TypeError, match="gate"):
        fn(**{**call, "gate": "0.5"})


def test_the_properties_catch_mutants():
    """Each property fails on a tiny wrong implementation: the gate not tanh'd, the grid read patch by patch, the
    post-tile table added before the local encoder, the pre-tile row on the class token."""
    u = 2.0**-53
    rng = np.random.default_rng(0)
    call = {"embedding": rng.standard_normal((3, 2)), "tile_table": rng.standard_normal((4, 2 * 3 * 2)), "gate": 0.7,
            "pre_table": rng.standard_normal((4, 2 * 2)), "pre_gate": -0.4, "post_table": rng.standard_normal((4, 4)),
            "post_gate": 0.3, "aspect_ratio_id": 2, "max_num_tiles": 2}

    def no_tanh(**c):
        shaped = np.reshape(c["tile_table"][c["aspect_ratio_id"]], (c["max_num_tiles"], *np.shape(c["embedding"])))
        return oracle(**c) + (c["gate"] - math.tanh(c["gate"])) * (shaped - c["embedding"])

    def patch_major(**c):
        rows, width = np.shape(c["embedding"])
        table = np.array(c["tile_table"], dtype=np.float64)
        table[c["aspect_ratio_id"]] = table[c["aspect_ratio_id"]].reshape(rows, c["max_num_tiles"], width).transpose(
            1, 0, 2).ravel()
        return oracle(**{**c, "tile_table": table})

    def post_for_pre(**c):
        return oracle(**{**c, "pre_table": c["post_table"], "pre_gate": c["post_gate"]})

    def pre_on_class(**c):
        out = oracle(**c)
        rows = np.asarray(c["pre_table"][c["aspect_ratio_id"]]).reshape(c["max_num_tiles"], -1)
        out[:, 0] += math.tanh(c["pre_gate"]) * rows
        return out

    for check in (lambda: matches(no_tanh, call, u), lambda: matches(patch_major, call, u),
                  lambda: post_adds_nothing(post_for_pre, call), lambda: class_row_without_pre(pre_on_class, call)):
        with pytest.raises(AssertionError):
            check()
    matches(oracle, call, u)
    post_adds_nothing(oracle, call)
    class_row_without_pre(oracle, call)
