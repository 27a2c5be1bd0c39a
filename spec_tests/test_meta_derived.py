"""Meta tests of the derived tolerances of ``spec_tests/derived.py`` (and the sinusoid's ``angle_atol``): each
admits an answer off by 0.99 of its bound and fails one off by 1.01 of it, in float32 and float64, so that no
bound is so loose that it passes anything (a bound is only as good as the mistake just above it that it catches).

Each bound is computed for an adapter that declares only its dtype (every form the dtype admits), on inputs
like those the property tests draw; the answer is the float64 value moved by a multiple of the bound, and the
comparison is the one the property test makes (``support.assert_within``).
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from derived import (
    alibi_slope_rtol,
    attention_atol,
    dot_atol,
    fire_small_c_rtol,
    llama3_rtol,
    ntk_last_pair_rtol,
    probability_atol,
    sandwich_atol,
    xpos_score_atol,
    yarn_log_rtol,
    yarn_rtol,
)
from encoding_support import angle_atol, tol
from rope_support import base_inv
from support import IMPL_NAME, assert_frequencies, assert_within

pytestmark = pytest.mark.skipif(
    IMPL_NAME != "refpos.testing.adapter", reason="meta tests judge the suite; they run on refpos.testing.adapter only"
)

LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "head_dim": 64, "factor": 32.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def _adapter(dtype: str) -> types.ModuleType:
    impl = types.ModuleType(f"{dtype}_adapter")
    impl.INFO = {"dtype": dtype}
    return impl


def _rng_qkv():
    rng = np.random.default_rng(3)
    return rng.standard_normal((1, 2, 3, 8)), rng.standard_normal((1, 2, 5, 8)), rng.standard_normal((1, 2, 5, 4))


def _bounds(impl) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (float64 value, its atol): every derived bound on a representative input."""
    base = base_inv(1e4, 64)
    ramp = np.clip((np.arange(32) - 10) / 13, 0, 1)
    yarn = (1 - ramp) + ramp / 40
    log_ratio = 40.0 ** (-(1 - (1 - ramp)))
    q, k, v = _rng_qkv()
    x, y = np.random.default_rng(5).standard_normal((2, 8))
    logits = np.random.default_rng(7).standard_normal((3, 6)) * 20
    llama3 = base_inv(500000.0, 64)
    powers = np.arange(100, 129, dtype=np.float64)  # (float64 at h ≈ 1: 0.01 of the bound is below half an ulp)
    slopes = 2.0 ** (-8.0 * powers / 128)
    distance = np.arange(1, 40, dtype=np.float64)
    fire = distance / 39.0
    return {
        "yarn_rtol": (yarn, yarn_rtol(impl, base, 40.0) * yarn),
        "yarn_log_rtol": (log_ratio, yarn_log_rtol(impl, base, 40.0) * log_ratio),
        "ntk_last_pair_rtol": (np.array([base[-1] / 8]), np.array([ntk_last_pair_rtol(impl, 1e4, 64, 8.0)])
                               * base[-1] / 8),
        "llama3_rtol": (llama3, llama3_rtol(impl, LLAMA3) * llama3),
        "dot_atol": (np.array([x @ y]), np.array([dot_atol(impl, 107, x, y, computed=1)])),
        "attention_atol": (np.zeros((1, 2, 3, 4)), np.full((1, 2, 3, 4), attention_atol(impl, q, k, v)["atol"])),
        "attention_atol softcap, rescales": (np.zeros((1, 2, 3, 4)), np.full(
            (1, 2, 3, 4), attention_atol(impl, q, k, v, softcap=2.0, rescales=5)["atol"])),
        "probability_atol": (np.full(6, 1 / 6), np.full(6, probability_atol(impl, logits)["atol"])),
        "angle_atol size 1": (np.array([np.cos(5.0)]), np.array([angle_atol(impl, 5, 1.0)])),
        "tol, 12 terms": (np.array([3.0]), np.array([tol(impl)["atol"] + 3.0 * tol(impl)["rtol"]])),
        "alibi_slope_rtol": (slopes, alibi_slope_rtol(impl, powers) * slopes),
        "fire_small_c_rtol": (fire, fire_small_c_rtol(impl, distance, 39.0) * fire),
        "sandwich_atol": (np.array([-3.0]), np.array([sandwich_atol(impl, 16, 1010, 9)])),
        "xpos_score_atol": (np.zeros((3, 3)), xpos_score_atol(impl, q[0, 0], q[0, 1], np.arange(3) + 2000)),
    }


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(_bounds(_adapter("float64"))))
def test_a_derived_bound_admits_just_below_and_fails_just_above(dtype, name):
    value, atol = _bounds(_adapter(dtype))[name]
    assert np.all(atol > 0), f"{name}: a zero bound"
    assert_within(value + 0.99 * atol, value, rtol=0.0, atol=atol, what=f"{name} at 0.99 of its bound")
    with pytest.raises(AssertionError, match="outside"):
        assert_within(value + 1.01 * atol, value, rtol=0.0, atol=atol, what=f"{name} at 1.01 of its bound")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_quoted_frequencies_fail_just_above_their_pair_bound(dtype):
    """``test_rope_vectors.close_frequencies`` holds each quoted ω_j to ``support.assert_frequencies``: the pair
    with the largest bound (the slowest) moved by 1.01 of it fails."""
    impl, base = _adapter(dtype), base_inv(1e4, 128)
    from refpos.golden.exact.tolerance import frequency_tolerance

    atol = np.asarray(frequency_tolerance(dtype, base))
    assert_frequencies(base + 0.99 * atol, base, impl)
    wrong = base.copy()
    wrong[-1] += 1.01 * atol[-1]
    with pytest.raises(AssertionError, match="outside"):
        assert_frequencies(wrong, base, impl)


def test_float32_bounds_sit_above_the_float64_ones():
    """The float32 bound of each quantity is at least 2²⁹ / 100 times the float64 one (the unit roundoffs' ratio,
    less the float64 value rule's floor): no bound is a fixed number that ignores the dtype."""
    low, high = _bounds(_adapter("float64")), _bounds(_adapter("float32"))
    for name in low:
        assert np.all(high[name][1] > 1e3 * low[name][1]), name
