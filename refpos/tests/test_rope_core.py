"""RoPE application internals: the Rope encoding in the pipeline (attention factor, DeepSeek softmax
multiplier, per-row positions), pair channels, the permutation helpers and their errors.

Tolerance: float64 evaluations of the same operator in another order, rtol 1e-13.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos import AttentionWeights, self_attention
from refpos.rope import (
    Rope,
    RopeConfig,
    apply_rope,
    half_to_interleaved_permutation,
    interleaved_to_half_permutation,
    pair_channels,
    permute_qk_heads,
    rope_cos_sin,
    rope_frequencies,
    rope_rotation_matrix,
    softmax_multiplier,
)

DEEPSEEK_V3 = RopeConfig(rope_type="yarn", head_dim=192, rotary_dim=64, placement="last", layout="deinterleaved",
                         factor=40.0, original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=1.0,
                         softmax_mscale=True)


def _np(a):
    return refpos.to_numpy(a)


def test_rope_encoding_rotates_q_and_k_and_scales_by_a_squared(xp):
    rng = np.random.default_rng(0)
    d_model, head_dim = 6, 8
    w = AttentionWeights(*(xp.asarray(rng.standard_normal((d_model, head_dim))) for _ in range(3)))
    x = xp.asarray(rng.standard_normal((5, d_model)))
    rope = RopeConfig(rope_type="yarn", head_dim=head_dim, factor=16.0, original_max_position_embeddings=64)
    _, a = rope_frequencies(rope)
    _, trace = self_attention(x, w, encoding=Rope(rope), causal=True)
    positions = xp.arange(5, dtype=xp.int64)
    np.testing.assert_allclose(_np(trace["Q_rot"]), _np(apply_rope(trace["Q"], positions, rope)), rtol=1e-13)
    plain = RopeConfig(head_dim=head_dim, rope_type="yarn", factor=16.0, original_max_position_embeddings=64,
                       attention_factor=1.0)
    _, trace1 = self_attention(x, w, encoding=Rope(plain), causal=True)
    np.testing.assert_allclose(_np(trace["S"]), a**2 * _np(trace1["S"]), rtol=1e-12)  # every logit × A²
    assert a == pytest.approx(1.2772588722239782, rel=1e-13)


def test_deepseek_softmax_multiplier_in_the_pipeline(xp):
    enc = Rope(DEEPSEEK_V3)
    assert enc.softmax_scale(192) == pytest.approx(0.1352337788608801, rel=1e-13)
    assert softmax_multiplier(DEEPSEEK_V3) == pytest.approx(1.8738542070926265, rel=1e-13)
    without = Rope(dataclasses.replace(DEEPSEEK_V3, softmax_mscale=False))  # HF DeepSeek-V2 before PR #47435
    assert without.softmax_scale(192) == 192**-0.5
    rng = np.random.default_rng(1)
    w = AttentionWeights(*(xp.asarray(rng.standard_normal((8, 192))) for _ in range(3)))
    x = xp.asarray(rng.standard_normal((4, 8)))
    _, trace = self_attention(x, w, encoding=enc, causal=True)
    np.testing.assert_allclose(_np(trace["scaled"]), _np(trace["S"]) * 192**-0.5 * 1.8738542070926265, rtol=1e-13)
    # the first 128 channels (no-RoPE part) pass through
    np.testing.assert_array_equal(_np(trace["Q_rot"])[..., :128], _np(trace["Q"])[..., :128])


def test_per_row_positions_of_a_left_padded_batch(xp):
    rng = np.random.default_rng(2)
    w = AttentionWeights(*(xp.asarray(rng.standard_normal((4, 8))) for _ in range(3)))
    x = xp.asarray(rng.standard_normal((2, 3, 4)))
    positions = xp.asarray([[0, 1, 2], [7, 8, 9]], dtype=xp.int64)
    rope = RopeConfig(head_dim=8)
    out, _ = self_attention(x, w, encoding=Rope(rope), positions=positions, causal=True)
    row1, _ = self_attention(x[1, ...], w, encoding=Rope(rope), positions=positions[1, ...], causal=True)
    np.testing.assert_allclose(_np(out)[1], _np(row1), rtol=1e-13, atol=1e-14)


def test_longrope_in_the_pipeline_uses_max_position_plus_one(xp):
    rope = RopeConfig(rope_type="longrope", head_dim=4, original_max_position_embeddings=8, factor=4.0,
                      short_factor=[1.0, 1.0], long_factor=[2.0, 3.0])
    q = xp.asarray(np.ones((1, 1, 2, 4)))
    q_pos, k_pos = xp.asarray([6, 7], dtype=xp.int64), xp.asarray([6, 7], dtype=xp.int64)
    short, _ = Rope(rope).rotate(q, q, q_pos, k_pos)  # L = 8 = L_0: short
    np.testing.assert_allclose(_np(short), _np(apply_rope(q, q_pos, rope, seq_len=8)), rtol=1e-15)
    long, _ = Rope(rope).rotate(q, q, q_pos, xp.asarray([7, 8], dtype=xp.int64))  # keys reach L = 9: long
    np.testing.assert_allclose(_np(long), _np(apply_rope(q, q_pos, rope, seq_len=9)), rtol=1e-15)
    fixed, _ = Rope(rope, seq_len=100).rotate(q, q, q_pos, k_pos)
    np.testing.assert_allclose(_np(fixed), _np(long), rtol=1e-15)
    with pytest.raises(ValueError, match="head_dim"):
        Rope(rope).rotate(xp.asarray(np.ones((1, 1, 2, 6))), q, q_pos, k_pos)


def test_pair_channels_and_cos_sin_layout():
    assert pair_channels(RopeConfig(head_dim=8)) == ([0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7])
    assert pair_channels(RopeConfig(head_dim=8, layout="deinterleaved", rotary_dim=4, placement="last")) == (
        [4, 6], [5, 7], [4, 5], [6, 7])
    cos, sin = rope_cos_sin([0, 5], RopeConfig(head_dim=8, rotary_dim=4, layout="interleaved"))
    assert cos.shape == sin.shape == (2, 4)
    np.testing.assert_allclose(_np(cos)[1], np.repeat(np.cos(5 * np.array([1.0, 0.01])), 2), rtol=1e-15)
    prop = RopeConfig(rope_type="proportional", head_dim=8, rotary_dim=4)
    cos, sin = rope_cos_sin([9], prop)
    assert cos.shape == (1, 8)
    np.testing.assert_array_equal(_np(cos)[0, [2, 3, 6, 7]], 1.0)  # zero-frequency pairs: the tail of each half
    np.testing.assert_array_equal(_np(sin)[0, [2, 3, 6, 7]], 0.0)


def test_rotation_matrix_of_several_positions_and_one_vector():
    rope = RopeConfig(head_dim=6, rotary_dim=4, placement="last", layout="interleaved")
    mats = _np(rope_rotation_matrix(np.array([0, 3, 11]), rope, seq_len=12))
    assert mats.shape == (3, 6, 6)
    np.testing.assert_array_equal(mats[0], np.eye(6))
    x = np.arange(1.0, 7.0)
    np.testing.assert_allclose(mats[1] @ x, _np(apply_rope(x, 3, rope)), rtol=1e-14)
    with pytest.raises(ValueError, match="position"):
        rope_rotation_matrix(np.zeros((2, 2), dtype=np.int64), rope)


def test_permutations(xp):
    perm = _np(interleaved_to_half_permutation(8, xp=xp))
    inv = _np(half_to_interleaved_permutation(8, xp=xp))
    np.testing.assert_array_equal(perm, [0, 2, 4, 6, 1, 3, 5, 7])
    np.testing.assert_array_equal(perm[inv], np.arange(8))
    w = xp.asarray(np.arange(16.0).reshape(1, 16))  # two heads of 8 columns
    np.testing.assert_array_equal(_np(permute_qk_heads(w, 2, to="half"))[0], np.r_[perm, 8 + perm])
    rows = xp.asarray(np.arange(16.0).reshape(16, 1))  # torch layout: rows are the output channels
    np.testing.assert_array_equal(_np(permute_qk_heads(rows, 2, to="half", axis=0))[:, 0], np.r_[perm, 8 + perm])
    with pytest.raises(ValueError, match="n_heads"):
        permute_qk_heads(w, 3, to="half")
    with pytest.raises(ValueError, match="to"):
        permute_qk_heads(w, 2, to="neox")
    with pytest.raises(ValueError, match="d must be even"):
        interleaved_to_half_permutation(7)
