"""apply_rope's fast form writes its output block by block along T (NumPy: rows on threads; CuPy: one pass);
the readable complex form is the oracle.

``apply_rope_complex`` evaluates the same operator independently (complex128 multiplication), so the
two agree to float64 rounding of a product and a sum: rtol 1e-13 (values O(1)), atol 1e-14.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos.backend import to_numpy

fast = importlib.import_module("refpos.rope.fast")
parallel = importlib.import_module("refpos.parallel")


@given(seed=st.integers(0, 2**32 - 1), layout=st.sampled_from(["half", "interleaved", "deinterleaved"]),
       placement=st.sampled_from(["first", "last"]), rotary=st.sampled_from([4, 8]), t=st.integers(1, 9),
       batch_positions=st.booleans())
def test_blocked_apply_equals_the_complex_form(xp, seed, layout, placement, rotary, t, batch_positions):
    rng = np.random.default_rng(seed)
    rope = refpos.RopeConfig(head_dim=8, rotary_dim=rotary, placement=placement, layout=layout)
    x = xp.asarray(rng.standard_normal((2, 3, t, 8)))
    pos = rng.integers(0, 5000, size=(2, t) if batch_positions else (t,))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(parallel, "DEVICE_BLOCK_FACTOR", 1)  # on CuPy too
        monkeypatch.setattr(fast, "SLAB_BYTES", 2 * 8 * 8)  # NumPy fast form: two rows per block
        blocked = refpos.apply_rope(x, xp.asarray(pos), rope)
    oracle = refpos.rope.apply_rope_complex(x, xp.asarray(pos), rope)
    np.testing.assert_allclose(to_numpy(blocked), to_numpy(oracle), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_float32_input_rotates_in_float32_with_float64_angles(xp, layout):
    """The angles are float64 (exact phase at any position); the rotation runs in x's dtype."""
    rope = refpos.RopeConfig(head_dim=8, layout=layout)
    x64 = np.random.default_rng(0).standard_normal((5, 8))
    pos = np.array([0, 1, 65536, 131071, 1_000_000])
    y32 = refpos.apply_rope(xp.asarray(x64.astype(np.float32)), xp.asarray(pos), rope)
    assert y32.dtype == xp.float32
    y64 = to_numpy(refpos.apply_rope(xp.asarray(x64.astype(np.float32).astype(np.float64)), xp.asarray(pos), rope))
    # only float32 rounding of cos, sin, two products and a sum: a few float32 ulps, at every position
    np.testing.assert_allclose(to_numpy(y32), y64, rtol=0, atol=8 * 2.0**-24 * np.max(np.abs(x64)) * 2)
