"""Spec: resampling as torch computes it and position tables resampled to a patch grid (docs/grid.md).

The oracles (refpos/golden/cases/grid_exact.py, in float64) apply torch's rules tap by tap, independently of the
reference's weight matrices. Tolerances: :func:`refpos.encodings.resample_bounds.resample_error_bound` at the unit
roundoff of the declared dtype (a correct port's source coordinates, weights and sums in that dtype); rows that
are copied (the extra tokens) compare as the input stored in the declared dtype. Each property is shown failing on
a tiny wrong adapter (``test_*_catches_*``).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.encodings.resample_bounds import resample_error_bound
from refpos.golden.cases.grid_exact import apply_taps, axis_taps, resample_table
from refpos.golden.exact.ulp import MANTISSA
from refpos.testing import strategies_grid as gst


def _unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def _out_sizes(call: dict) -> tuple[list[int], list[float | None]]:
    n_in = list(call["x"].shape[1:])
    if "size" in call:
        return list(call["size"]), [None] * len(n_in)
    out = [math.floor(n * s) for n, s in zip(n_in, call["scale_factor"], strict=True)]
    return out, [None] * len(n_in) if call["recompute_scale_factor"] else list(call["scale_factor"])


def _oracle(call: dict) -> np.ndarray:
    out_sizes, factors = _out_sizes(call)
    x = call["x"]
    options = {"mode": call["mode"], "align_corners": call.get("align_corners", False),
               "antialias": call.get("antialias", False)}
    for axis, (n_out, factor) in enumerate(zip(out_sizes, factors, strict=True), start=1):
        x = apply_taps(x, axis_taps(x.shape[axis], n_out, scale_factor=factor, **options), axis)
    return x


def check_interpolate(impl, call: dict) -> None:
    interpolate = require(impl, "interpolate")
    expected = _oracle(call)
    got = np.asarray(interpolate(**call))
    assert got.shape == expected.shape
    out_sizes, factors = _out_sizes(call)
    bound = resample_error_bound(list(call["x"].shape[1:]), out_sizes, mode=call["mode"], unit_roundoff=_unit(impl),
                                 magnitude=float(np.abs(call["x"]).max()),
                                 align_corners=call.get("align_corners", False), antialias=call.get("antialias", False),
                                 scale_factors=factors)
    np.testing.assert_allclose(got, expected, rtol=0, atol=bound)


@given(call=gst.resample_calls())
def test_interpolate_matches_torchs_rules(impl, call):
    check_interpolate(impl, call)


@given(call=gst.resample_calls(modes=("linear", "bilinear", "bicubic", "nearest")))
def test_resampling_to_the_same_size_is_the_identity(impl, call):
    interpolate = require(impl, "interpolate")
    call = {k: v for k, v in call.items() if k not in ("scale_factor", "recompute_scale_factor")}
    call["size"] = list(call["x"].shape[1:])
    # the resampling's own bound at equal sizes (each output a weighted sum of the input's taps)
    bound = resample_error_bound(call["size"], call["size"], mode=call["mode"], unit_roundoff=_unit(impl),
                                 magnitude=float(np.abs(call["x"]).max()),
                                 align_corners=call.get("align_corners", False), antialias=call.get("antialias", False))
    np.testing.assert_allclose(np.asarray(interpolate(**call)), call["x"], rtol=0, atol=bound)


@given(call=gst.resample_calls(modes=("bilinear", "bicubic", "nearest")))
def test_a_constant_stays_constant(impl, call):
    interpolate = require(impl, "interpolate")
    call = {**call, "x": np.full_like(call["x"], 0.75)}
    out_sizes, factors = _out_sizes(call)  # the resampling's bound for an input of size 0.75
    bound = resample_error_bound(list(call["x"].shape[1:]), out_sizes, mode=call["mode"], unit_roundoff=_unit(impl),
                                 magnitude=0.75, align_corners=call.get("align_corners", False),
                                 antialias=call.get("antialias", False), scale_factors=factors)
    np.testing.assert_allclose(np.asarray(interpolate(**call)), 0.75, rtol=0, atol=bound)


def check_position_table(impl, case: dict, way: dict) -> None:
    resample = require(impl, "resample_position_table")
    grid = case["grid"]
    args = (case["table"], grid, way, case["prefix_tokens"], case["suffix_tokens"])
    expected = resample_table(*args)
    got = np.asarray(resample(*args))
    assert got.shape == expected.shape
    side, u = case["side"], _unit(impl)
    target = grid[::-1] if way.get("axes", "hw") == "wh" else grid
    offset = way.get("scale_factor_offset")
    bound = resample_error_bound([side, side], list(target), mode=way["mode"], unit_roundoff=u,
                                 magnitude=float(np.abs(case["table"]).max()),
                                 align_corners=way.get("align_corners", False), antialias=way.get("antialias", False),
                                 scale_factors=None if offset is None else [(g + offset) / side for g in target],
                                 padding=way.get("padding", "border"))
    np.testing.assert_allclose(got, expected, rtol=0, atol=bound)
    if way.get("keep_extra", True):  # the extra rows are the input's, stored in the declared dtype
        n, prefix, suffix = got.shape[0], case["prefix_tokens"], case["suffix_tokens"]
        extra = np.concatenate([got[:prefix], got[n - suffix:]])
        table = case["table"]
        np.testing.assert_allclose(extra, np.concatenate([table[:prefix], table[table.shape[0] - suffix:]]), rtol=u,
                                   atol=0)


@given(case=gst.position_tables(), way=gst.grid_ways())
def test_a_position_table_is_resampled_around_its_extra_rows(impl, case, way):
    check_position_table(impl, case, way)


def test_bad_way_names_the_parameter(impl):
    resample = require(impl, "resample_position_table")
    with pytest.raises(ValueError, match="way"):
        resample(np.zeros((10, 2)), [3, 3], {"mode": "bicubic", "antialiasing": True}, 1, 0)


# ------------------------------------------------------------------------- each property on a wrong adapter
def _adapter(**functions) -> SimpleNamespace:
    return SimpleNamespace(INFO={"name": "mutant", "dtype": "float64"}, **functions)


def _reference_interpolate(**call):
    from refpos.testing.adapter import interpolate

    return interpolate(**call)


def test_the_interpolate_check_catches_align_corners_flipped():
    call = {"x": np.random.default_rng(0).standard_normal((1, 6, 6)), "size": [4, 9], "mode": "bicubic"}
    check_interpolate(_adapter(interpolate=_reference_interpolate), call)
    flipped = _adapter(interpolate=lambda **c: _reference_interpolate(**{**c, "align_corners": True}))
    with pytest.raises(AssertionError):
        check_interpolate(flipped, call)


def test_the_table_check_catches_the_cls_row_resampled():
    from refpos.testing.adapter import resample_position_table as reference

    case = {"table": np.random.default_rng(1).standard_normal((17, 3)), "side": 4, "grid": [5, 3],
            "prefix_tokens": 1, "suffix_tokens": 0}
    way = {"mode": "bicubic"}
    check_position_table(_adapter(resample_position_table=reference), case, way)
    cls_in_grid = _adapter(resample_position_table=lambda t, g, w, p, s: np.concatenate(
        [t[:1], reference(t[:16], g, w, 0, 0)]))
    with pytest.raises(AssertionError):
        check_position_table(cls_in_grid, case, way)
