"""Spec: the attention core (docs/conventions.md#scale-order). Properties any correct implementation has.

Tolerances: the reference is float64; reordering a float64 sum of a few dozen terms of magnitude
≤ ~10 moves the last few digits, so equalities between two evaluations use rtol 1e-12, atol 1e-13.
Adapters of lower precision (INFO["dtype"]) are held to their own rounding (``encoding_support.tol``).
"""

from __future__ import annotations

import numpy as np
import pytest
from encoding_support import softmax as oracle_softmax
from encoding_support import tol
from hypothesis import example, find, given, settings
from hypothesis import strategies as st
from support import assert_within, cases, declared_dtype, require, size, size_from

from refpos.golden.compare import within
from refpos.golden.tolerance import MANTISSA, attention_tolerance, probability_tolerance

# ----------------------------------------------------------------------------------------- helpers


def tolerances(impl) -> dict[str, float]:
    return tol(impl)


def probability_bound(impl, logits: np.ndarray) -> float:
    """The atol of a correct softmax of ``logits`` in the declared dtype (refpos.golden.tolerance)."""
    return probability_tolerance(declared_dtype(impl), logits)


def _exact_integer_limit(impl) -> float:
    """2^(t+1): below it every integer, so ``m`` and ``m − 1``, is exact in the declared dtype."""
    return 2.0 ** (MANTISSA[declared_dtype(impl)] + 1)


@st.composite
def qkv_inputs(draw, *, min_t: int = 1, max_t: int = 7, gqa: bool = True, same_len: bool = False):
    """(q, k, v) with shapes (B, Hq, Tq, d), (B, Hkv, Tk, d), (B, Hkv, Tk, dv), values ~ N(0, 1) (one shape per
    call under REFPOS_SHAPES=fixed: support.size)."""
    batch = draw(size(1, 2))
    h_kv = draw(size(1, 3))
    n_rep = draw(size(1, 3)) if gqa else 1
    t_k = draw(size(min_t, max_t))
    t_q = t_k if same_len else draw(size(1, t_k))
    d = draw(size_from([1, 2, 4, 8]))
    d_v = draw(size_from([d, 3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.standard_normal((batch, h_kv * n_rep, t_q, d))
    k = rng.standard_normal((batch, h_kv, t_k, d))
    v = rng.standard_normal((batch, h_kv, t_k, d_v))
    return q, k, v


def permutation(draw, n: int) -> np.ndarray:
    return np.asarray(draw(st.permutations(range(n))), dtype=np.int64)


# ----------------------------------------------------------------------------------------- softmax


@given(st.integers(0, 2**32 - 1), st.integers(1, 9), st.floats(-1e3, 1e3))
def test_softmax_rows_sum_to_one_and_are_shift_invariant(impl, seed, n, shift):
    """Each row sums to 1 and softmax(z + c) = softmax(z), within the bound of a correct softmax in the declared
    dtype (:func:`refpos.golden.tolerance.probability_tolerance`: ``u·(3·max|z| + 3n + 4)``, the logits stored in
    the dtype, max-subtracted or log-sum-exp). The logits ``z + c`` reach 1000 + 60: stored in float32 each
    rounds by up to 2⁻²⁴·1060 ≈ 6e-5, which moves a probability by as much; the two sides of the
    shift-invariance each err by their own bound. The rows' sum is within the same bound (the relative terms
    sum to themselves, the rounding of ``z − c`` adds ``n·u/e``)."""
    softmax = require(impl, "softmax")
    logits = np.random.default_rng(seed).standard_normal((3, n)) * 20
    shifted = logits + shift
    p = softmax(logits)
    assert_within(p.sum(axis=-1), 1.0, rtol=0.0, atol=probability_bound(impl, logits), what="row sums")
    assert np.all(p >= 0)
    assert_within(softmax(shifted), p, rtol=0.0,
                  atol=probability_bound(impl, shifted) + probability_bound(impl, logits), what="softmax(z + c)")


@pytest.mark.parametrize("magnitude", cases("logit", [1e3, 1e5, 1e15]))
def test_softmax_is_stable_for_huge_logits(impl, magnitude):
    """exp(1000) overflows: an implementation that does not subtract the row maximum gives NaN (which no
    tolerance admits).

    The logits ``m`` and ``m − 1`` must both be exact in the declared dtype (float64 up to 2^53, float32
    up to 2^24); larger cases do not apply to a lower-precision implementation (its input cannot say
    them) and are skipped with that reason. exp already overflows float32 at 89 and float64 at 710.
    """
    softmax = require(impl, "softmax")
    if magnitude >= _exact_integer_limit(impl):
        pytest.skip(f"{declared_dtype(impl)} cannot represent {magnitude:g} − 1 apart from {magnitude:g}")
    logits = np.array([[magnitude, magnitude - 1.0, -magnitude]])
    p = softmax(logits)
    expected = np.array([1.0, np.exp(-1.0), 0.0]) / (1.0 + np.exp(-1.0))
    # a correct softmax's bound (probability_tolerance): a log-sum-exp form rounds m + ln(1 + e⁻¹) by u·m
    assert_within(p[0], expected, rtol=0.0, atol=probability_bound(impl, logits))


def test_softmax_fully_masked_row_policy(impl):
    softmax = require(impl, "softmax")
    logits = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    mask = np.array([[True, False, True], [False, False, False]])
    zeros = softmax(logits, mask=mask, fully_masked="zeros")
    assert zeros[1].tolist() == [0.0, 0.0, 0.0]
    assert_within(zeros[0], [1 / (1 + np.e**2), 0.0, np.e**2 / (1 + np.e**2)], **tolerances(impl))
    nans = softmax(logits, mask=mask, fully_masked="nan")
    assert np.isnan(nans[1]).all() and np.array_equal(nans[0], zeros[0])


def test_attention_fully_masked_row_gives_zero_output(impl):
    attention = require(impl, "attention")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 2, 4)) for _ in range(3))
    mask = np.array([[True, True], [False, False]])
    out = attention(q, k, v, mask=mask)
    assert np.all(out[0, 0, 1] == 0.0)
    assert np.all(np.isfinite(out))


