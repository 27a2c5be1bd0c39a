"""attention() runs query rows in blocks when no intermediate is asked for; the result must not move.

The block path and the whole-array path (taken with ``return_weights=True``) run the same float64 steps
on the same rows; only the matmul's internal blocking may differ, so they agree to a few ulps
(rtol 1e-14).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos.backend import to_numpy

attention_module = importlib.import_module("refpos.core.tiled")  # where the tiles are sized


@pytest.fixture(autouse=True, scope="module")
def gpu_blocks_as_small():
    """On CuPy blocks are DEVICE_BLOCK_FACTOR times larger; here they are as small as the tests set them."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(importlib.import_module("refpos.parallel"), "DEVICE_BLOCK_FACTOR", 1)
        yield


@pytest.fixture
def tiny_blocks(monkeypatch):
    monkeypatch.setattr(attention_module, "_BLOCK_ELEMENTS", 7)  # a handful of rows per block


@given(seed=st.integers(0, 2**32 - 1), t_q=st.integers(1, 9), extra=st.integers(0, 3),
       bias_rows=st.sampled_from(["full", "one", "none"]), causal=st.booleans(), softcap=st.booleans(),
       temperature=st.booleans(), bias_scaled=st.booleans())
def test_blocked_rows_equal_the_whole_computation(xp, seed, t_q, extra, bias_rows, causal, softcap, temperature,
                                                  bias_scaled):
    rng = np.random.default_rng(seed)
    t_k = t_q + extra
    q = xp.asarray(rng.standard_normal((2, 4, t_q, 3)))
    k, v = xp.asarray(rng.standard_normal((2, 2, t_k, 3))), xp.asarray(rng.standard_normal((2, 2, t_k, 5)))
    bias = {"full": rng.standard_normal((4, t_q, t_k)), "one": rng.standard_normal((1, t_k)), "none": None}[bias_rows]
    mask = rng.random((t_q, t_k)) < 0.8
    kwargs = {
        "bias": None if bias is None else xp.asarray(bias), "mask": xp.asarray(mask), "causal": causal,
        "softcap": 2.0 if softcap else None, "bias_scaled": bias_scaled,
        "qk_terms": xp.asarray(rng.standard_normal((4, t_q, t_k))),
        "temperature": xp.asarray(rng.random((2, 1, t_q)) + 0.5) if temperature else None,
    }
    whole, _ = refpos.attention(q, k, v, return_weights=True, **kwargs)
    saved = attention_module._BLOCK_ELEMENTS
    attention_module._BLOCK_ELEMENTS = 7 * 4 * t_k  # 3 query rows per block (2 batches · 4 heads · Tk)
    try:
        blocked = refpos.attention(q, k, v, **kwargs)
    finally:
        attention_module._BLOCK_ELEMENTS = saved
    np.testing.assert_allclose(to_numpy(blocked), to_numpy(whole), rtol=1e-14, atol=1e-15)


def test_blocked_causal_rows_with_fully_masked_policy(xp, tiny_blocks):
    q = xp.asarray(np.ones((1, 1, 4, 2)))
    mask = xp.asarray(np.array([[False] * 4, [True] * 4, [False] * 4, [True] * 4]))
    out = to_numpy(refpos.attention(q, q, q, mask=mask, causal=True, fully_masked="nan"))
    assert np.isnan(out[0, 0, 0]).all() and np.isnan(out[0, 0, 2]).all()
    assert out[0, 0, 1].tolist() == [1.0, 1.0] and out[0, 0, 3].tolist() == [1.0, 1.0]


def test_chunked_slices_broadcast_terms_like_attention(xp):
    """A bias with no query axis (Tk,) and a mask (Tq, 1) broadcast in every block, as in attention()."""
    rng = np.random.default_rng(3)
    q, k, v = (xp.asarray(rng.standard_normal((1, 2, 5, 4))) for _ in range(3))
    bias = xp.asarray(rng.standard_normal(5))
    mask = xp.asarray(np.array([[True], [True], [False], [True], [True]]))
    whole = refpos.attention(q, k, v, bias=bias, mask=mask, causal=True)
    chunked = refpos.core.chunked_attention(q, k, v, bias=bias, mask=mask, causal=True, chunk_size=2)
    np.testing.assert_allclose(to_numpy(chunked), to_numpy(whole), rtol=1e-13, atol=1e-15)  # regrouped sums
