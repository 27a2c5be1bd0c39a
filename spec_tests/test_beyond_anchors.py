"""Spec: KERPLE, FIRE, Sandwich, xPos and CoPE (docs/other-encodings.md#kerple, docs/other-encodings.md#cope,
docs/conventions.md#equivalences, docs/other-encodings.md#fire, docs/other-encodings.md#xpos,
docs/other-encodings.md#sandwich).

Oracles are the spec formulas evaluated directly in NumPy. Tolerances: float64 re-derivations of a few
dozen O(1) terms, rtol 1e-12 / atol 1e-13 (``tol``) unless a test states otherwise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from derived import fire_small_c, fire_small_c_rtol, sandwich_atol, xpos_score_atol
from encoding_support import softmax, tol
from hypothesis import given
from hypothesis import strategies as st
from support import assert_quoted, assert_within, cases, require

SEEDS = st.integers(0, 2**32 - 1)


def causal_triangle(qpos: np.ndarray, kpos: np.ndarray) -> np.ndarray:
    return kpos[None, :] <= qpos[:, None]


# ----------------------------------------------------------------------------------------- KERPLE


@given(seed=SEEDS, h=st.integers(1, 4), t=st.integers(1, 12), kind=st.sampled_from(["log", "power"]))
def test_kerple_formula(impl, seed, h, t, kind):
    kerple = require(impl, "kerple_bias")
    rng = np.random.default_rng(seed)
    r1, r2 = rng.uniform(0.0, 2.0, h), rng.uniform(0.0, 2.5, h)
    pos = np.arange(t)
    got = kerple(r1, r2, pos, pos, kind=kind)
    n = np.maximum(pos[:, None] - pos[None, :], 0).astype(np.float64)
    a, b = np.maximum(r1, 0.01)[:, None, None], np.maximum(r2, 0.01)[:, None, None]
    expected = -a * np.log1p(b * n) if kind == "log" else -a * n ** np.minimum(b, 2.0)
    assert_within(got, expected, **tol(impl))


@given(seed=SEEDS, t=st.integers(2, 16), kind=st.sampled_from(["log", "power"]))
def test_kerple_zero_at_distance_zero_and_decreasing(impl, seed, t, kind):
    """b(0) = 0; strictly decreasing in distance; the log kernel is convex in distance."""
    kerple = require(impl, "kerple_bias")
    rng = np.random.default_rng(seed)
    r1, r2 = rng.uniform(0.05, 2.0, 3), rng.uniform(0.05, 1.0, 3)
    row = kerple(r1, r2, np.array([t - 1]), np.arange(t), kind=kind)[:, 0, ::-1]  # distances 0 … t−1
    assert np.all(row[:, 0] == 0)
    assert np.all(np.diff(row, axis=-1) < 0)
    if kind == "log" and t >= 3:
        assert np.all(np.diff(row, n=2, axis=-1) > -1e-15)


@given(n_heads=st.integers(1, 16), t=st.integers(1, 12))
def test_kerple_power_with_exponent_one_is_alibi(impl, n_heads, t):
    """KERPLE power (r1 = m, r2 = 1) ≡ causal ALiBi on the causal triangle (diff 0); slopes below the
    anchor's clamp 0.01 act as 0.01."""
    kerple, slopes, alibi = require(impl, "kerple_bias", "alibi_slopes", "alibi_bias")
    m = slopes(n_heads)
    pos = np.arange(t)
    got = kerple(m, np.ones(n_heads), pos, pos, kind="power")
    expected = alibi(n_heads, t, t, form="causal") * (np.maximum(m, 0.01) / m)[:, None, None]
    tri = np.tril(np.ones((t, t), dtype=bool))
    # float64: −r1·n^1 and −m·(i − j)·(max(m, 0.01)/m) are one or two roundings apart: rtol 1e-15
    assert_within(got[:, tri], expected[:, tri], **tol(impl, rtol=1e-15, atol=0))


@given(seed=SEEDS, t=st.integers(1, 8), shift=st.integers(1, 100_000), kind=st.sampled_from(["log", "power"]))
def test_kerple_is_translation_invariant(impl, seed, t, shift, kind):
    kerple = require(impl, "kerple_bias")
    rng = np.random.default_rng(seed)
    r1, r2 = rng.uniform(0, 2, 2), rng.uniform(0, 2, 2)
    pos = np.arange(t)
    np.testing.assert_array_equal(kerple(r1, r2, pos + shift, pos + shift, kind=kind), kerple(r1, r2, pos, pos,
                                                                                               kind=kind))


