"""Spec: Shaw et al. relative representations and Transformer-XL (docs/relative.md#shaw,
docs/relative.md#transformer-xl, docs/conventions.md#equivalences).

The oracles below loop over (i, j) with the paper formulas; they are independent of any implementation.
Tolerances: float64 sums of a few dozen O(1) products, rtol 1e-12 / atol 1e-13 (``tol``).
"""

from __future__ import annotations

import math

import numpy as np
from encoding_support import nope_attention, softmax, tol
from hypothesis import given
from hypothesis import strategies as st
from support import assert_within, require

# ----------------------------------------------------------------------------------------- Shaw


def shaw_oracle(q, k, v, w_k, w_v, clip, pos, causal):
    """e_ij = q_i·(k_j + a^K_ij)/√d, z_i = Σ_j α_ij (v_j + a^V_ij), a_ij = w[clip(p_j − p_i, k) + k]."""
    h, t, d = q.shape
    out = np.zeros((h, t, v.shape[-1]))
    for head in range(h):
        for i in range(t):
            allowed = [j for j in range(t) if not causal or pos[j] <= pos[i]]
            idx = [min(max(pos[j] - pos[i], -clip), clip) + clip for j in allowed]
            e = np.array([q[head, i] @ (k[head, j] + w_k[r]) for j, r in zip(allowed, idx, strict=True)])
            alpha = softmax(e / math.sqrt(d))
            out[head, i] = sum(a * (v[head, j] + w_v[r]) for a, j, r in zip(alpha, allowed, idx, strict=True))
    return out


@st.composite
def shaw_case(draw, *, max_t: int = 6):
    h, t, d, dv = draw(st.integers(1, 3)), draw(st.integers(1, max_t)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    clip = draw(st.integers(0, 7))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q, k = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d))
    v = rng.standard_normal((h, t, dv))
    w_k, w_v = rng.standard_normal((2 * clip + 1, d)), rng.standard_normal((2 * clip + 1, dv))
    return q, k, v, w_k, w_v, clip


@given(case=shaw_case(), start=st.integers(0, 1000), causal=st.booleans())
def test_shaw_matches_the_paper_formula(impl, case, start, causal):
    shaw = require(impl, "shaw_attention")
    q, k, v, w_k, w_v, clip = case
    pos = start + np.arange(q.shape[1])
    got = shaw(q, k, v, w_k, w_v, clip, positions=pos, causal=causal)
    assert_within(got, shaw_oracle(q, k, v, w_k, w_v, clip, pos, causal), **tol(impl))


@given(case=shaw_case(), shift=st.integers(1, 10_000), causal=st.booleans())
def test_shaw_is_translation_invariant(impl, case, shift, causal):
    shaw = require(impl, "shaw_attention")
    q, k, v, w_k, w_v, clip = case
    pos = np.arange(q.shape[1])
    assert_within(shaw(q, k, v, w_k, w_v, clip, positions=pos + shift, causal=causal),
                               shaw(q, k, v, w_k, w_v, clip, positions=pos, causal=causal), **tol(impl))


@given(case=shaw_case(), causal=st.booleans())
def test_shaw_with_k0_is_nope_plus_wv0(impl, case, causal):
    """k = 0: every pair reads row 0, a per-row constant logit shift: output = NoPE + w^V[0]
    (docs/conventions.md#equivalences)."""
    shaw = require(impl, "shaw_attention")
    q, k, v, _, _, _ = case
    rng = np.random.default_rng(q.size)
    w_k, w_v = rng.standard_normal((1, q.shape[-1])), rng.standard_normal((1, v.shape[-1]))
    got = shaw(q, k, v, w_k, w_v, 0, causal=causal)
    assert_within(got, nope_attention(q, k, v, causal) + w_v[0], **tol(impl))


@given(case=shaw_case())
def test_shaw_equal_key_rows_and_zero_values_is_nope(impl, case):
    shaw = require(impl, "shaw_attention")
    q, k, v, w_k, w_v, clip = case
    w_k = np.broadcast_to(w_k[:1], w_k.shape).copy()
    got = shaw(q, k, v, w_k, np.zeros_like(w_v), clip)
    assert_within(got, nope_attention(q, k, v), **tol(impl))


