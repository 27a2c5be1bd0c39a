"""Spec: DeBERTa's log buckets and disentangled attention logits (docs/deberta.md).

``δ = query position − key position`` (DeBERTa's sign). The oracles below follow the formulas of
docs/deberta.md#the-math with Python loops and mpmath, independently of any implementation.

Tolerances. Buckets are integers, compared exactly — except where the logarithm ratio
``x = ln(|δ|/mid)/ln((m − 1)/mid)·(mid − 1)`` lies within the rounding of the declared dtype of an integer
(``w = u·(4|x| + (mid − 1 + |x|)/ln((m − 1)/mid))``: four roundings of x itself, and one rounding of
each logarithm's argument, which moves that logarithm by up to u): every ceiling of a value within ``x ± w``
is accepted there (a float32 evaluation of far buckets with a base ``(m − 1)/mid`` near 1 can be off by
one), and the logits tests draw no such case.
Logits: sums of a few dozen O(1) products (``encoding_support.tol``).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from encoding_support import tol
from hypothesis import assume, given
from hypothesis import strategies as st
from support import assert_within, declared_dtype, require

from refpos.golden.exact.ulp import MANTISSA

#: δ → bucket for 256 buckets and m = 512 (DeBERTa-v3's config; transformers' make_log_bucket_position)
V3_BUCKETS = {-600: -270, -511: -255, -200: -169, -129: -129, -128: -128, -1: -1, 0: 0, 5: 5, 128: 128,
              129: 129, 130: 130, 200: 169, 511: 255, 512: 256, 600: 270}


def bucket_oracle(delta: int, position_buckets: int, m: int, unit: float) -> tuple[set[int], bool]:
    """The correct buckets of ``δ`` (one, or every ceiling of x within its rounding), and whether ambiguous."""
    mid = position_buckets // 2
    sign = 1 if delta > 0 else -1
    if abs(delta) <= mid:
        return {delta}, False
    if abs(delta) == m - 1:  # the ratio of one logarithm to itself: exactly mid − 1 in any dtype
        return {sign * (2 * mid - 1)}, False
    with mpmath.workdps(40):
        log_base = mpmath.log(mpmath.mpf(m - 1) / mid)
        x = mpmath.log(mpmath.mpf(abs(delta)) / mid) / log_base * (mid - 1)
        window = unit * (4 * abs(x) + (mid - 1 + abs(x)) / log_base)
        low, high = int(mpmath.ceil(x - window)), int(mpmath.ceil(x + window))  # the ceilings of x ± its rounding
    return {sign * (mid + n) for n in range(low, high + 1)}, low != high


def unit_roundoff(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def bucket_config():
    """(position_buckets, max_relative_positions) with m > mid + 1."""
    return st.integers(2, 512).flatmap(lambda b: st.tuples(st.just(b), st.integers(b // 2 + 2, 5000)))


# ----------------------------------------------------------------------------------------- buckets


def test_v3_bucket_table(impl):
    buckets = require(impl, "deberta_log_buckets")
    delta = np.array(list(V3_BUCKETS))
    np.testing.assert_array_equal(buckets(delta, 256, 512), np.array(list(V3_BUCKETS.values())))


@given(config=bucket_config(), deltas=st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=40))
def test_log_buckets_match_the_formula(impl, config, deltas):
    buckets = require(impl, "deberta_log_buckets")
    position_buckets, m = config
    mid = position_buckets // 2
    deltas = np.array([*deltas, mid, mid + 1, m - 1, m, -mid, -mid - 1, -(m - 1), -m])
    got = buckets(deltas, position_buckets, m)
    assert got.shape == deltas.shape
    for delta, bucket in zip(deltas.tolist(), got.tolist(), strict=True):
        allowed, _ = bucket_oracle(delta, position_buckets, m, unit_roundoff(impl))
        assert bucket in allowed, f"δ = {delta}: bucket {bucket}, expected {sorted(allowed)}"


@given(config=bucket_config())
def test_log_buckets_are_odd_monotone_and_exact_near(impl, config):
    """b(−δ) = −b(δ); b is non-decreasing; b(δ) = δ for |δ| <= mid; b(m − 1) = 2·mid − 1 (the ratio is 1)."""
    buckets = require(impl, "deberta_log_buckets")
    position_buckets, m = config
    mid = position_buckets // 2
    delta = np.arange(0, 3 * m)
    up, down = buckets(delta, position_buckets, m), buckets(-delta, position_buckets, m)
    np.testing.assert_array_equal(down, -up)
    assert np.all(np.diff(up) >= 0)
    np.testing.assert_array_equal(up[: mid + 1], np.arange(mid + 1))
    assert up[m - 1] == 2 * mid - 1


# ----------------------------------------------------------------------------------------- logits


def index_oracle(i: int, j: int, position_buckets: int, m: int, unit: float) -> tuple[int, bool]:
    """``clip(b(i − j) + s, 0, 2s − 1)``, and whether b is ambiguous there (see the module docstring)."""
    span = position_buckets if position_buckets > 0 else m
    allowed, ambiguous = bucket_oracle(i - j, position_buckets, m, unit) if position_buckets > 0 else ({i - j}, False)
    return min(max(max(allowed) + span, 0), 2 * span - 1), ambiguous


def logits_oracle(q, k, pos_key, pos_query, position_buckets, m, terms, positions, unit):
    """(q_i·k_j + q_i·K_r[idx_ij] + k_j·Q_r[idx_ij]) / √(d·(1 + n)), a loop over (h, i, j)."""
    h, t, d = q.shape
    out = np.empty((h, t, t))
    for i in range(t):
        for j in range(t):
            r, ambiguous = index_oracle(int(positions[i]), int(positions[j]), position_buckets, m, unit)
            assume(not ambiguous)
            score = np.sum(q[:, i] * k[:, j], -1)
            if "c2p" in terms:
                score = score + np.sum(q[:, i] * pos_key[:, r], -1)
            if "p2c" in terms:
                score = score + np.sum(k[:, j] * pos_query[:, r], -1)
            out[:, i, j] = score / math.sqrt(d * (1 + len(terms)))
    return out


TERMS = [["c2p", "p2c"], ["p2c", "c2p"], ["c2p"], ["p2c"], []]


@st.composite
def logits_case(draw):
    """Small heads and lengths; buckets (2 … 16, with their log range inside T) or none (v1)."""
    h, t, d = draw(st.integers(1, 3)), draw(st.integers(1, 24)), draw(st.integers(1, 6))
    if draw(st.booleans()):
        position_buckets = draw(st.integers(2, 16))
        m = draw(st.integers(position_buckets // 2 + 2, 40))
        span = position_buckets
    else:
        position_buckets, m = -1, draw(st.integers(1, 12))
        span = m
    terms = draw(st.sampled_from(TERMS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q, k = rng.standard_normal((h, t, d)), rng.standard_normal((h, t, d))
    pos_key = rng.standard_normal((h, 2 * span, d)) if "c2p" in terms else None
    pos_query = rng.standard_normal((h, 2 * span, d)) if "p2c" in terms else None
    return q, k, pos_key, pos_query, position_buckets, m, terms


@given(case=logits_case(), start=st.integers(0, 1000))
def test_logits_match_the_formula(impl, case, start):
    logits = require(impl, "deberta_attention_logits")
    q, k, pos_key, pos_query, position_buckets, m, terms = case
    positions = start + np.arange(q.shape[1])
    expected = logits_oracle(q, k, pos_key, pos_query, position_buckets, m, terms, positions, unit_roundoff(impl))
    got = logits(q, k, pos_key, pos_query, position_buckets, m, terms, positions=positions)
    assert_within(got, expected, **tol(impl))


@pytest.mark.parametrize(("position_buckets", "m"), [(8, 20), (4, 11), (-1, 5), (-1, 30)])
@pytest.mark.parametrize("term", ["c2p", "p2c"])
def test_both_terms_read_the_row_of_query_minus_key(impl, position_buckets, m, term):
    """With unit vectors and row r of the position table equal to r·e₀, a term is its row index:
    c2p (q = e₀, k = 0) and p2c (k = e₀, q = 0) both read ``clip(b(i − j) + s, 0, 2s − 1)``."""
    logits = require(impl, "deberta_attention_logits")
    t, d = 24, 2
    span = position_buckets if position_buckets > 0 else m
    unit = np.zeros((1, t, d))
    unit[..., 0] = 1.0
    table = np.zeros((1, 2 * span, d))
    table[0, :, 0] = np.arange(2 * span)
    q, k = (unit, np.zeros_like(unit)) if term == "c2p" else (np.zeros_like(unit), unit)
    got = logits(q, k, table if term == "c2p" else None, table if term == "p2c" else None, position_buckets, m,
                 [term])[0] * math.sqrt(2 * d)
    index = [[index_oracle(i, j, position_buckets, m, unit_roundoff(impl)) for j in range(t)] for i in range(t)]
    assert not any(ambiguous for row in index for _, ambiguous in row)  # configurations with one answer
    expected = np.array([[r for r, _ in row] for row in index], dtype=np.float64)
    assert_within(got, expected, **tol(impl))


@given(case=logits_case())
def test_scale_counts_the_terms(impl, case):
    """Position tables of zeros leave q·kᵀ, divided by √(d·(1 + n)) with n the number of terms."""
    logits = require(impl, "deberta_attention_logits")
    q, k, pos_key, pos_query, position_buckets, m, terms = case
    zeros = [None if table is None else np.zeros_like(table) for table in (pos_key, pos_query)]
    got = logits(q, k, *zeros, position_buckets, m, terms)
    assert_within(got, q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1] * (1 + len(terms))), **tol(impl))


@given(case=logits_case(), shift=st.integers(1, 10_000))
def test_logits_are_translation_invariant(impl, case, shift):
    logits = require(impl, "deberta_attention_logits")
    q, k, pos_key, pos_query, position_buckets, m, terms = case
    positions = np.arange(q.shape[1])
    args = (q, k, pos_key, pos_query, position_buckets, m, terms)
    assert_within(logits(*args, positions=positions + shift), logits(*args, positions=positions), **tol(impl))


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"position_buckets": 1, "max_relative_positions": 512}, "position_buckets"),
    ({"position_buckets": 0, "max_relative_positions": 512}, "position_buckets"),
    ({"position_buckets": 256, "max_relative_positions": 129}, "max_relative_positions"),
    ({"position_buckets": 8, "max_relative_positions": 5}, "max_relative_positions"),
])
def test_bad_bucket_arguments_name_the_parameter(impl, kwargs, name):
    buckets = require(impl, "deberta_log_buckets")
    with pytest.raises(ValueError, match=name):
        buckets(np.array([0, -5, 300]), **kwargs)


def test_an_unknown_term_names_pos_att_type(impl):
    logits = require(impl, "deberta_attention_logits")
    q = np.ones((1, 3, 2))
    with pytest.raises(ValueError, match="pos_att_type"):
        logits(q, q, np.ones((1, 16, 2)), None, 8, 32, ["c2p", "p2p"])
