"""The self-attention pipeline: trace names, hooks, GQA, batches, positions."""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.backend import to_numpy


def weights(xp, d_model=6, n_heads=2, n_kv=1, head_dim=3, with_o=True, seed=0):
    rng = np.random.default_rng(seed)
    return refpos.AttentionWeights(
        w_q=xp.asarray(rng.standard_normal((d_model, n_heads * head_dim))),
        w_k=xp.asarray(rng.standard_normal((d_model, n_kv * head_dim))),
        w_v=xp.asarray(rng.standard_normal((d_model, n_kv * head_dim))),
        w_o=xp.asarray(rng.standard_normal((n_heads * head_dim, d_model))) if with_o else None,
        n_heads=n_heads,
        n_kv_heads=n_kv,
    )


def test_trace_names_follow_the_pipeline(xp):
    x = xp.asarray(np.random.default_rng(1).standard_normal((4, 6)))
    out, trace = refpos.self_attention(x, weights(xp), encoding=refpos.encodings.DistanceBias(0.5, before_scale=False))
    assert list(trace) == ["X", "Q", "K", "V", "S", "B", "scaled", "scaled+B", "logits", "A", "O", "out"]
    assert trace["Q"].shape == (2, 4, 3) and trace["K"].shape == (1, 4, 3) and trace["A"].shape == (2, 4, 4)
    assert out.shape == (4, 6)
    np.testing.assert_allclose(to_numpy(trace["logits"]), to_numpy(trace["scaled"] + trace["B"]), rtol=0, atol=0)


def test_pipeline_equals_hand_composition(xp):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 6))
    w = weights(np)
    out, _ = refpos.self_attention(xp.asarray(x), weights(xp), causal=True)
    q = refpos.core.split_heads(x @ w.w_q, 2)
    k = refpos.core.split_heads(x @ w.w_k, 1)
    v = refpos.core.split_heads(x @ w.w_v, 1)
    expected = refpos.core.merge_heads(refpos.attention(q, k, v, causal=True)) @ w.w_o
    np.testing.assert_allclose(to_numpy(out), expected, rtol=1e-13, atol=1e-13)  # same float64 ops, reordered


def test_nope_pipeline_is_permutation_equivariant(xp):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 6))
    perm = np.array([3, 0, 4, 1, 2])
    out, _ = refpos.self_attention(xp.asarray(x), weights(xp))
    out_p, _ = refpos.self_attention(xp.asarray(x[perm]), weights(xp))
    np.testing.assert_allclose(to_numpy(out_p), to_numpy(out)[perm], rtol=1e-12, atol=1e-13)


def test_left_padded_batch_positions_per_row(xp):
    """Per-row positions: a left-padded row with padding masked gives the unpadded row's output."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 6))
    enc = refpos.encodings.DistanceBias(0.7, before_scale=False)
    alone, _ = refpos.self_attention(xp.asarray(x), weights(xp), encoding=enc, causal=True)
    padded = np.concatenate([np.zeros((2, 6)), x])[None]  # (1, 5, 6): two pad tokens first
    positions = xp.asarray(np.array([[0, 0, 0, 1, 2]]))
    keep = xp.asarray(np.array([False, False, True, True, True])[None, None, None, :])
    out, _ = refpos.self_attention(xp.asarray(padded), weights(xp), encoding=enc, positions=positions,
                                   causal=True, mask=keep)
    np.testing.assert_allclose(to_numpy(out)[0, 2:], to_numpy(alone), rtol=1e-12, atol=1e-13)


def test_pipeline_rejects_bad_input(xp):
    x = xp.asarray(np.zeros((4, 6)))
    with pytest.raises(TypeError, match=r"encoding must be a refpos\.Encoding"):
        refpos.self_attention(x, weights(xp), encoding="alibi")
    with pytest.raises(ValueError, match="positions must have shape"):
        refpos.self_attention(x, weights(xp), positions=xp.asarray(np.arange(3)))
    with pytest.raises(TypeError, match="positions must be an integer array"):
        refpos.self_attention(x, weights(xp), positions=xp.asarray(np.arange(4.0)))
    with pytest.raises(ValueError, match="positions must be >= 0"):
        refpos.self_attention(x, weights(xp), positions=xp.asarray(np.array([0, 1, -1, 2])))
    with pytest.raises(ValueError, match="d_model=5"):
        refpos.self_attention(xp.asarray(np.zeros((4, 5))), weights(xp))
    with pytest.raises(ValueError, match="not a multiple of n_kv_heads"):
        weights(xp, n_heads=3, n_kv=2)
