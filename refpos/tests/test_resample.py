"""refpos.encodings.resample: the properties of torch's resampling rules, each shown failing on a wrong rule.

The maps are compared entrywise with an absolute tolerance of 1e-12: their entries are O(1) weights computed by
a few float64 operations on coordinates below 100 (a few ulps of 100 ≈ 1e-13).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.encodings.resample import (
    CUBIC_A_ANTIALIAS,
    cubic_kernel,
    interpolate,
    resample_matrix,
    resample_scale,
    resampled_size,
    triangle_kernel,
)

ATOL = 1e-12
sizes = st.integers(1, 40)
modes = st.sampled_from(["linear", "bicubic", "nearest"])


def _matrix(n_in, n_out, **options):
    return to_numpy(resample_matrix(n_in, n_out, xp=np, **options))


# ------------------------------------------------------------------------- the wrong rules the properties catch
def _half_pixel_missing(n_in, n_out, **options):
    """Source coordinate r·(i + ½) without the − ½ (a common port mistake)."""
    r = n_in / n_out
    s = np.clip(r * (np.arange(n_out) + 0.5), 0, n_in - 1)
    left = np.minimum(np.floor(s).astype(int), n_in - 1)
    right = np.minimum(left + 1, n_in - 1)
    w = np.zeros((n_out, n_in))
    np.add.at(w, (np.arange(n_out), left), 1 - (s - left))
    np.add.at(w, (np.arange(n_out), right), s - left)
    return w


def _antialias_unnormalised(n_in, n_out, **options):
    """The antialiased filter weights without dividing by their sum."""
    r = n_in / n_out
    t = ((np.arange(n_in)[None, :] - r * (np.arange(n_out)[:, None] + 0.5)) + 0.5) / max(r, 1.0)
    return to_numpy(triangle_kernel(t, np)) / max(r, 1.0)


def _antialias_cubic_075(n_in, n_out, **options):
    """The antialiased bicubic filter with a = −0.75 (the non-antialiased constant) instead of −0.5."""
    r = n_in / n_out
    t = ((np.arange(n_in)[None, :] - r * (np.arange(n_out)[:, None] + 0.5)) + 0.5) / max(r, 1.0)
    weights = to_numpy(cubic_kernel(t, -0.75, np))
    return weights / weights.sum(axis=1, keepdims=True)


def _align_corners_flipped(n_in, n_out, **options):
    return _matrix(n_in, n_out, mode="bilinear", align_corners=not options.get("align_corners", False))


# ------------------------------------------------------------------------- properties
def identity_at_the_same_size(matrix, n):
    return np.allclose(matrix(n, n, mode="bilinear"), np.eye(n), atol=ATOL)


@given(n=sizes, mode=modes, align_corners=st.booleans(), antialias=st.booleans())
def test_the_same_size_is_the_identity(n, mode, align_corners, antialias):
    align_corners = align_corners and mode != "nearest"
    antialias = antialias and mode == "bicubic"
    np.testing.assert_array_equal(_matrix(n, n, mode=mode, align_corners=align_corners, antialias=antialias), np.eye(n))


def test_identity_fails_on_a_missing_half_pixel():
    assert not identity_at_the_same_size(_half_pixel_missing, 7)


def rows_sum_to_one(matrix, n_in, n_out, **options):
    return np.allclose(matrix(n_in, n_out, **options).sum(axis=1), 1.0, atol=ATOL)


@given(n_in=sizes, n_out=sizes, mode=modes, align_corners=st.booleans(), antialias=st.booleans())
def test_rows_sum_to_one_so_a_constant_grid_stays_constant(n_in, n_out, mode, align_corners, antialias):
    align_corners = align_corners and mode != "nearest"
    antialias = antialias and mode == "bicubic"
    assert rows_sum_to_one(_matrix, n_in, n_out, mode=mode, align_corners=align_corners, antialias=antialias)


def test_rows_sum_to_one_fails_without_normalising_the_antialias_filter():
    assert not rows_sum_to_one(_antialias_unnormalised, 10, 4)


def commutes_with_the_mirror(matrix, n_in, n_out, **options):
    w = matrix(n_in, n_out, **options)
    return np.allclose(w[::-1, ::-1], w, atol=ATOL)


@given(n_in=sizes, n_out=sizes, mode=st.sampled_from(["linear", "bicubic"]), align_corners=st.booleans(),
       antialias=st.booleans())
def test_resampling_commutes_with_the_mirror(n_in, n_out, mode, align_corners, antialias):
    """Flipping the input flips the output: both conventions place the grids symmetrically — except one
    output with align_corners (it reads row 0) and antialias with align_corners (torch's filter centres
    ``(n_in − 1)/(n_out − 1)·(i + ½)`` keep the half-pixel offset of the other convention)."""
    antialias = antialias and mode == "bicubic" and not align_corners
    n_out = max(n_out, 2) if align_corners else n_out
    assert commutes_with_the_mirror(_matrix, n_in, n_out, mode=mode, align_corners=align_corners,
                                    antialias=antialias)


def test_the_mirror_fails_on_a_missing_half_pixel():
    assert not commutes_with_the_mirror(_half_pixel_missing, 6, 13)


def reproduces_a_line_at_its_coordinates(matrix, n_in, n_out, **options):
    """align_corners: ``y_i = f(r·i)`` for ``f(j) = 3 + 2j``."""
    r = resample_scale(n_in, n_out, align_corners=True)
    return np.allclose(matrix(n_in, n_out, **options) @ (3 + 2 * np.arange(n_in)), 3 + 2 * r * np.arange(n_out),
                       atol=1e-10)


@given(n_in=st.integers(2, 40), n_out=st.integers(2, 40))
def test_align_corners_samples_a_line_at_the_scaled_coordinates(n_in, n_out):
    assert reproduces_a_line_at_its_coordinates(_matrix, n_in, n_out, mode="linear", align_corners=True)
    corners = _matrix(n_in, n_out, mode="bicubic", align_corners=True)
    # the corner rows land on the corner rows (r·(n_out − 1) is n_in − 1 within an ulp: r is rounded)
    assert corners[0, 0] == 1.0 and abs(corners[-1, -1] - 1.0) < ATOL


def test_the_line_fails_with_align_corners_flipped():
    assert not reproduces_a_line_at_its_coordinates(_align_corners_flipped, 5, 9, align_corners=True)


@given(n_in=st.integers(1, 30), extra=st.integers(1, 30))
def test_antialias_growing_a_bilinear_grid_is_plain_bilinear(n_in, extra):
    """Growing (σ = 1), the renormalised triangle filter is the clamped two-tap rule."""
    n_out = n_in + extra
    np.testing.assert_allclose(_matrix(n_in, n_out, mode="bilinear", antialias=True),
                               _matrix(n_in, n_out, mode="bilinear"), atol=ATOL)


def test_antialias_bicubic_filter_is_keys_with_a_half():
    assert CUBIC_A_ANTIALIAS == -0.5
    reference = _matrix(6, 13, mode="bicubic", antialias=True)
    assert not np.allclose(_antialias_cubic_075(6, 13), reference, atol=1e-3)
    np.testing.assert_allclose(to_numpy(cubic_kernel(np.array([0.0, 1.0, 2.0, 0.5]), -0.5, np)),
                               [1.0, 0.0, 0.0, 0.5625])  # k(½) = 1 − (a + 3)/4 + (a + 2)/8 at a = −½


@given(n_in=sizes, n_out=sizes)
def test_nearest_copies_one_row(n_in, n_out):
    w = _matrix(n_in, n_out, mode="nearest")
    assert set(np.unique(w)) <= {0.0, 1.0} and np.all(w.sum(axis=1) == 1.0)


def test_the_scale_factor_form_steps_by_its_factor():
    """⌊10·1.05⌋ = 10 rows: bicubic steps by 1/1.05 (not the identity), linear copies the unchanged axis."""
    assert resampled_size(10, 1.05) == 10
    assert not np.allclose(_matrix(10, 10, mode="bicubic", scale_factor=1.05), np.eye(10))
    np.testing.assert_array_equal(_matrix(10, 10, mode="linear", scale_factor=1.05), np.eye(10))
    np.testing.assert_array_equal(_matrix(10, 10, mode="bicubic", antialias=True, scale_factor=1.05), np.eye(10))


def test_interpolate_applies_one_matrix_per_axis(xp):
    x = np.random.default_rng(0).standard_normal((3, 5, 7))
    out = to_numpy(interpolate(xp.asarray(x), (4, 9), mode="bicubic"))
    expected = np.einsum("ij,cjk,lk->cil", _matrix(5, 4, mode="bicubic"), x, _matrix(7, 9, mode="bicubic"))
    np.testing.assert_allclose(out, expected, atol=ATOL)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: resample_matrix(0, 3, mode="linear"), "in_size"),
    (lambda: resample_matrix(3, 2, mode="cubic"), "mode"),
    (lambda: resample_matrix(3, 2, mode="linear", antialias=True), "antialias"),
    (lambda: resample_matrix(3, 2, mode="nearest", align_corners=True), "nearest"),
    (lambda: resample_matrix(3, 2, mode="bilinear", padding="reflect"), "padding"),
    (lambda: resample_matrix(3, 2, mode="bilinear", align_corners="no"), "align_corners"),
    (lambda: resampled_size(3, 0.2), "scale_factor"),
    (lambda: interpolate(np.zeros((2, 3)), (2, 2), mode="bilinear", scale_factor=2.0), "size and scale_factor"),
    (lambda: interpolate(np.zeros((2, 3)), (2, 2), mode="bilinear", recompute_scale_factor=True),
     "recompute_scale_factor"),
    (lambda: interpolate(np.zeros((2, 3)), scale_factor=2.0, mode="nearest"), "nearest"),
    (lambda: interpolate(np.zeros(3), (2, 2), mode="bilinear"), "x"),
    (lambda: interpolate(np.zeros(3), (2, 2), mode="bicubic"), "x must have at least 2 axes"),
    (lambda: interpolate(np.zeros((2, 2, 3)), (2, 2, 2), mode="bilinear", scale_factor=None), "size"),
    (lambda: interpolate(np.zeros((2, 3), dtype=np.int64), 2, mode="linear"), "x"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()
