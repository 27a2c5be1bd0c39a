"""Spec: the context-extension rules of docs/extrapolation.md#the-math, as properties.

* every rule with ``factor = 1`` (and no explicit attention factor) is plain RoPE;
* linear (position interpolation) equals dividing positions by the factor;
* dynamic NTK is plain RoPE for ``seq_len ≤ max_position_embeddings`` and grows the base beyond;
  vLLM's static rule uses the base at ``factor·L_max`` for every length;
* YaRN: ratio ω'/ω is 1 up to the lower ramp bound, 1/s from the upper one, linear in between,
  non-increasing; the attention factor follows HF's order (explicit > mscale ratio > 0.1 ln s + 1);
* log-space YaRN (Grok): ln(ω'/ω) is −(1 − μ_j)·ln s, μ_j = (1 − γ_j)·e, γ_j the (always truncated) ramp;
  A = 1;
* llama3: three bands, continuous at both band edges (inclusive);
* LongRoPE: short factors up to ``seq_len = L_0`` (and for ``None``), long ones from ``L_0 + 1``.

Tolerance: frequency comparisons are float64 re-derivations of the same formula in another operation
order: rtol 1e-13 (``support.tolerance``); rotated vectors use the phase rule of ``assert_close``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from rope_oracle import rotate_by_frequencies
from rope_support import ROPE_TYPES, THETAS, base_inv, frequencies_or_reference, rope_dicts, rotary_width, yarn_bounds
from support import (
    assert_close,
    assert_frequencies,
    assert_within,
    at_most,
    frequency_rtol,
    require,
    tolerance,
    unit_roundoff,
)


def llama3_rtol(impl, rope) -> np.ndarray:
    """Per pair, the relative error of a correct llama3 ``ω_j`` in the declared dtype: the pair's frequency bound
    (:func:`support.frequency_rtol`: the angle forms in force) amplified by the blend, plus the blend's own
    roundings.

    In the band ``L0/high ≤ λ ≤ L0/low`` the factor is ``f = (1 − g)/s + g`` with ``g = (L0/λ − low)/(high − low)``
    and ``λ = 2π/ω``, so a relative error δ of ``ω`` moves ``f`` by ``κ·δ``, ``κ = (1 − 1/s)·(L0/λ)/((high − low)·f)``
    (``s − 1`` times ``low/(high − low)`` at the low edge: 20× for s = 21, high = 2·low). A pair just outside
    the band may be computed inside it (its ``λ`` rounds across the edge): ``κ`` is taken at ``λ`` clipped into
    the band. The blend's own arithmetic rounds eight times (``2π/ω``, ``L0/λ``, ``− low``, ``/(high − low)``,
    ``1 − g``, ``/s``, ``+ g``, the product with ``ω``).
    """
    d, s, l0 = rotary_width(rope), rope["factor"], rope["original_max_position_embeddings"]
    low, high = rope["low_freq_factor"], rope["high_freq_factor"]
    base = base_inv(rope["rope_theta"], d)
    wavelen = np.clip(2 * math.pi / base, l0 / high, l0 / low)
    g = (l0 / wavelen - low) / (high - low) if high > low else np.zeros_like(base)
    f = (1 - g) / s + g
    kappa = (1 - 1 / s) * (l0 / wavelen) / ((high - low) * f) if high > low else np.zeros_like(base)
    return (1 + kappa) * frequency_rtol(impl, base) + 8 * unit_roundoff(impl)


def frequencies(impl, rope, seq_len=None):
    return require(impl, "rope_frequencies")(rope, seq_len=seq_len)


@given(rope_dicts(factor_one=True), st.sampled_from([None, 1, 64, 4096, 4097, 100000]))
def test_factor_one_reduces_to_default(impl, rope, seq_len):
    """Every rule at factor 1 is plain RoPE, except transformers' dynamic NTK beyond L_max.

    At factor 1 the dynamic-NTK formula (docs/extrapolation.md#dynamic-ntk) and HF 5.24.0 still give
    θ·(L/L_max)^(d/(d−2)) for L > L_max: the base grows (see the dynamic test below).
    """
    if rope["rope_type"] == "dynamic" and rope.get("dynamic_rule") != "vllm_static" and seq_len is not None:
        seq_len = min(seq_len, rope["max_position_embeddings"])
    inv, a = frequencies(impl, rope, seq_len)
    d = rotary_width(rope)
    if rope["rope_type"] == "proportional":
        n_rot = rope["rotary_dim"] // 2
        expected = np.r_[rope["rope_theta"] ** (-(np.arange(0, 2 * n_rot, 2) / d)), np.zeros(d // 2 - n_rot)]
    else:
        expected = base_inv(rope["rope_theta"], d)
    assert_frequencies(inv, expected, impl)
    assert_within([a], [1.0], **tolerance(impl))


@given(rope_dicts(("proportional",), factor_one=True), st.sampled_from([1.0, 2.0, 8.0]))
def test_proportional_at_full_width_is_linear(impl, rope, factor):
    rope = {**rope, "rotary_dim": rope["head_dim"], "factor": factor}
    linear = {"rope_type": "linear", "rope_theta": rope["rope_theta"], "head_dim": rope["head_dim"], "factor": factor}
    assert_frequencies(frequencies(impl, rope)[0], frequencies(impl, linear)[0], impl, computed=2)


@given(rope_dicts(("linear",)), st.integers(1, 16), st.integers(0, 5000))
def test_linear_equals_positions_divided_by_the_factor(impl, rope, factor, n):
    rope = {**rope, "factor": float(factor)}
    apply = require(impl, "apply_rope")
    x = np.random.default_rng(n).standard_normal((1, rope["head_dim"]))
    plain = {k: v for k, v in rope.items() if k != "factor"} | {"rope_type": "default"}
    y_linear = apply(x, np.array([factor * n]), rope)
    y_plain = apply(x, np.array([n]), plain)
    inv, _ = frequencies_or_reference(impl, plain, None)  # for the tolerance only
    assert_close(y_linear, y_plain, impl, "phase", positions=np.array([factor * n]), inv_freq=inv,
                 magnitude=2 * np.abs(x).max(), what="linear(s·n) vs default(n)")


@given(rope_dicts(("dynamic",)), st.data())
def test_dynamic_is_default_up_to_max_position_embeddings(impl, rope, data):
    l_max = rope["max_position_embeddings"]
    plain = {"rope_type": "default", "rope_theta": rope["rope_theta"], "head_dim": rope["head_dim"],
             "rotary_dim": rope.get("rotary_dim", rope["head_dim"])}
    short = data.draw(st.sampled_from([None, 1, l_max // 2, l_max]))
    if rope.get("dynamic_rule") == "vllm_static":
        s, d = rope["factor"], plain["rotary_dim"]
        expected = base_inv(rope["rope_theta"] * (s * s - s + 1) ** (d / (d - 2)), d)
        assert_frequencies(frequencies(impl, rope, short)[0], expected, impl)
        return
    assert_frequencies(frequencies(impl, rope, short)[0], frequencies(impl, plain)[0], impl, computed=2)
    long = data.draw(st.integers(l_max + 1, 64 * l_max))
    inv = frequencies(impl, rope, long)[0]
    s, d = rope["factor"], plain["rotary_dim"]
    theta = rope["rope_theta"] * (s * long / l_max - (s - 1)) ** (d / (d - 2))
    assert_frequencies(inv, base_inv(theta, d), impl)
    assert inv[-1] < frequencies(impl, plain)[0][-1]  # the base grew (even at s = 1): slow pairs slower


@given(rope_dicts(("ntk",)))
def test_ntk_divides_the_lowest_pair_by_the_factor(impl, rope):
    inv, a = frequencies(impl, rope)
    d = rotary_width(rope)
    base = base_inv(rope["rope_theta"], d)
    assert_within([inv[0], a], [1.0, 1.0], **tolerance(impl))  # ω_0 = θ^0 = 1 is not scaled
    # ω_{m-1} = (θ·s^(d/(d−2)))^(−(d−2)/d): a power of a power, its rounding amplified by the exponents
    # (≤ ln θ·2⁻⁵² relative): 10× the dtype's rtol
    assert_within(inv[-1], base[-1] / rope["factor"], rtol=10 * tolerance(impl)["rtol"])


@given(rope_dicts(("yarn",)))
def test_yarn_ramp_bounds_and_blend_limits(impl, rope):
    inv, _ = frequencies(impl, rope)
    d, s = rotary_width(rope), rope["factor"]
    ratio = inv / base_inv(rope["rope_theta"], d)
    lo, hi = yarn_bounds(rope["rope_theta"], d, rope["original_max_position_embeddings"], rope["beta_fast"],
                         rope["beta_slow"], rope.get("truncate", True))
    hi = hi + 0.001 if lo == hi else hi
    j = np.arange(d // 2)
    ramp = np.clip((j - lo) / (hi - lo), 0, 1)
    # a ratio of two computed frequencies (each the value rule) and a blend of two terms: 10× the dtype's rtol
    assert_within(ratio, (1 - ramp) + ramp / s, rtol=10 * tolerance(impl)["rtol"])
    slack = max(1e-12, 10 * tolerance(impl)["rtol"])  # float64: 1e-12; a float32 adapter: its rounding
    assert np.all(ratio <= 1 + slack) and np.all(ratio >= 1 / s - slack)  # blend limits
    if lo < hi:  # (the clamp hi <= d - 1 can put hi below lo for tiny d and theta: then HF's ramp inverts)
        assert np.all(np.diff(ratio) <= slack)  # non-increasing in j
        assert_within(ratio[j <= lo], 1.0, rtol=tolerance(impl)["rtol"])
        assert_within(ratio[j >= hi], 1 / s, rtol=tolerance(impl)["rtol"])


@given(rope_dicts(("yarn",)))
def test_yarn_attention_factor_resolution_order(impl, rope):
    _, a = frequencies(impl, rope)
    s = rope["factor"]

    def mscale(k=1.0):
        return 1.0 if s <= 1 else 0.1 * k * math.log(s) + 1.0

    if rope.get("attention_factor") is not None:
        expected = rope["attention_factor"]  # replaces, never multiplies
    elif rope.get("mscale") and rope.get("mscale_all_dim"):
        expected = mscale(rope["mscale"]) / mscale(rope["mscale_all_dim"])
    else:
        expected = mscale()
    assert_within([a], [expected], **tolerance(impl))
    only_mscale = {k: v for k, v in rope.items() if k not in ("mscale_all_dim", "attention_factor")}
    only_mscale["mscale"] = 2.0
    # mscale without mscale_all_dim is ignored
    assert_within([frequencies(impl, only_mscale)[1]], [mscale()], **tolerance(impl))


def yarn_log_ratio(rope):
    """ω'/ω of log-space YaRN (docs/extrapolation.md#yarn-log): s^(−(1 − μ_j)), μ_j = (1 − γ_j)·e."""
    d, s = rotary_width(rope), rope["factor"]
    lo, hi = yarn_bounds(rope["rope_theta"], d, rope["original_max_position_embeddings"], rope["beta_fast"],
                         rope["beta_slow"], truncate=True)
    hi = hi + 0.001 if lo == hi else hi
    ramp = np.clip((np.arange(d // 2) - lo) / (hi - lo), 0, 1)
    weight = (1 - ramp) * rope.get("extrapolation_factor", 1.0)
    return s ** (-(1 - weight))


@given(rope_dicts(("yarn_log",)))
def test_yarn_log_blends_kept_and_interpolated_frequencies_in_log_space(impl, rope):
    inv, a = frequencies(impl, rope)
    ratio = inv / base_inv(rope["rope_theta"], rotary_width(rope))
    # a ratio of two computed frequencies, each an exp of a log-space blend: 10× the dtype's rtol
    assert_within(ratio, yarn_log_ratio(rope), rtol=10 * tolerance(impl)["rtol"])
    assert_within([a], [1.0], **tolerance(impl))  # Grok leaves YaRN's magnitude out of cos/sin


@given(st.sampled_from([1.0, 2.0]), st.sampled_from([2.0, 4.0]), st.sampled_from([1024, 8192]),
       st.sampled_from([8, 32, 128]), st.floats(2.0, 64.0), st.data())
def test_llama3_is_continuous_at_its_band_edges(impl, low, high_mult, l0, d, s, data):
    high = low * high_mult
    edge = data.draw(st.sampled_from(["high", "low"]))
    j = data.draw(st.integers(1, d // 2 - 1))
    wavelen = l0 / (high if edge == "high" else low)
    theta = (wavelen / (2 * math.pi)) ** (d / (2 * j))  # puts λ_j on the band edge (up to rounding)
    assume(1.5 < theta < 1e12)
    rope = {"rope_type": "llama3", "rope_theta": theta, "head_dim": d, "factor": s, "low_freq_factor": low,
            "high_freq_factor": high, "original_max_position_embeddings": l0}
    ratio = frequencies(impl, rope)[0] / base_inv(theta, d)
    target = 1.0 if edge == "high" else 1 / s
    slack = max(1e-12, 10 * tolerance(impl)["rtol"])  # float64: 1e-12; a float32 adapter: its rounding
    # either side of the edge: the same value; θ is solved from the edge, so λ_j lands on it only up to the
    # rounding of a power with exponent d/(2j) ≤ 64: rel 1e-9 in float64; a lower precision's ω_j errs by its
    # bound, which the blend amplifies (llama3_rtol)
    assert ratio[j] == pytest.approx(target, rel=max(1e-9, llama3_rtol(impl, rope)[j]))
    assert np.all(np.diff(ratio) <= slack)  # θ > 1: wavelengths grow with j, the ratio falls
    assert_within(ratio[0], 1.0, **tolerance(impl))  # λ_0 = 2π lies below every L0/high here


@given(rope_dicts(("llama3",)))
def test_llama3_bands(impl, rope):
    d, s, l0 = rotary_width(rope), rope["factor"], rope["original_max_position_embeddings"]
    low, high = rope["low_freq_factor"], rope["high_freq_factor"]
    base = base_inv(rope["rope_theta"], d)
    ratio = frequencies(impl, rope)[0] / base
    wavelen = 2 * math.pi / base
    expected = np.ones_like(base)
    expected[wavelen > l0 / low] = 1 / s
    mid = (wavelen >= l0 / high) & (wavelen <= l0 / low)
    g = (l0 / wavelen[mid] - low) / (high - low)
    expected[mid] = (1 - g) / s + g  # linear in ω, not in λ
    assert_within(ratio, expected, rtol=0.0, atol=llama3_rtol(impl, rope) * expected, what="ω_j / θ^(−2j/d)")


@given(rope_dicts(("longrope",)), st.integers(1, 5000))
def test_longrope_switches_exactly_after_the_original_length(impl, rope, p):
    l0 = rope["original_max_position_embeddings"]
    d = rotary_width(rope)
    pos_part = rope["rope_theta"] ** (np.arange(0, d, 2) / d)
    short = 1 / (np.array(rope["short_factor"]) * pos_part)
    long = 1 / (np.array(rope["long_factor"]) * pos_part)
    for seq_len, expected in ((None, short), (1, short), (l0 - 1, short), (l0, short), (l0 + 1, long),
                              (l0 + p, long)):
        assert_frequencies(frequencies(impl, rope, seq_len)[0], expected, impl, what=f"ω at seq_len={seq_len}")
    a_short, a_long = frequencies(impl, rope, l0)[1], frequencies(impl, rope, l0 + 1)[1]
    assert a_short == a_long  # one attention factor for both sets


@given(rope_dicts(("longrope",)), st.integers(1, 5000))
def test_longrope_switches_after_the_original_length_through_apply_rope(impl, rope, p):
    """The same boundary through apply_rope alone (a kernel whose tables live inside): with seq_len =
    max(positions) + 1, position L0 − 1 rotates with the short factors and position L0 with the long ones
    (ω_j = 1/(factor_j·θ^(2j/d)), the one attention factor A of the rope)."""
    l0 = rope["original_max_position_embeddings"]
    apply = require(impl, "apply_rope")
    d = rotary_width(rope)
    pos_part = rope["rope_theta"] ** (np.arange(0, d, 2) / d)
    _, a = frequencies_or_reference(impl, rope, l0 + 1)  # A, the same for both sets
    x = np.random.default_rng(p).standard_normal((1, rope["head_dim"]))
    for position, factors, which in ((l0 - 1, "short_factor", "short"), (l0, "long_factor", "long")):
        inv = 1 / (np.array(rope[factors]) * pos_part)
        expected = rotate_by_frequencies(x, np.array([position]), inv, a, rope)
        assert_close(apply(x, np.array([position]), rope), expected, impl, "phase", positions=np.array([position]),
                     inv_freq=inv, magnitude=max(a, 1.0) * 2 * np.abs(x).max(),
                     what=f"position {position}: the {which} factors (seq_len = {position + 1}, L0 = {l0})")


@pytest.mark.parametrize("rope_type", ROPE_TYPES)
@given(data=st.data())
def test_frequencies_are_positive_finite_and_at_most_one(impl, rope_type, data):
    rope = data.draw(rope_dicts((rope_type,)))
    inv, a = frequencies(impl, rope, data.draw(st.sampled_from([None, 1, 5000, 10**6])))
    assert inv.dtype == np.float64 if impl.INFO.get("dtype", "float64") == "float64" else True
    assert np.all(np.isfinite(inv)) and np.isfinite(a) and a > 0
    nonzero = inv[inv != 0] if rope_type == "proportional" else inv
    assert np.all(nonzero > 0)
    if rope_type != "longrope":  # LongRoPE factors may be < 1 in principle; the drawn ones are >= 1
        at_most(inv, 1.0, impl, what="ω")


@given(THETAS)
def test_theta_is_the_base_of_the_plain_pairs(impl, theta):
    rope = {"rope_type": "default", "rope_theta": theta, "head_dim": 16}
    inv, _ = frequencies(impl, rope)
    assert_frequencies(inv, theta ** (-(np.arange(0, 16, 2) / 16)), impl)
