"""Stateful dynamic NTK: transformers' growth and reset across calls (docs/extrapolation.md#dynamic-ntk).

Tolerance: θ' values are float64 re-derivations of a closed form, rtol 1e-13.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.rope import DynamicNTKState, RopeConfig, apply_rope, rope_frequencies
from refpos.rope.scaling import dynamic_theta

ROPE = RopeConfig(rope_type="dynamic", head_dim=128, factor=2.0, max_position_embeddings=4096)

#: (call with L, cached after, θ used) — docs/extrapolation.md#dynamic-ntk, measured on HF 5.24.0
TABLE = [
    (10, 4096, 10000.0),
    (8192, 8192, 30527.7367488067),
    (6000, 8192, 30527.7367488067),  # no regrow, no reset
    (4096, 8192, 30527.7367488067),  # no reset at exactly L_max
    (4095, 4096, 10000.0),  # reset (strict <)
    (5000, 5000, 14497.957419935765),
    (9000, 9000, 34610.26204656427),
    (100, 4096, 10000.0),
]


def test_call_sequence_reproduces_the_hf_table(xp):
    state = DynamicNTKState(ROPE, xp=xp)
    for seq_len, cached, theta in TABLE:
        inv = state.update(seq_len)
        assert state.cached_len == cached, seq_len
        assert state.theta_used == pytest.approx(theta, rel=1e-13), seq_len
        expected = theta ** (-(np.arange(0, 128, 2) / 128))
        np.testing.assert_allclose(refpos.to_numpy(inv), expected, rtol=1e-13)


def test_history_matters_and_differs_from_the_stateless_rule(xp):
    state = DynamicNTKState(ROPE, xp=xp)
    state.update(8192)
    stateful = refpos.to_numpy(state.update(6000))
    stateless = refpos.to_numpy(rope_frequencies(ROPE, seq_len=6000, xp=xp)[0])
    assert not np.allclose(stateful, stateless)  # keeps the 8192 base
    assert dynamic_theta(ROPE, 6000) == pytest.approx(19499.277640853546, rel=1e-13)
    state.reset()
    assert state.cached_len == 4096 and state.length_used is None


def test_apply_uses_the_state(xp):
    state = DynamicNTKState(ROPE, xp=xp)
    x = xp.asarray(np.random.default_rng(0).standard_normal((3, 128)))
    far = xp.asarray([8189, 8190, 8191], dtype=xp.int64)  # L = 8192: growth
    np.testing.assert_allclose(refpos.to_numpy(state.apply(x, far)),
                               refpos.to_numpy(apply_rope(x, far, ROPE)), rtol=1e-13, atol=1e-13)
    near = xp.asarray([5997, 5998, 5999], dtype=xp.int64)  # L = 6000 < cached: still the 8192 base
    np.testing.assert_allclose(refpos.to_numpy(state.apply(x, near)),
                               refpos.to_numpy(apply_rope(x, near, ROPE, seq_len=8192)), rtol=1e-13, atol=1e-13)


def test_bad_arguments():
    with pytest.raises(ValueError, match="dynamic"):
        DynamicNTKState(RopeConfig(head_dim=8))
    with pytest.raises(ValueError, match="dynamic_rule"):
        DynamicNTKState(RopeConfig(rope_type="dynamic", head_dim=8, factor=2.0, max_position_embeddings=64,
                                   dynamic_rule="vllm_static"))
    with pytest.raises(ValueError, match="seq_len"):
        DynamicNTKState(ROPE).update(-1)
    with pytest.raises(TypeError, match="seq_len"):
        DynamicNTKState(ROPE).update(10.0)