# ----------------------------------------------------------------------------------------- order


@given(st.data())
def test_attention_without_positions_is_permutation_equivariant(impl, data):
    """Attn(ΠX) = Π·Attn(X): without positional information, reordering tokens reorders outputs."""
    attention = require(impl, "attention")
    q, k, v = data.draw(qkv_inputs(same_len=True))
    perm = permutation(data.draw, q.shape[-2])
    out = attention(q, k, v)
    out_perm = attention(q[..., perm, :], k[..., perm, :], v[..., perm, :])
    assert_within(out_perm, out[..., perm, :], **tolerances(impl))


@given(st.data())
def test_one_query_ignores_the_order_of_the_other_tokens(impl, data):
    """你打我 / 我打你: permuting the (key, value) pairs leaves every query's output unchanged."""
    attention = require(impl, "attention")
    q, k, v = data.draw(qkv_inputs())
    perm = permutation(data.draw, k.shape[-2])
    assert_within(
        attention(q, k[..., perm, :], v[..., perm, :]), attention(q, k, v), **tolerances(impl)
    )


@given(st.data())
def test_bias_is_jointly_equivariant(impl, data):
    """Attn(ΠX; Π B Πᵀ) = Π·Attn(X; B): a bias breaks equivariance only because it stays with positions."""
    attention = require(impl, "attention")
    q, k, v = data.draw(qkv_inputs(same_len=True))
    t = q.shape[-2]
    perm = permutation(data.draw, t)
    bias = np.random.default_rng(t).standard_normal((q.shape[1], t, t))
    out = attention(q, k, v, bias=bias)
    out_perm = attention(q[..., perm, :], k[..., perm, :], v[..., perm, :], bias=bias[:, perm][:, :, perm])
    assert_within(out_perm, out[..., perm, :], **tolerances(impl))


def test_causal_mask_breaks_permutation_equivariance(impl):
    """Hypothesis finds inputs where causal attention is NOT permutation-equivariant."""
    attention = require(impl, "attention")

    def breaks_equivariance(case) -> bool:
        (q, k, v), perm = case
        out = attention(q, k, v, causal=True)
        out_perm = attention(q[..., perm, :], k[..., perm, :], v[..., perm, :], causal=True)
        return not within(out_perm, out[..., perm, :], **tol(impl))  # more than the dtype's rounding

    inputs = qkv_inputs(min_t=2, max_t=4, gqa=False, same_len=True)
    cases = inputs.flatmap(lambda qkv: st.tuples(st.just(qkv), st.permutations(range(qkv[0].shape[-2]))))
    (q, _, _), perm = find(
        cases.map(lambda c: (c[0], np.asarray(c[1], dtype=np.int64))),
        breaks_equivariance,
        settings=settings(database=None, max_examples=200),
    )
    assert q.shape[-2] >= 2 and not np.array_equal(perm, np.arange(len(perm)))