@given(case=shaw_case(), extra=st.integers(1, 5))
def test_shaw_larger_clip_changes_nothing_once_unclipped(impl, case, extra):
    """For k ≥ T − 1 nothing is clipped: a larger k with the same inner rows gives the same output."""
    shaw = require(impl, "shaw_attention")
    q, k, v, _, _, _ = case
    t = q.shape[1]
    clip = t - 1
    rng = np.random.default_rng(t)
    w_k, w_v = rng.standard_normal((2 * clip + 1, q.shape[-1])), rng.standard_normal((2 * clip + 1, v.shape[-1]))
    pad_k, pad_v = rng.standard_normal((extra, q.shape[-1])), rng.standard_normal((extra, v.shape[-1]))
    big_k, big_v = np.concatenate([pad_k, w_k, pad_k]), np.concatenate([pad_v, w_v, pad_v])
    assert_within(shaw(q, k, v, big_k, big_v, clip + extra), shaw(q, k, v, w_k, w_v, clip),
                               **tol(impl))


def test_shaw_is_sign_aware(impl):
    """Shaw tells left from right: reversing the token order does not just reverse the outputs
    (docs/conventions.md#order-and-permutations)."""
    shaw = require(impl, "shaw_attention")
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 5, 4)) for _ in range(3))
    w_k, w_v = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    out = shaw(q, k, v, w_k, w_v, 2)
    rev = shaw(q[:, ::-1], k[:, ::-1], v[:, ::-1], w_k, w_v, 2)[:, ::-1]
    assert np.abs(out - rev).max() > 1e-3


# ----------------------------------------------------------------------------------------- Transformer-XL


@given(lead=st.integers(1, 3), qlen=st.integers(1, 8), extra=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_rel_shift_equals_the_gather_on_valid_entries(impl, lead, qlen, extra, seed):
    """shift(x)[i, j] = x[i, j + qlen − 1 − i] for j ≤ i + klen − qlen (docs/relative.md#transformer-xl)."""
    rel_shift = require(impl, "txl_rel_shift")
    klen = qlen + extra
    x = np.random.default_rng(seed).standard_normal((lead, qlen, klen))
    got = rel_shift(x)
    assert got.shape == x.shape
    for i in range(qlen):
        for j in range(i + klen - qlen + 1):
            assert got[:, i, j].tolist() == x[:, i, j + qlen - 1 - i].tolist()


def txl_oracle(q, k, r, u, v):
    """A_ij = ((q_i + u)·k_j + (q_i + v)·r[klen − 1 − (mlen + i − j)]) / √d on j ≤ mlen + i, else −inf."""
    h, qlen, d = q.shape
    klen = k.shape[1]
    mlen = klen - qlen
    out = np.full((h, qlen, klen), -np.inf)
    for i in range(qlen):
        for j in range(mlen + i + 1):
            dist = mlen + i - j
            out[:, i, j] = (np.sum((q[:, i] + u) * k[:, j], -1) + np.sum((q[:, i] + v) * r[:, klen - 1 - dist], -1))
    return np.where(np.isfinite(out), out / math.sqrt(d), out)


@st.composite
def txl_case(draw):
    h, qlen, d = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    klen = qlen + draw(st.integers(0, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return (rng.standard_normal((h, qlen, d)), rng.standard_normal((h, klen, d)), rng.standard_normal((h, klen, d)),
            rng.standard_normal((h, d)), rng.standard_normal((h, d)))


@given(case=txl_case())
def test_txl_scores_match_the_direct_computation(impl, case):
    """Valid entries equal the direct (a)+(b)+(c)+(d) sum; future keys are masked (−inf)."""
    scores = require(impl, "txl_scores")
    q, k, r, u, v = case
    got = scores(q, k, r, u, v)
    expected = txl_oracle(q, k, r, u, v)
    assert np.array_equal(np.isinf(got), np.isinf(expected))
    finite = np.isfinite(expected)
    assert_within(got[finite], expected[finite], **tol(impl))


@given(case=shaw_case(), data=st.data())
def test_txl_with_a_distance_table_and_no_biases_is_unclipped_shaw(impl, case, data):
    """u = v = 0 and a learned per-distance table r in place of W_R R ≡ Shaw's key term, no clipping (§6)."""
    scores, shaw = require(impl, "txl_scores", "shaw_attention")
    q, k, v, _, _, _ = case
    h, t, d = q.shape
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    r_table = rng.standard_normal((t, d))  # row t' encodes distance t − 1 − t'
    w_k = np.concatenate([r_table, np.zeros((t - 1, d))])  # Shaw row (j − i) + (t − 1) = distance i − j ≥ 0
    zeros = np.zeros((h, d))
    p = softmax(scores(q, k, np.broadcast_to(r_table, (h, t, d)), zeros, zeros))
    shaw_out = shaw(q, k, v, w_k, np.zeros((2 * t - 1, v.shape[-1])), t - 1, causal=True)
    assert_within(p @ v, shaw_out, **tol(impl))
