"""NoPE and DroPE through refpos.self_attention (docs/nope-drope.md-15).

* NoPE construction (Kazemnejad et al. 2023, Theorem 1): one causal layer with W_Q = W_K = 0 attends
  uniformly over the prefix, so a value channel equal to 1 only on <bos> reads 1/(t + 1).
* DroPE ≡ the RoPE model with every position 0 (magnitude factor 1) ≡ NoPE; invariant to position ids;
  optional RMSNorm over the full projected width of q and/or k; softmax_scale replaces 1/√d.

Tolerance: the constructions are exact up to float64 rounding of a few operations: rtol 1e-14; the
DroPE identities hold bit for bit (x·1 − y·0 = x).
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos import AttentionWeights, self_attention
from refpos.encodings import NoPE
from refpos.rope import DroPE, Rope, RopeConfig, rms_norm


def _to(xp, a):
    return xp.asarray(np.asarray(a, dtype=np.float64))


@pytest.mark.parametrize("t", [1, 2, 7, 33])
def test_nope_recovers_absolute_position_as_one_over_t_plus_one(xp, t):
    d_model = 4
    x = np.random.default_rng(t).standard_normal((t, d_model))
    x[:, 0] = 0.0
    x[0, 0] = 1.0  # <bos> channel: 1 on the first token only
    zeros = np.zeros((d_model, d_model))
    weights = AttentionWeights(w_q=_to(xp, zeros), w_k=_to(xp, zeros), w_v=_to(xp, np.eye(d_model)))
    out, trace = self_attention(_to(xp, x), weights, encoding=NoPE(), causal=True)
    readout = refpos.to_numpy(out)[:, 0]
    np.testing.assert_allclose(readout, 1.0 / (np.arange(t) + 1.0), rtol=1e-14)
    uniform = np.tril(np.ones((t, t))) / (np.arange(t) + 1.0)[:, None]  # weight 1/(t+1) on the prefix
    np.testing.assert_allclose(refpos.to_numpy(trace["A"])[0], uniform, rtol=1e-14)
    assert np.all(np.diff(readout) < 0)  # injective: strictly decreasing in t
    # without a causal mask the same layer sees no order at all
    out_bi, _ = self_attention(_to(xp, x), weights, encoding=None, causal=False)
    np.testing.assert_allclose(refpos.to_numpy(out_bi)[:, 0], 1.0 / t, rtol=1e-14)


def _layer(xp, seed, d_model=8, n_heads=2, n_kv=1, head_dim=4):
    rng = np.random.default_rng(seed)
    return AttentionWeights(w_q=_to(xp, rng.standard_normal((d_model, n_heads * head_dim))),
                            w_k=_to(xp, rng.standard_normal((d_model, n_kv * head_dim))),
                            w_v=_to(xp, rng.standard_normal((d_model, n_kv * head_dim))),
                            n_heads=n_heads, n_kv_heads=n_kv)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_drope_equals_rope_at_position_zero_equals_nope(xp, layout):
    weights = _layer(xp, 1)
    x = _to(xp, np.random.default_rng(2).standard_normal((6, 8)))
    rope = Rope(RopeConfig(head_dim=4, theta=10000.0, layout=layout))
    drope, _ = self_attention(x, weights, encoding=DroPE(), causal=True)
    nope, _ = self_attention(x, weights, encoding=NoPE(), causal=True)
    at_zero, _ = self_attention(x, weights, encoding=rope, positions=xp.zeros(6, dtype=xp.int64), causal=True)
    with_positions, _ = self_attention(x, weights, encoding=rope, causal=True)
    np.testing.assert_array_equal(refpos.to_numpy(drope), refpos.to_numpy(nope))
    np.testing.assert_array_equal(refpos.to_numpy(drope), refpos.to_numpy(at_zero))
    assert not np.allclose(refpos.to_numpy(drope), refpos.to_numpy(with_positions))  # RoPE does act
    shifted, _ = self_attention(x, weights, encoding=DroPE(), positions=xp.arange(100, 106, dtype=xp.int64),
                                causal=True)
    np.testing.assert_array_equal(refpos.to_numpy(shifted), refpos.to_numpy(drope))  # position ids ignored


def test_a_huge_base_does_not_remove_rope(xp):
    """Pair 0 always has ω = 1 (docs/nope-drope.md#drope): position 0, not a large θ, removes RoPE."""
    weights = _layer(xp, 3)
    x = _to(xp, np.random.default_rng(4).standard_normal((5, 8)))
    huge = Rope(RopeConfig(head_dim=4, theta=1e300))
    a, _ = self_attention(x, weights, encoding=huge, causal=True)
    b, _ = self_attention(x, weights, encoding=DroPE(), causal=True)
    assert not np.allclose(refpos.to_numpy(a), refpos.to_numpy(b))


@pytest.mark.parametrize("attention_type", ["nope", "qk_norm_nope", "q_norm_nope", "k_norm_nope"])
def test_qk_norm_over_the_full_projected_width(xp, attention_type):
    weights = _layer(xp, 5)
    x = _to(xp, np.random.default_rng(6).standard_normal((4, 8)))
    enc = DroPE.from_attention_type(attention_type, eps=0.0)
    _, trace = self_attention(x, weights, encoding=enc, causal=True)
    q = refpos.to_numpy(trace["Q"])  # (H, T, d): an unbatched input gives unbatched trace entries
    k = refpos.to_numpy(trace["K"])
    q_flat = np.concatenate(list(q), axis=-1)  # (T, H·d): the full projected width, before the head split
    k_flat = np.concatenate(list(k), axis=-1)
    q_rms, k_rms = np.sqrt(np.mean(q_flat**2, -1)), np.sqrt(np.mean(k_flat**2, -1))
    assert np.allclose(q_rms, 1.0, rtol=1e-14) == (enc.qk_norm in ("q", "qk"))
    assert np.allclose(k_rms, 1.0, rtol=1e-14) == (enc.qk_norm in ("k", "qk"))
    if enc.qk_norm == "qk":  # not a per-head norm: single heads need not have RMS 1
        assert not np.allclose(np.sqrt(np.mean(q[0] ** 2, -1)), 1.0)


def test_softmax_scale_and_norm_weights(xp):
    weights = _layer(xp, 7)
    x = _to(xp, np.random.default_rng(8).standard_normal((4, 8)))
    _, default = self_attention(x, weights, encoding=DroPE(), causal=True)
    _, scaled = self_attention(x, weights, encoding=DroPE(softmax_scale=0.125), causal=True)
    np.testing.assert_allclose(refpos.to_numpy(scaled["scaled"]), refpos.to_numpy(default["S"]) * 0.125, rtol=1e-15)
    gamma = _to(xp, np.full(8, 2.0))
    enc = DroPE(qk_norm="q", q_norm_weight=gamma)
    q, _ = enc.project_qk(_to(xp, np.ones((1, 2, 8))), _to(xp, np.ones((1, 2, 4))))
    np.testing.assert_allclose(refpos.to_numpy(q), 2.0 / np.sqrt(1 + 1e-6), rtol=1e-15)


def test_bad_arguments():
    with pytest.raises(ValueError, match="qk_norm"):
        DroPE(qk_norm="v")
    with pytest.raises(ValueError, match="attention_type"):
        DroPE.from_attention_type("rope")
    with pytest.raises(ValueError, match="k_norm_weight"):
        DroPE(qk_norm="q", k_norm_weight=np.ones(4))
    with pytest.raises(ValueError, match="softmax_scale"):
        DroPE(softmax_scale=0.0)
    with pytest.raises(ValueError, match="weight"):
        rms_norm(np.ones((2, 4)), np.ones(3))
    with pytest.raises(ValueError, match="eps"):
        rms_norm(np.ones((2, 4)), eps=-1.0)