@given(st.data())
def test_causal_attention_is_prefix_consistent(impl, data):
    """f(X[:n])[i] = f(X)[i] for i < n: a causal layer never looks ahead."""
    attention = require(impl, "attention")
    q, k, v = data.draw(qkv_inputs(same_len=True, max_t=8))
    n = data.draw(size(1, q.shape[-2]))
    full = attention(q, k, v, causal=True)
    prefix = attention(q[..., :n, :], k[..., :n, :], v[..., :n, :], causal=True)
    assert_within(prefix, full[..., :n, :], **tolerances(impl))


@given(st.data())
def test_causal_query_ignores_the_order_of_earlier_tokens(impl, data):
    """One causal layer: the output at i is invariant to permuting tokens 0..i-1
    (docs/conventions.md#order-and-permutations)."""
    attention = require(impl, "attention")
    q, k, v = data.draw(qkv_inputs(same_len=True, min_t=2, max_t=8, gqa=False))
    t = q.shape[-2]
    perm = np.concatenate([permutation(data.draw, t - 1), [t - 1]])
    out = attention(q[..., perm, :], k[..., perm, :], v[..., perm, :], causal=True)
    assert_within(out[..., -1, :], attention(q, k, v, causal=True)[..., -1, :], **tolerances(impl))


@given(st.data(), st.sampled_from(["none", "mask", "causal"]), st.booleans(), st.sampled_from([1.0, 4.0]))
def test_attention_matches_float64(impl, data, masking, with_bias, gain):
    """Attention itself against the float64 formula of docs/conventions.md#scale-order (``scale·q·kᵀ`` with
    the default scale ``d^-1/2``, ``+ bias``, the mask, softmax, ``·v``; GQA, an explicit mask, causal queries
    aligned to the end of the keys), within the bound of a correct implementation in the declared dtype
    (:func:`refpos.golden.tolerance.attention_tolerance`: the stored inputs, the dot products, the softmax and the
    weighted sum). Every library with attention runs it: a bias the library does not add is refused per
    example, and the others run. A kernel that computes in bfloat16 while declaring float32, or aligns causal
    queries to the start of the keys, fails it."""
    attention = require(impl, "attention")
    q, k, v = data.draw(qkv_inputs(gqa=True))
    q = q * gain  # logits of a few units too, where rounding the probabilities shows
    n_rep = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1)  # (B, Hq, Tk, ·)
    s = q @ np.swapaxes(kk, -1, -2) * q.shape[-1] ** -0.5  # (B, Hq, Tq, Tk)
    t_q, t_k = s.shape[-2:]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    bias = rng.standard_normal((q.shape[1], t_q, t_k)) if with_bias else None
    mask, allowed = None, np.ones(s.shape, dtype=bool)
    if masking == "mask":
        mask = rng.random((t_q, t_k)) < 0.6
        mask[:, 0] = True  # every row keeps a key: the fully masked rule is tested elsewhere
        allowed = np.broadcast_to(mask, s.shape)
    elif masking == "causal":
        allowed = np.broadcast_to(np.arange(t_k)[None, :] <= np.arange(t_q)[:, None] + (t_k - t_q), s.shape)
    want = oracle_softmax(s if bias is None else s + bias, allowed) @ vv  # the suite's float64 oracle
    got = attention(q, k, v, bias=bias, mask=mask, causal=masking == "causal")
    atol = attention_tolerance(declared_dtype(impl), q, k, v, bias=bias)
    assert_within(got, want, rtol=0.0, atol=atol, what=f"attention ({masking}, bias {with_bias}) against float64")