# ----------------------------------------------------------------------------------------- FIRE


def fire_oracle(qpos, kpos, w1, b1, w2, b2, c, L, eps):
    rel = qpos[:, None].astype(np.float64) - kpos[None, :]
    norm = np.maximum(qpos.astype(np.float64), abs(L))[:, None]
    feat = np.log(np.abs(c * rel) + 1) / (np.log(np.abs(c * norm) + 1) + eps)
    return np.moveaxis(np.maximum(feat[..., None] * w1 + b1, 0.0) @ w2.T + b2, -1, 0)


@st.composite
def fire_case(draw):
    rng = np.random.default_rng(draw(SEEDS))
    width, h = draw(st.integers(1, 8)), draw(st.integers(1, 3))
    w1, b1 = rng.standard_normal(width), rng.standard_normal(width)
    return w1, b1, rng.standard_normal((h, width)), rng.standard_normal(h)


@given(case=fire_case(), start=st.integers(0, 3000), t=st.integers(1, 8), c=st.floats(0.01, 2.0),
       L=st.sampled_from([0.0, 4.0, 512.0]))
def test_fire_formula(impl, case, start, t, c, L):
    fire = require(impl, "fire_bias")
    w1, b1, w2, b2 = case
    pos = start + np.arange(t)
    got = fire(pos, pos, w1, b1, w2, b2, c=c, L=L, eps=1e-6)
    tri = causal_triangle(pos, pos)
    # float64: two logs, a ratio and a width-w MLP evaluated in another order than the oracle's; the
    # ratio's denominator log(c·L + 1) + eps can be ~1e-6, which scales the rounding up: rtol 1e-11
    assert_within(got[:, tri], fire_oracle(pos, pos, w1, b1, w2, b2, c, L, 1e-6)[:, tri],
                  **tol(impl, rtol=1e-11, atol=1e-12))


def test_fire_features_lie_in_unit_interval(impl):
    """With f = identity (w1 = 1, b1 = 0, w2 = 1, b2 = 0) the bias is the feature: in [0, 1) on the
    causal triangle (max 0.99999981 over 2000 positions at c = 0.1, L = 512)."""
    fire = require(impl, "fire_bias")
    pos = np.arange(2000)
    one = np.ones(1)
    feat = fire(pos[-200:], pos, one, np.zeros(1), one[None, :], np.zeros(1))[0]
    tri = causal_triangle(pos[-200:], pos)
    assert feat[tri].min() == 0.0 and feat[tri].max() < 1.0
    assert_quoted(np.array([feat[tri].max()]), ["0.99999981"], impl, what="largest feature")


def test_fire_small_c_is_the_linear_ratio(impl):
    """c → 0: φ → (i − j)/max(i, L), at the c where the arithmetic's rounding of 1 + c·x is as small as the series
    error (``derived.fire_small_c``: √u), within the bound of both (``derived.fire_small_c_rtol``: ~2e-7 in
    float64, ~5e-3 in float32)."""
    fire = require(impl, "fire_bias")
    pos = np.arange(40)
    one = np.ones(1)
    feat = fire(pos, pos, one, np.zeros(1), one[None, :], np.zeros(1), c=fire_small_c(impl), L=16.0, eps=0.0)[0]
    distance, norm = pos[:, None] - pos[None, :], np.maximum(pos, 16.0)[:, None] + 0 * pos[None, :]
    past = causal_triangle(pos, pos) & (distance > 0)  # the diagonal is ψ(0) = 0 exactly
    assert np.all(np.diagonal(feat) == 0)
    ratio = distance[past] / norm[past]
    assert_within(feat[past], ratio, rtol=0.0, atol=fire_small_c_rtol(impl, distance[past], norm[past]) * ratio)


