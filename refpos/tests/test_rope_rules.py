"""The rules of config families that transformers and vLLM read and the shared rules do not cover:

vLLM's ``"ntk"`` (fixed and mixed), NTK-alpha (Hunyuan, vLLM's ``dynamic`` with ``alpha``), LongRoPE's
``short_mscale`` / ``long_mscale``, llama3 with an empty middle band and YaRN with equal betas; each rule
checked by a property that a wrong implementation breaks (the ``*_breaks_*`` tests show it breaking), and
the relaxed checks still refusing what transformers does not compute.

Tolerances: frequencies are float64 from two float64 expressions of the same formula (``θ^(−2j/d)`` as a
power vs. as an exp of a log), so they agree to a few ulps: rtol 1e-14.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from refpos.rope import RopeConfig, rope_frequencies
from refpos.rope import scaling as rs
from refpos.rope.rules import RULES

RTOL = 1e-14  # float64, two evaluations of one formula (see the module docstring)


def _inv(rope, seq_len=None):
    inv, a = rope_frequencies(rope, seq_len=seq_len)
    return np.asarray(inv, dtype=np.float64), a


@pytest.mark.parametrize("d", [8, 64, 128])
@pytest.mark.parametrize("s", [2.0, 8.0, 1000.0])
def test_vllm_ntk_fixed_is_the_scaled_base_and_divisor(d, s):
    rope = RopeConfig(rope_type="ntk", head_dim=d, factor=s, ntk_rule="vllm_fixed")
    inv, a = _inv(rope)
    j = np.arange(d // 2)
    expected = np.exp(-(2 * j / d) * math.log(1e4 * s) - (2 / d) * math.log(s))  # (θs)^(-2j/d) · s^(-2/d)
    np.testing.assert_allclose(inv, expected, rtol=RTOL)
    assert a == 1.0
    assert inv[-1] == pytest.approx(1e4 ** (-(d - 2) / d) / s, rel=RTOL)  # lowest pair divided by exactly s


@pytest.mark.parametrize("b", [0.25, 0.625, 1.0, 2.0])
def test_vllm_ntk_mixed_divides_pair_j_by_exp_a_j_plus_1_to_the_b(b):
    d, s = 128, 8.0
    rope = RopeConfig(rope_type="ntk", head_dim=d, factor=s, ntk_rule="vllm_mixed", mixed_b=b)
    inv, _ = _inv(rope)
    plain = 1e4 ** (-np.arange(0, d, 2) / d)
    a = math.log(s) / (d / 2) ** b
    np.testing.assert_allclose(plain / inv, np.exp(a * np.arange(1, d // 2 + 1) ** b), rtol=RTOL)
    assert plain[-1] / inv[-1] == pytest.approx(s, rel=RTOL)
    assert plain[0] / inv[0] == pytest.approx(math.exp(a), rel=RTOL)  # the first pair is divided too


def test_ntk_alpha_base_divides_the_lowest_pair_by_alpha():
    """Hunyuan's NTK-alpha, θ' = θ·α^(d/(d−2)), is the NTK-aware rule with factor α."""
    d, alpha = 128, 1000.0
    inv, _ = _inv(RopeConfig(rope_type="ntk", head_dim=d, factor=alpha, theta=1e4))
    plain = 1e4 ** (-np.arange(0, d, 2) / d)
    assert inv[0] == 1.0 and plain[-1] / inv[-1] == pytest.approx(alpha, rel=RTOL)


def test_longrope_mscale_switches_exactly_past_the_original_length():
    short, long = [1.0] * 4, [4.0] * 4
    rope = RopeConfig(rope_type="longrope", head_dim=8, original_max_position_embeddings=4096, factor=32.0,
                      short_factor=short, long_factor=long, short_mscale=1.243, long_mscale=1.2429)
    assert [_inv(rope, n)[1] for n in (None, 1, 4096, 4097, 131072)] == [1.243] * 3 + [1.2429] * 2
    assert _inv(rope, 4097)[0][1] == pytest.approx(_inv(rope, 4096)[0][1] / 4.0, rel=RTOL)


def test_llama3_empty_middle_band_is_two_bands():
    rope = RopeConfig(rope_type="llama3", head_dim=128, theta=5e5, factor=16.0, low_freq_factor=1.0,
                      high_freq_factor=1.0, original_max_position_embeddings=8192)
    inv, _ = _inv(rope)
    plain = 5e5 ** (-np.arange(0, 128, 2) / 128)
    long_wave = 2 * math.pi / plain > 8192
    np.testing.assert_array_equal(inv, np.where(long_wave, plain / 16.0, plain))
    assert long_wave.any() and not long_wave.all()


def test_llama3_empty_band_on_a_wavelength_is_an_error():
    """l = h with a wavelength exactly L_0/l: the blend is 0/0 (transformers computes NaN)."""
    rope = RopeConfig(rope_type="llama3", head_dim=2, theta=10.0, factor=2.0, low_freq_factor=2 / (2 * math.pi),
                      high_freq_factor=2 / (2 * math.pi), original_max_position_embeddings=2)
    with pytest.raises(ValueError, match="low_freq_factor == high_freq_factor"):
        rope_frequencies(rope)


def test_yarn_equal_betas_widen_the_ramp_by_a_thousandth():
    """Untruncated, equal betas give lo == hi; truncated (Kimi-K2), floor and ceil differ by one."""
    rope = RopeConfig(rope_type="yarn", head_dim=64, theta=5e4, factor=32.0, original_max_position_embeddings=4096,
                      beta_fast=1.0, beta_slow=1.0, truncate=False)
    lo, hi = rs.yarn_correction_range(rope)
    assert lo == hi
    ramp = np.asarray(rs.yarn_ramp(rope))
    j = np.arange(32)
    np.testing.assert_array_equal(ramp, np.clip((j - lo) / (hi + 0.001 - lo), 0, 1))
    assert math.isfinite(float(_inv(rope)[0].sum()))


@pytest.mark.parametrize("kwargs, name", [
    (dict(rope_type="yarn", head_dim=8, factor=2.0, original_max_position_embeddings=64, beta_fast=1.0,
          beta_slow=2.0), "beta_fast"),
    (dict(rope_type="llama3", head_dim=8, factor=2.0, original_max_position_embeddings=64, low_freq_factor=4.0,
          high_freq_factor=1.0), "high_freq_factor"),
    (dict(rope_type="ntk", head_dim=8, factor=float("nan")), "factor"),
    (dict(rope_type="ntk", head_dim=8, factor=-2.0), "factor"),
    (dict(rope_type="ntk", head_dim=8, factor=2.0, ntk_rule="vllm_mixed"), "mixed_b"),
    (dict(rope_type="ntk", head_dim=8, factor=2.0, mixed_b=0.5), "mixed_b"),
    (dict(rope_type="ntk", head_dim=8, factor=2.0, ntk_rule="vllm_mixed", mixed_b=-1.0), "mixed_b"),
    (dict(rope_type="ntk", head_dim=8, factor=2.0, ntk_rule="mixed"), "ntk_rule"),
    (dict(rope_type="linear", head_dim=8, factor=2.0, ntk_rule="vllm_fixed"), "ntk_rule"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, factor=2.0, short_factor=[1] * 4,
          long_factor=[1] * 4, short_mscale=1.1), "short_mscale"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, factor=2.0, short_factor=[1] * 4,
          long_factor=[1] * 4, short_mscale=1.1, long_mscale=float("nan")), "long_mscale"),
    (dict(rope_type="default", head_dim=8, long_mscale=1.1), "long_mscale"),
])
def test_relaxed_checks_still_refuse_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        RopeConfig(**kwargs)


def test_yarn_log_is_the_geometric_blend_of_kept_and_interpolated_frequencies():
    """Grok's log-space YaRN (docs/extrapolation.md#yarn-log): ω' = ω·s^(−(1 − μ)), μ = (1 − γ)·e, with YaRN's
    truncated ramp γ and A = 1; YaRN's arithmetic blend of the same ramp lies above it inside the ramp."""
    keys = dict(head_dim=128, theta=1e6, factor=4.0, original_max_position_embeddings=32768)
    rope = RopeConfig(rope_type="yarn_log", extrapolation_factor=0.5, **keys)
    inv, a = _inv(rope)
    lo, hi = rs.yarn_correction_range(rope)
    assert (lo, hi) == (math.floor(lo), math.ceil(hi)) and 0 < lo < hi < 63  # a ramp inside the pairs
    mu = (1 - np.clip((np.arange(64) - lo) / (hi - lo), 0, 1)) * 0.5
    plain = 1e6 ** (-np.arange(0, 128, 2) / 128)
    np.testing.assert_allclose(inv, plain * 4.0 ** (-(1 - mu)), rtol=RTOL)
    assert a == 1.0
    kept = _inv(RopeConfig(rope_type="yarn_log", **keys))[0]  # e = 1: the fast pairs keep ω
    np.testing.assert_allclose(kept[:lo], plain[:lo], rtol=RTOL)  # exp(ln ω): a few ulps off ω
    yarn = _inv(RopeConfig(rope_type="yarn", **keys))[0]
    inside = slice(lo + 1, hi)
    assert np.all(yarn[inside] > kept[inside] * (1 + 1e-3))  # arithmetic mean above the geometric one


