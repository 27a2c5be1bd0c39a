"""refpos.core.attention against torch's scaled_dot_product_attention in float64 (anchors env).

Tolerance 1e-12: both compute the same float64 sums in different orders (a few ulps of values ≤ ~10).
torch's ``is_causal`` aligns queries to the *start* of the keys, refpos to the end (a decode step with a
cache); for Tq == Tk they coincide, which is the case compared with ``is_causal``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos.backend import to_numpy

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
F = torch.nn.functional
pytestmark = pytest.mark.anchors


@given(
    seed=st.integers(0, 2**32 - 1),
    h_kv=st.integers(1, 3),
    n_rep=st.integers(1, 3),
    t_q=st.integers(1, 6),
    extra_keys=st.integers(0, 4),
    d=st.sampled_from([1, 4, 16]),
    use_bias=st.booleans(),
    use_mask=st.booleans(),
    scale=st.one_of(st.none(), st.floats(0.05, 2.0)),
)
def test_attention_matches_torch_sdpa(xp, seed, h_kv, n_rep, t_q, extra_keys, d, use_bias, use_mask, scale):
    rng = np.random.default_rng(seed)
    t_k = t_q + extra_keys
    q = rng.standard_normal((2, h_kv * n_rep, t_q, d))
    k = rng.standard_normal((2, h_kv, t_k, d))
    v = rng.standard_normal((2, h_kv, t_k, d))
    bias = rng.standard_normal((h_kv * n_rep, t_q, t_k)) if use_bias else None
    mask = rng.random((t_q, t_k)) < 0.8 if use_mask else None
    if mask is not None:
        mask[:, -1] = True  # torch's math backend gives NaN rows where refpos's policy gives zeros
    ours = refpos.attention(
        *(xp.asarray(a) for a in (q, k, v)),
        bias=None if bias is None else xp.asarray(bias),
        mask=None if mask is None else xp.asarray(mask),
        scale=scale,
    )
    attn_mask = None
    if bias is not None or mask is not None:
        additive = np.zeros((h_kv * n_rep, t_q, t_k)) if bias is None else bias.copy()
        if mask is not None:
            additive = np.where(mask, additive, -np.inf)
        attn_mask = torch.from_numpy(additive)
    theirs = F.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=attn_mask, scale=scale, enable_gqa=True
    )
    np.testing.assert_allclose(to_numpy(ours), theirs.numpy(), rtol=1e-12, atol=1e-12)  # float64 sums, other order


@given(seed=st.integers(0, 2**32 - 1), t=st.integers(1, 8), n_rep=st.integers(1, 4))
def test_causal_attention_matches_torch_sdpa(xp, seed, t, n_rep):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 2 * n_rep, t, 8))
    k, v = rng.standard_normal((1, 2, t, 8)), rng.standard_normal((1, 2, t, 8))
    ours = refpos.attention(*(xp.asarray(a) for a in (q, k, v)), causal=True)
    theirs = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), is_causal=True, enable_gqa=True)
    np.testing.assert_allclose(to_numpy(ours), theirs.numpy(), rtol=1e-12, atol=1e-12)  # float64 sums, other order