@given(case=fire_case(), t=st.integers(2, 8))
def test_fire_shift_invariant_only_below_L(impl, case, t):
    """Shift-invariant while all query positions stay < L; not after (L = 4, shift 100)."""
    fire = require(impl, "fire_bias")
    w1, b1, w2, b2 = case
    pos = np.arange(t)
    tri = causal_triangle(pos, pos)
    base = fire(pos, pos, w1, b1, w2, b2, L=512.0)
    np.testing.assert_array_equal(fire(pos + 100, pos + 100, w1, b1, w2, b2, L=512.0)[:, tri], base[:, tri])
    one = np.ones(1)
    short = fire(pos, pos, one, np.zeros(1), one[None, :], np.zeros(1), L=1.0)
    moved = fire(pos + 100, pos + 100, one, np.zeros(1), one[None, :], np.zeros(1), L=1.0)
    assert np.abs(short - moved)[:, tri].max() > 0.1


# ----------------------------------------------------------------------------------------- Sandwich


@given(d=st.sampled_from([2, 4, 8, 16, 64]), h=st.integers(1, 8), start=st.integers(0, 1000), t=st.integers(1, 10))
def test_sandwich_is_a_shifted_sinusoid_dot_product(impl, d, h, start, t):
    """Non-causal raw = Σ_{k=1}^{d/2} cos((j−i)·10000^(−2k/d)) = P_i·P_j − cos(i−j) + cos((i−j)·10^−4) with the
    paper sinusoid P (k = 0 … d/2−1: drop ω_0 = 1, add ω_{d/2} = 10^−4); head h = head 1 / h; zero diagonal; ≤ 0;
    even in i − j."""
    sandwich, sinusoidal = require(impl, "sandwich_bias", "sinusoidal")
    pos = start + np.arange(t)
    got = sandwich(pos, pos, d, h, causal=False)
    table = sinusoidal(pos, d)
    rel = np.subtract.outer(pos, pos)
    raw = table @ table.T - np.cos(rel) + np.cos(rel * 1e-4)
    scale = np.arange(1, h + 1)[:, None, None] * 8.0 / h
    # the table's d products at positions ≤ 1010 and the bias's d/2 cosines of distances ≤ 9, each angle within
    # the phase rule (derived.sandwich_atol); the zero diagonal: one rounding per term
    assert_within(got, (raw - d / 2)[None] / scale, rtol=0.0, atol=sandwich_atol(impl, d, int(pos.max()), t - 1))
    assert_within(got, got[:1] / np.arange(1, h + 1)[:, None, None], **tol(impl))
    zero = tol(impl, atol=1e-13 * d)["atol"]
    assert np.all(np.abs(np.diagonal(got, axis1=1, axis2=2)) < zero)
    assert np.all(got <= zero)
    assert_within(got, np.swapaxes(got, 1, 2), **tol(impl))


@given(d=st.sampled_from([2, 4, 8, 16]), h=st.integers(1, 4), t=st.integers(1, 10))
def test_sandwich_causal_reads_distance_zero_on_future_keys(impl, d, h, t):
    sandwich = require(impl, "sandwich_bias")
    pos = np.arange(t)
    causal, full = sandwich(pos, pos, d, h, causal=True), sandwich(pos, pos, d, h, causal=False)
    tri = causal_triangle(pos, pos)
    np.testing.assert_array_equal(causal[:, tri], full[:, tri])
    np.testing.assert_array_equal(causal[:, ~tri], 0.0)


def test_sandwich_single_head_divisor_is_eight(impl):
    sandwich = require(impl, "sandwich_bias")
    got = sandwich(np.array([3]), np.array([0]), 2, 1, causal=True)[0, 0, 0]
    assert_within(got, (math.cos(3 * 1e-4) - 1.0) / 8.0, **tol(impl))


# ----------------------------------------------------------------------------------------- xPos


def xpos_oracle(x, pos, sign, base=1e4, scale_base=512.0):
    """docs/other-encodings.md#xpos (uncentred: the centre cancels in q·k)."""
    d = x.shape[-1]
    ang = pos[:, None] * (base ** (-np.arange(0, d, 2) / d))[None, :]
    zeta = (np.arange(0, d, 2) + 0.4 * d) / (1.4 * d)
    y = np.empty_like(x)
    y[..., 0::2] = x[..., 0::2] * np.cos(ang) - x[..., 1::2] * np.sin(ang)
    y[..., 1::2] = x[..., 1::2] * np.cos(ang) + x[..., 0::2] * np.sin(ang)
    return y * np.repeat(zeta[None, :] ** (sign * pos[:, None] / scale_base), 2, axis=1)


