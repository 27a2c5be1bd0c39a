r"""refpos.encodings.resample against ``torch.nn.functional.interpolate`` (CPU), in float64 and float32.

Every mode (``nearest``, ``linear``, ``bilinear``, ``bicubic``), ``align_corners`` both ways, antialias both
ways, the size form and the scale-factor form with and without ``recompute_scale_factor``, over drawn sizes
that shrink, grow and keep each axis.

Tolerance. :func:`refpos.encodings.resample_bounds.resample_error_bound` for the dtype torch computes in
(``u = 2⁻⁵³`` or ``2⁻²⁴``): the source coordinate's three roundings through the slope of the weights (a
float64 torch lands a few ulps of ``s`` away: its ``r·(i + ½) − ½`` is fused or ordered differently), the
weights' evaluation and normalisation, the sums. Nearest copies rows: equal.

One divergence is torch's, not refpos's: the CPU antialiased kernel with an output of one column and a
changed number of rows gives every output row the first row's vertical weights
(:func:`test_torch_antialias_one_output_column_repeats_the_first_row` pins it; no position grid is resampled to a
single column).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refpos.encodings.resample import interpolate, resample_matrix, resampled_size
from refpos.encodings.resample_bounds import resample_error_bound

torch = pytest.importorskip("torch", reason="resampling anchors need torch (pip install 'refpos[anchors]')")
F = torch.nn.functional

pytestmark = pytest.mark.anchors

DTYPES = {"float64": (torch.float64, 2.0**-53), "float32": (torch.float32, 2.0**-24)}


def _torch(x: np.ndarray, dtype: torch.dtype, **options) -> np.ndarray:
    return F.interpolate(torch.from_numpy(x)[None].to(dtype), **options)[0].double().numpy()


def _stored(x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    return torch.from_numpy(x).to(dtype).double().numpy()


sizes = st.integers(1, 40)


@settings(max_examples=60, deadline=None)
@given(hin=sizes, win=sizes, hout=sizes, wout=st.integers(2, 40), mode=st.sampled_from(["bilinear", "bicubic"]),
       align_corners=st.booleans(), antialias=st.booleans(), dtype=st.sampled_from(list(DTYPES)),
       seed=st.integers(0, 2**16))
def test_size_form_equals_torch(hin, win, hout, wout, mode, align_corners, antialias, dtype, seed):
    torch_dtype, u = DTYPES[dtype]
    x = _stored(np.random.default_rng(seed).standard_normal((2, hin, win)), torch_dtype)
    theirs = _torch(x, torch_dtype, size=(hout, wout), mode=mode, align_corners=align_corners, antialias=antialias)
    ours = np.asarray(interpolate(x, (hout, wout), mode=mode, align_corners=align_corners, antialias=antialias))
    bound = resample_error_bound([hin, win], [hout, wout], mode=mode, unit_roundoff=u, magnitude=np.abs(x).max(),
                                 align_corners=align_corners, antialias=antialias)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)


factors = st.floats(0.2, 4.0).map(lambda s: round(s, 3))


@settings(max_examples=60, deadline=None)
@given(hin=st.integers(2, 40), win=st.integers(2, 40), sh=factors, sw=factors,
       mode=st.sampled_from(["bilinear", "bicubic", "nearest"]), antialias=st.booleans(), recompute=st.booleans(),
       dtype=st.sampled_from(list(DTYPES)), seed=st.integers(0, 2**16))
def test_scale_factor_form_equals_torch(hin, win, sh, sw, mode, antialias, recompute, dtype, seed):
    antialias = antialias and mode != "nearest"
    if min(hin * sh, win * sw) < 1:
        return
    if antialias and resampled_size(win, sw) == 1 and resampled_size(hin, sh) != hin:
        return  # torch's one-column quirk, not the separable map refpos gives (the test below)
    torch_dtype, u = DTYPES[dtype]
    x = _stored(np.random.default_rng(seed).standard_normal((2, hin, win)), torch_dtype)
    options = {"scale_factor": (sh, sw), "mode": mode, "antialias": antialias, "recompute_scale_factor": recompute}
    theirs = _torch(x, torch_dtype, **options)
    ours = np.asarray(interpolate(x, **options))
    assert theirs.shape == ours.shape
    if mode == "nearest":
        np.testing.assert_array_equal(theirs, ours)
        return
    out = [resampled_size(hin, sh), resampled_size(win, sw)]
    bound = resample_error_bound([hin, win], out, mode=mode, unit_roundoff=u, magnitude=np.abs(x).max(),
                                 antialias=antialias, scale_factors=None if recompute else [sh, sw])
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)


@settings(max_examples=40, deadline=None)
@given(n_in=st.integers(1, 60), n_out=st.integers(1, 60), align_corners=st.booleans(),
       dtype=st.sampled_from(list(DTYPES)), seed=st.integers(0, 2**16))
def test_linear_1d_equals_torch(n_in, n_out, align_corners, dtype, seed):
    torch_dtype, u = DTYPES[dtype]
    x = _stored(np.random.default_rng(seed).standard_normal((3, n_in)), torch_dtype)
    theirs = _torch(x, torch_dtype, size=n_out, mode="linear", align_corners=align_corners)
    ours = np.asarray(interpolate(x, n_out, mode="linear", align_corners=align_corners))
    bound = resample_error_bound([n_in], [n_out], mode="linear", unit_roundoff=u, magnitude=np.abs(x).max(),
                                 align_corners=align_corners)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)


@settings(max_examples=40, deadline=None)
@given(hin=sizes, win=sizes, hout=sizes, wout=sizes, seed=st.integers(0, 2**16))
def test_nearest_equals_torch(hin, win, hout, wout, seed):
    x = np.random.default_rng(seed).standard_normal((2, hin, win))
    np.testing.assert_array_equal(_torch(x, torch.float64, size=(hout, wout), mode="nearest"),
                                  np.asarray(interpolate(x, (hout, wout), mode="nearest")))


@pytest.mark.parametrize(("n_in", "n_out", "factor"), [(10, 10, 1.05), (7, 7, 1.1), (12, 12, 1.0833)])
def test_an_unchanged_length_is_copied_by_linear_not_by_cubic(n_in, n_out, factor):
    """A scale factor that keeps the length (⌊n·s⌋ = n): linear copies the axis, bicubic steps by 1/s."""
    x = np.random.default_rng(n_in).standard_normal((1, n_in, 1))
    for mode in ("bilinear", "bicubic"):
        theirs = _torch(x, torch.float64, scale_factor=(factor, 1.0), mode=mode)
        ours = np.asarray(interpolate(x, scale_factor=(factor, 1.0), mode=mode))
        np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-13)
    assert np.array_equal(np.asarray(interpolate(x, scale_factor=(factor, 1.0), mode="bilinear")), x)
    assert not np.allclose(np.asarray(interpolate(x, scale_factor=(factor, 1.0), mode="bicubic")), x)


@pytest.mark.parametrize(("hin", "win", "hout"), [(5, 9, 2), (2, 1, 4), (6, 3, 3)])
def test_torch_antialias_one_output_column_repeats_the_first_row(hin, win, hout):
    """torch's CPU antialiased kernel, one output column and a changed row count: every output row takes the
    first row's vertical weights. refpos computes the separable map (``W_h x W_wᵀ``), which torch gives with two
    output columns."""
    x = np.random.default_rng(hin).standard_normal((1, hin, win))
    theirs = _torch(x, torch.float64, size=(hout, 1), mode="bilinear", antialias=True)
    w_h = np.asarray(resample_matrix(hin, hout, mode="bilinear", antialias=True))
    w_w = np.asarray(resample_matrix(win, 1, mode="bilinear", antialias=True))
    np.testing.assert_allclose(theirs[0], np.repeat(w_h[:1] @ x[0] @ w_w.T, hout, axis=0), atol=1e-14)
    ours = np.asarray(interpolate(x, (hout, 1), mode="bilinear", antialias=True))[0]
    np.testing.assert_allclose(ours, w_h @ x[0] @ w_w.T, atol=1e-14)
    two_columns = _torch(x, torch.float64, size=(hout, 2), mode="bilinear", antialias=True)[0]
    np.testing.assert_allclose(two_columns, w_h @ x[0] @ np.asarray(
        resample_matrix(win, 2, mode="bilinear", antialias=True)).T, atol=1e-14)