@given(st.data(), st.sampled_from([0.5, 2.0, 50.0]), st.sampled_from(["none", "mask", "causal"]))
def test_softcap_caps_the_scaled_logits_before_the_mask(impl, data, cap, masking):
    """Steps 3, 5, 7 of docs/conventions.md#scale-order (Gemma-2's order): the scale first, then
    ``c·tanh(s/c)``, then the mask; the mask removes keys, it is never added to the capped logits. The
    expected output is that formula in float64 (no bias: where a bias goes beside a softcap is refpos's
    choice, not a convention of the libraries)."""
    attention = require(impl, "attention")
    q, k, v = data.draw(qkv_inputs(gqa=True))
    q = q * 4.0  # logits of a few units: caps of 0.5 and 2 bite, 50 does not
    n_rep = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1)  # (B, Hq, Tk, ·)
    s = cap * np.tanh(q @ np.swapaxes(kk, -1, -2) * q.shape[-1] ** -0.5 / cap)  # (B, Hq, Tq, Tk)
    t_q, t_k = s.shape[-2:]
    mask = None
    allowed = np.ones(s.shape, dtype=bool)
    if masking == "mask":
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        mask = rng.random((t_q, t_k)) < 0.6
        mask[:, 0] = True  # every row keeps a key: the fully masked rule is tested elsewhere
        allowed = np.broadcast_to(mask, s.shape)
    elif masking == "causal":  # queries aligned to the end of the keys
        allowed = np.broadcast_to(np.arange(t_k)[None, :] <= np.arange(t_q)[:, None] + (t_k - t_q), s.shape)
    want = oracle_softmax(s, allowed) @ vv  # the suite's float64 oracle
    got = attention(q, k, v, mask=mask, causal=masking == "causal", softcap=cap)
    assert_within(got, want, **tolerances(impl))


# ----------------------------------------------------------------------------------------- heads


def test_grouped_query_attention_equals_mha_with_repeated_kv(impl):
    """Query head h reads key/value head h // (Hq/Hkv), as HF repeat_kv (not h % Hkv).

    The property is about H > H_kv: the test fails when no drawn example with more query than key/value
    heads ran (an attention that refuses every grouped call passes nothing here; its examples with
    H = H_kv only say that repeating nothing changes nothing). Causal and not: the mapping is the same, and
    some grouped kernels are causal only (onnxruntime's GroupQueryAttention)."""
    attention = require(impl, "attention")
    groups_ran: list[int] = []

    @given(st.data())
    def grouped_equals_repeated(data):
        q, k, v = data.draw(qkv_inputs(gqa=True))
        causal = data.draw(st.booleans())
        n_rep = q.shape[1] // k.shape[1]
        expanded = attention(q, np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1), causal=causal)
        assert_within(attention(q, k, v, causal=causal), expanded, **tolerances(impl))
        groups_ran.append(n_rep)

    grouped_equals_repeated()
    assert max(groups_ran, default=1) > 1, (f"no example with H > H_kv ran ({len(groups_ran)} examples ran, all "
                                            "with H = H_kv): grouped-query attention was not tested")


def test_gqa_head_mapping_is_floor_division(impl):
    """6 query heads, 2 kv heads: heads 0-2 read kv head 0, heads 3-5 read kv head 1."""
    attention = require(impl, "attention")
    q = np.zeros((1, 6, 1, 2))
    k = np.zeros((1, 2, 1, 2))
    v = np.array([0.0, 1.0]).reshape(1, 2, 1, 1)
    out = attention(q, k, v)
    assert out[0, :, 0, 0].tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]


# ----------------------------------------------------------------------------------------- chunked


@given(st.data())
@example(data=None)
def test_chunked_attention_equals_full_attention(impl, data):
    """The online softmax gives the full result for every chunk size, causal or not, with bias and mask."""
    chunked, attention = require(impl, "chunked_attention", "attention")
    if data is None:  # a pinned case: one key per chunk, causal, end-aligned queries
        rng = np.random.default_rng(7)
        q = rng.standard_normal((1, 2, 3, 4))
        k, v = rng.standard_normal((1, 1, 5, 4)), rng.standard_normal((1, 1, 5, 4))
        chunk, causal, use_bias, use_mask = 1, True, True, True
    else:
        q, k, v = data.draw(qkv_inputs(max_t=9))
        chunk = data.draw(size(1, k.shape[-2] + 1))
        causal, use_bias, use_mask = data.draw(st.booleans()), data.draw(st.booleans()), data.draw(st.booleans())
    rng = np.random.default_rng(q.size)
    shape = (q.shape[1], q.shape[2], k.shape[2])
    bias = rng.standard_normal(shape) if use_bias else None
    mask = rng.random(shape) < 0.7 if use_mask else None
    expected = attention(q, k, v, bias=bias, mask=mask, causal=causal)
    got = chunked(q, k, v, chunk, bias=bias, mask=mask, causal=causal)
    assert_within(got, expected, **tolerances(impl))