@given(seed=SEEDS, h=st.integers(1, 3), t=st.integers(1, 10), d=st.sampled_from([2, 4, 8, 16]),
       start=st.integers(0, 2000))
def test_xpos_scores_match_the_formula(impl, seed, h, t, d, start):
    xpos = require(impl, "xpos")
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d))
    pos = start + np.arange(t)
    q_rot, k_rot = xpos(q, k, pos, pos)
    assert q_rot.shape == q.shape and k_rot.shape == k.shape
    expected = xpos_oracle(q, pos, 1) @ np.swapaxes(xpos_oracle(k, pos, -1), -1, -2)
    # angles up to 2010·ω and the powers ζ^(±(p − c)/512) of d/2 pairs summed (derived.xpos_score_atol)
    assert_within(q_rot @ np.swapaxes(k_rot, -1, -2), expected, rtol=0.0, atol=xpos_score_atol(impl, q, k, pos))


@given(seed=SEEDS, t=st.integers(2, 10), d=st.sampled_from([2, 4, 8]), shift=st.integers(1, 5000))
def test_xpos_scores_depend_only_on_the_distance(impl, seed, t, d, shift):
    """Constant q and k rows give a Toeplitz score matrix; shifting all positions changes nothing."""
    xpos = require(impl, "xpos")
    rng = np.random.default_rng(seed)
    q = np.broadcast_to(rng.standard_normal(d), (1, t, d)).copy()
    k = np.broadcast_to(rng.standard_normal(d), (1, t, d)).copy()
    pos = np.arange(t)
    q_rot, k_rot = xpos(q, k, pos, pos)
    s = (q_rot @ k_rot[0].T)[0]
    # two computed scores compared: each within derived.xpos_score_atol (at positions up to 5010 the powers
    # ζ^(±(p − c)/512), exponent up to ~10, multiply q and divide k: their rounding grows with the exponent)
    atol = xpos_score_atol(impl, q, k, pos)[0]
    for offset in range(-(t - 1), t):
        diagonal, allowed = np.diagonal(s, offset), np.diagonal(atol, offset)
        assert_within(diagonal, diagonal[0], rtol=0.0, atol=allowed + allowed[0])
    q_s, k_s = xpos(q, k, pos + shift, pos + shift)
    assert_within((q_s @ k_s[0].T)[0], s, rtol=0.0, atol=atol + xpos_score_atol(impl, q, k, pos + shift)[0])


def test_xpos_infinite_scale_base_is_interleaved_rope(impl):
    xpos = require(impl, "xpos")
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 8))
    pos = np.arange(5) + 7
    q_rot, k_rot = xpos(q, k, pos, pos, scale_base=math.inf)
    assert_within(q_rot, xpos_oracle(q, pos, 1, scale_base=math.inf), **tol(impl))
    assert_within(k_rot, xpos_oracle(k, pos, -1, scale_base=math.inf), **tol(impl))


def test_xpos_decays_with_distance(impl):
    """Unit vectors in pair 0 (θ_0 = 1): score(m, n) = ζ_0^{(m−n)/γ}·cos(m − n), ζ_0 = 2/7 < 1, so the
    envelope shrinks with the distance m − n (a cached query: one query, all keys)."""
    xpos = require(impl, "xpos")
    t, d = 9, 4
    q, k = np.zeros((1, 1, d)), np.zeros((1, t, d))
    q[..., 0] = k[..., 0] = 1.0
    q_rot, k_rot = xpos(q, k, np.array([t - 1]), np.arange(t))
    dist = t - 1 - np.arange(t)
    expected = (0.4 / 1.4) ** (dist / 512.0) * np.cos(dist)
    assert_within((q_rot @ np.swapaxes(k_rot, -1, -2))[0, 0], expected, **tol(impl))


# ----------------------------------------------------------------------------------------- CoPE


def test_cope_gates_one_give_relative_positions(impl):
    """All gates 1 ⇒ p_ij = i − j + 1 on j ≤ i (a relative encoding with offset 1)."""
    positions = require(impl, "cope_positions")
    t = 7
    p = positions(np.tril(np.ones((t, t))), 64)
    i, j = np.indices((t, t))
    np.testing.assert_array_equal(p[j <= i], (i - j + 1)[j <= i])
    np.testing.assert_array_equal(positions(np.tril(np.ones((t, t))), 4)[j <= i], np.minimum(i - j + 1, 3)[j <= i])


