r"""Spec: fixed 2-D sin–cos position embeddings (docs/sincos2d.md#the-math): ``sincos_2d_grid``,
``sine_position_map``, ``sine_coordinates``.

The oracles below follow the formulas with Python loops over tokens, pixels and channels, independently of any
implementation. Each property is a function of the function under test; ``test_the_properties_catch_mutants``
shows each one failing on a tiny wrong implementation.

Tolerance: ``β = u·((8 + ln T)·θ + 4)`` per token, pixel or point, ``θ`` its largest angle and ``u`` the unit roundoff
of ``INFO["dtype"]`` (docs/sincos2d.md#mistakes derives it for a float32 computation: the coordinate's, the
frequency's and the angle's roundings, then ``sin``/``cos`` and the stored value).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.golden.ulp import MANTISSA
from refpos.testing.strategies_sincos2d import coordinate_inputs, grid_settings, mask_settings, padding_masks


def unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def bound(u: float, theta: np.ndarray, temperature) -> np.ndarray:
    t = max(temperature) if isinstance(temperature, list | tuple) else temperature
    return u * ((8.0 + math.log(t)) * np.abs(theta) + 4.0)


def pair(c: float, omega: float) -> tuple[float, float]:
    return math.sin(c * omega), math.cos(c * omega)


# ------------------------------------------------------------------------------------------- oracles
def grid_oracle(height, width, dim, temperature, axes, flatten, cls_rows) -> np.ndarray:
    quarter = dim // 4
    out = np.zeros((cls_rows + height * width, dim))
    for t in range(height * width):
        y, x = (t // width, t % width) if flatten == "row_major" else (t % height, t // height)
        for block, c in enumerate((y, x) if axes == "yx" else (x, y)):
            for j in range(quarter):
                s, co = pair(c, temperature ** (-j / quarter))
                out[cls_rows + t, block * 2 * quarter + j] = s
                out[cls_rows + t, block * 2 * quarter + quarter + j] = co
    return out


def mask_oracle(mask, num_features, temperature, normalize, offset=0.0) -> tuple[np.ndarray, np.ndarray]:
    """The embedding ``(B, H, W, 2F)`` and each pixel's largest angle ``(B, H, W, 1)``."""
    b, h, w = mask.shape
    t_y, t_x = (temperature, temperature) if not isinstance(temperature, list | tuple) else temperature
    out, theta = np.zeros((b, h, w, 2 * num_features)), np.zeros((b, h, w, 1))
    for n in range(b):
        for i in range(h):
            for j in range(w):
                y, x = float(mask[n, : i + 1, j].sum()), float(mask[n, i, : j + 1].sum())
                if normalize:
                    y = (y + offset) / (float(mask[n, :, j].sum()) + 1e-6) * 2 * math.pi
                    x = (x + offset) / (float(mask[n, i, :].sum()) + 1e-6) * 2 * math.pi
                theta[n, i, j] = max(abs(y), abs(x))
                for block, (c, t) in enumerate(((y, t_y), (x, t_x))):
                    for k in range(num_features // 2):
                        s, co = pair(c, t ** (-2 * k / num_features))
                        out[n, i, j, block * num_features + 2 * k: block * num_features + 2 * k + 2] = s, co
    return out, theta


def coordinate_oracle(coords, num_features, temperature, scale, swap_xy, layout, rule) -> np.ndarray:
    n = coords.shape[-1]
    order = [1, 0, *range(2, n)] if swap_xy and n >= 2 else list(range(n))
    half = num_features // 2
    out = np.zeros((*coords.shape[:-1], n * num_features))
    for p in np.ndindex(coords.shape[:-1]):
        for block, i in enumerate(order):
            for k in range(half):
                exponent = 2 * k / num_features if rule == "paired" else 2 * (k // 2) / half
                s, co = pair(float(coords[p][i]) * scale, temperature ** (-exponent))
                base = block * num_features
                u_col, v_col = (base + 2 * k, base + 2 * k + 1) if layout == "interleaved" else (base + k,
                                                                                                  base + half + k)
                out[p][u_col], out[p][v_col] = s, co
    return out


# ------------------------------------------------------------------------------------------- properties
def grid_matches(fn, settings: dict, u: float) -> None:
    got = np.asarray(fn(**settings), dtype=np.float64)
    expected = grid_oracle(**settings)
    assert got.shape == expected.shape
    theta = max(settings["height"], settings["width"]) - 1
    assert np.all(np.abs(got - expected) <= bound(u, np.array(theta), settings["temperature"])), \
        f"largest error {np.abs(got - expected).max():.3g}"


def grid_rows_rotate(fn, u: float) -> None:
    """Token (y + 1, x) is token (y, x) with each y pair turned by ω_j and the x block unchanged (axes "yx")."""
    height, width, dim = 5, 4, 16
    table = np.asarray(fn(height=height, width=width, dim=dim, temperature=100.0, axes="yx", flatten="row_major",
                          cls_rows=0), dtype=np.float64)
    omega = 100.0 ** (-np.arange(4) / 4)
    here, there = table[:-width], table[width:]
    atol = bound(u, np.array(height), 100.0) * 4
    np.testing.assert_allclose(there[:, :4], here[:, :4] * np.cos(omega) + here[:, 4:8] * np.sin(omega), atol=atol)
    np.testing.assert_allclose(there[:, 8:], here[:, 8:], atol=atol)


def mask_matches(fn, mask: np.ndarray, settings: dict, u: float) -> None:
    got = np.asarray(fn(mask, **settings), dtype=np.float64)
    expected, theta = mask_oracle(mask, **settings)
    assert got.shape == expected.shape
    assert np.all(np.abs(got - expected) <= bound(u, theta, settings["temperature"])), \
        f"largest error {np.abs(got - expected).max():.3g}"


def padding_is_ignored(fn, mask: np.ndarray, u: float) -> None:
    """With normalize, each image's valid corner gets the embedding of that corner alone (positions from the mask)."""
    whole = np.asarray(fn(mask, 8, normalize=True), dtype=np.float64)
    for n in range(mask.shape[0]):
        h, w = int(mask[n, :, 0].sum()), int(mask[n, 0].sum())
        alone = np.asarray(fn(np.ones((1, h, w), dtype=bool), 8, normalize=True), dtype=np.float64)[0]
        np.testing.assert_allclose(whole[n, :h, :w], alone, atol=bound(u, np.array(2 * math.pi), 10000.0) * 2)


def coordinates_match(fn, coords: np.ndarray, settings: dict, u: float) -> None:
    got = np.asarray(fn(coords, **settings), dtype=np.float64)
    expected = coordinate_oracle(coords, **settings)
    assert got.shape == expected.shape
    theta = np.abs(coords).max(axis=-1, keepdims=True) * settings["scale"]
    assert np.all(np.abs(got - expected) <= bound(u, theta, settings["temperature"])), \
        f"largest error {np.abs(got - expected).max():.3g}"


# ------------------------------------------------------------------------------------------- tests
@given(settings=grid_settings())
def test_grid_matches_the_formula(impl, settings):
    grid_matches(require(impl, "sincos_2d_grid"), settings, unit(impl))


def test_grid_rows_are_rotations_in_each_axis(impl):
    grid_rows_rotate(require(impl, "sincos_2d_grid"), unit(impl))


@given(mask=padding_masks(max_side=6), settings=mask_settings())
def test_mask_embedding_matches_the_formula(impl, mask, settings):
    mask_matches(require(impl, "sine_position_map"), mask, settings, unit(impl))


@given(mask=padding_masks())
def test_valid_pixels_get_the_embedding_of_the_unpadded_image(impl, mask):
    padding_is_ignored(require(impl, "sine_position_map"), mask, unit(impl))


@given(inputs=coordinate_inputs())
def test_coordinates_match_the_formula(impl, inputs):
    coords, settings = inputs
    coordinates_match(require(impl, "sine_coordinates"), coords, settings, unit(impl))


@pytest.mark.parametrize(("function", "args", "name"), [
    ("sincos_2d_grid", (2, 2, 6), "dim"), ("sincos_2d_grid", (0, 2, 8), "height"),
    ("sine_coordinates", (np.ones((2, 2)), 3), "width|num_features"),
])
def test_bad_sizes_name_the_parameter(impl, function, args, name):
    fn = require(impl, function)
    with pytest.raises(ValueError, match=name):
        fn(*args)


# ------------------------------------------------------------------------------------------- mutants
def _grid_columns_first(**kw):
    return grid_oracle(**{**kw, "axes": "xy" if kw["axes"] == "yx" else "yx"})


def _mask_ignored(mask, num_features, **kw):
    return mask_oracle(np.ones_like(mask), num_features, **kw)[0]


def _no_scale(coords, **kw):
    return coordinate_oracle(coords, **{**kw, "scale": 1.0 if kw["scale"] != 1.0 else 2 * math.pi})


def test_the_properties_catch_mutants():
    """Each property fails on a tiny wrong implementation: axes swapped, positions from the pixel index (the mask
    ignored), the scale missing, cosines where the sines go."""
    u = 2.0**-53
    mask = np.zeros((1, 4, 5), dtype=bool)
    mask[0, :3, :2] = True
    grid = {"height": 3, "width": 4, "dim": 8, "temperature": 20.0, "axes": "yx", "flatten": "row_major",
            "cls_rows": 1}
    coords = np.array([[0.2, 0.7]])
    coord_kw = {"num_features": 4, "temperature": 20.0, "scale": 2 * math.pi, "swap_xy": True,
                "layout": "interleaved", "rule": "paired"}
    mask_kw = {"num_features": 4, "temperature": 20.0, "normalize": True}
    for check in (lambda: grid_matches(_grid_columns_first, grid, u),
                  lambda: grid_rows_rotate(_grid_columns_first, u),
                  lambda: mask_matches(_mask_ignored, mask, mask_kw, u),
                  lambda: padding_is_ignored(lambda m, f, normalize: _mask_ignored(m, f, temperature=10000.0,
                                                                                   normalize=normalize), mask, u),
                  lambda: coordinates_match(_no_scale, coords, coord_kw, u)):
        with pytest.raises(AssertionError):
            check()
    # and they hold on the oracles themselves
    grid_matches(grid_oracle, grid, u)
    mask_matches(lambda m, num_features, **kw: mask_oracle(m, num_features, **kw)[0], mask, mask_kw, u)
    coordinates_match(coordinate_oracle, coords, coord_kw, u)
