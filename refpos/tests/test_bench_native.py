"""The native kernels `refpos bench rope` times compute the rotation they are named for (when installed).

Each timer is checked against :func:`refpos.apply_rope` on a small input: a float32 kernel, so within the float32
rotation's rounding (angles below 2·π·7, a few ulps of the entries). Skipped where onnxruntime or ggml
(``REFPOS_GGML_LIB``) is absent.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.tools.bench_native import ggml_rope_timer, ort_rope_timer

X = np.random.default_rng(0).standard_normal((1, 3, 8, 16)).astype(np.float32)
#: float32 angles p·ω (p < 8) and products: a few float32 ulps of entries of order 1
ATOL = 1e-5


def _expected(layout: str, rotary_dim: int) -> np.ndarray:
    rope = refpos.RopeConfig(rope_type="default", theta=1e4, head_dim=16, rotary_dim=rotary_dim, layout=layout)
    return refpos.apply_rope(X.astype(np.float64), np.arange(8), rope)


def _rotated_the_span_only(y: np.ndarray, rotary_dim: int) -> None:
    assert np.abs(y[..., :rotary_dim] - X[..., :rotary_dim]).max() > 0.1  # it rotated
    np.testing.assert_array_equal(y[..., rotary_dim:], X[..., rotary_dim:])  # and passed the rest through


@pytest.mark.parametrize("rotary_dim", [16, 8])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_ort_rotary_timer_rotates(layout, rotary_dim):
    timer = ort_rope_timer(X, 1e4, 1, interleaved=layout == "interleaved", rotary_dim=rotary_dim)
    if timer is None:
        pytest.skip("needs onnxruntime and onnx")
    (y,) = timer()
    np.testing.assert_allclose(y, _expected(layout, rotary_dim), atol=ATOL, rtol=0)
    _rotated_the_span_only(y, rotary_dim)


@pytest.mark.parametrize("rotary_dim", [16, 8])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_ggml_rope_ext_timer_rotates(layout, rotary_dim):
    timer = ggml_rope_timer(X, 1e4, 1, neox=layout == "half", n_dims=rotary_dim)
    if timer is None:
        pytest.skip("needs ggml: REFPOS_GGML_LIB (python -m spec_tests.adapters.build_ggml)")
    timer()
    y = timer.result()
    np.testing.assert_allclose(y, _expected(layout, rotary_dim), atol=ATOL, rtol=0)
    _rotated_the_span_only(y, rotary_dim)