@given(seed=SEEDS, t=st.integers(1, 10))
def test_cope_positions_are_suffix_sums(impl, seed, t):
    """p non-increasing in j on j ≤ i, p_ii = g_ii ∈ (0, 1)."""
    positions = require(impl, "cope_positions")
    gates = np.tril(np.random.default_rng(seed).uniform(0.01, 0.99, (2, t, t)))
    p = positions(gates, 100)
    for i in range(t):
        assert np.all(np.diff(p[:, i, : i + 1], axis=-1) <= 0)
    assert_within(np.diagonal(p, axis1=1, axis2=2), np.diagonal(gates, axis1=1, axis2=2), **tol(impl))
    assert_within(p[:, :, 0], gates.sum(-1), **tol(impl))


@given(seed=SEEDS, h=st.integers(1, 3), t=st.integers(1, 8), d=st.integers(1, 6), npos=st.integers(1, 12))
def test_cope_gates_one_read_the_table_exactly(impl, seed, h, t, d, npos):
    """Integer positions read z_i = q_i·e at column min(i − j + 1, npos − 1) (no interpolation)."""
    cope = require(impl, "cope_logits")
    rng = np.random.default_rng(seed)
    q, k, e = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d)), rng.standard_normal((d, npos))
    got = cope(q, k, e, gates=np.ones((t, t)))
    i, j = np.indices((t, t))
    col = np.minimum(i - j + 1, npos - 1)
    z = q @ e
    pos_term = np.take_along_axis(z, np.where(j <= i, col, 0)[None].repeat(h, 0), axis=-1)
    expected = np.where(j <= i, (q @ np.swapaxes(k, -1, -2) + pos_term) / math.sqrt(d), -np.inf)
    assert_within(got, expected, **tol(impl))


@given(seed=SEEDS, h=st.integers(1, 3), t=st.integers(1, 8), d=st.integers(1, 6))
def test_cope_gates_zero_is_nope(impl, seed, h, t, d):
    """All gates 0 ⇒ p = 0 ⇒ the position logit is constant per row ⇒ NoPE probabilities."""
    cope = require(impl, "cope_logits")
    rng = np.random.default_rng(seed)
    q, k, e = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d)), rng.standard_normal((d, 5))
    mask = np.tril(np.ones((t, t), dtype=bool))
    nope = softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(d), mask)
    assert_within(softmax(cope(q, k, e, gates=np.zeros((t, t)))), nope, **tol(impl))


@given(seed=SEEDS, t=st.integers(1, 8), d=st.integers(1, 6), npos=st.integers(2, 12))
def test_cope_default_gates_interpolate(impl, seed, t, d, npos):
    """Sigmoid gates of q·k/√d, suffix sums, linear interpolation between ⌊p⌋ and ⌈p⌉ (docs/other-encodings.md#cope)."""
    cope = require(impl, "cope_logits")
    rng = np.random.default_rng(seed)
    q, k, e = rng.standard_normal((1, t, d)), rng.standard_normal((1, t, d)), rng.standard_normal((d, npos))
    qk = q[0] @ k[0].T
    g = np.tril(np.ones((t, t))) / (1.0 + np.exp(-qk / math.sqrt(d)))
    p = np.minimum(np.flip(np.cumsum(np.flip(g, -1), -1), -1), npos - 1)
    z = q[0] @ e
    lo, hi = np.floor(p).astype(int), np.ceil(p).astype(int)
    pos = np.take_along_axis(z, hi, -1) * (p - lo) + np.take_along_axis(z, lo, -1) * (1 - (p - lo))
    expected = np.where(np.tril(np.ones((t, t), bool)), (qk + pos) / math.sqrt(d), -np.inf)
    assert_within(cope(q, k, e)[0], expected, **tol(impl))


@pytest.mark.parametrize("bad", cases("npos", [0, -3]))
def test_cope_npos_must_be_positive(impl, bad):
    positions = require(impl, "cope_positions")
    with pytest.raises(ValueError, match="npos"):
        positions(np.ones((2, 2)), bad)