# ------------------------------------------------------------------ the properties catch wrong rules
def _with_rule(monkeypatch, name, **changes):
    """rope_frequencies with the record of rule ``name`` carrying other formulas (a wrong rule)."""
    monkeypatch.setattr(rs, "RULES", {**RULES, name: dataclasses.replace(RULES[name], **changes)})


def test_mixed_property_breaks_on_a_wrong_exponent(monkeypatch):
    real = RULES["ntk"].inv_freq

    def off_by_one(rope, seq_len, ar):  # exp(a·j^b) instead of exp(a·(j+1)^b)
        return real(rope, seq_len, ar) * math.exp(math.log(rope.factor) / (rope.rotary_dim / 2) ** rope.mixed_b)

    _with_rule(monkeypatch, "ntk", inv_freq=off_by_one)
    with pytest.raises(AssertionError):
        test_vllm_ntk_mixed_divides_pair_j_by_exp_a_j_plus_1_to_the_b(0.625)


def test_fixed_property_breaks_without_the_divisor(monkeypatch):
    _with_rule(monkeypatch, "ntk", inv_freq=lambda rope, seq_len, ar: rs.base_inv_freq(
        rope.theta * rope.factor, rope.rotary_dim, np))
    with pytest.raises(AssertionError):
        test_vllm_ntk_fixed_is_the_scaled_base_and_divisor(64, 8.0)


def test_mscale_property_breaks_on_an_inclusive_switch(monkeypatch):
    real = RULES["longrope"].attention_factor

    def inclusive(rope, seq_len, ar):
        return real(rope, None if seq_len is None else seq_len + 1, ar)

    _with_rule(monkeypatch, "longrope", attention_factor=inclusive)
    with pytest.raises(AssertionError):
        test_longrope_mscale_switches_exactly_past_the_original_length()
