"""Spec: T5 relative position buckets and bias (docs/relative.md#t5; docs/relative.md#t5, docs/diagnosis.md).

Buckets are integers: compared exactly. ``rel = key position − query position`` (memory − query).
"""

from __future__ import annotations

import numpy as np
import pytest
from encoding_support import tol
from hypothesis import given
from hypothesis import strategies as st
from support import assert_close, require

from refpos.golden.exact.compare import within

# (first distance, last distance) per bucket, 32 buckets, max_distance 128 — docs/relative.md#t5
CAUSAL_RANGES = [(b, b) for b in range(16)] + [
    (16, 18), (19, 20), (21, 23), (24, 26), (27, 30), (31, 34), (35, 39), (40, 45), (46, 51), (52, 58),
    (59, 66), (67, 76), (77, 86), (87, 98), (99, 112), (113, 1000),
]
BIDIRECTIONAL_PAST_RANGES = [(b, b) for b in range(8)] + [
    (8, 11), (12, 15), (16, 22), (23, 31), (32, 45), (46, 63), (64, 90), (91, 1000),
]


def bucket_args():
    """(bidirectional, num_buckets, max_distance) with max_distance above the exact range."""
    return st.tuples(st.booleans(), st.integers(1, 64), st.integers(1, 5000)).map(
        lambda a: (a[0], 2 * a[1] + 2 if a[0] else a[1] + 1, a[2])
    ).filter(lambda a: a[2] > (a[1] // 4 if a[0] else a[1] // 2))


def max_exact(bidirectional: bool, num_buckets: int) -> int:
    return num_buckets // 4 if bidirectional else num_buckets // 2


# ----------------------------------------------------------------------------------------- tables


def test_causal_bucket_table(impl):
    bucket = require(impl, "t5_bucket")
    for b, (lo, hi) in enumerate(CAUSAL_RANGES):
        dist = np.arange(lo, hi + 1)
        np.testing.assert_array_equal(bucket(-dist, bidirectional=False), b)
    np.testing.assert_array_equal(bucket(np.arange(1, 300), bidirectional=False), 0)  # the future is bucket 0


def test_bidirectional_bucket_table(impl):
    bucket = require(impl, "t5_bucket")
    for b, (lo, hi) in enumerate(BIDIRECTIONAL_PAST_RANGES):
        dist = np.arange(lo, hi + 1)
        np.testing.assert_array_equal(bucket(-dist), b)
        if lo > 0:
            np.testing.assert_array_equal(bucket(dist), b + 16)
    assert bucket(np.arange(1, 8)).tolist() == list(range(17, 24))
    assert 16 not in bucket(np.arange(-2000, 2001)).tolist()  # bucket 16 is never produced


def test_bucket_shapes_and_dtype(impl):
    bucket = require(impl, "t5_bucket")
    rel = np.arange(-6, 6).reshape(3, 4)
    out = bucket(rel)
    assert out.shape == (3, 4) and np.issubdtype(out.dtype, np.integer)


# ----------------------------------------------------------------------------------------- properties


@given(args=bucket_args(), rel=st.lists(st.integers(-20000, 20000), min_size=1, max_size=30))
def test_buckets_in_range(impl, args, rel):
    bucket = require(impl, "t5_bucket")
    bidirectional, nb, md = args
    out = bucket(np.array(rel), bidirectional=bidirectional, num_buckets=nb, max_distance=md)
    assert np.all((out >= 0) & (out < nb))


@given(args=bucket_args())
def test_buckets_monotone_exact_and_saturating(impl, args):
    """Per direction: non-decreasing in |rel|; = |rel| below max_exact; constant from max_distance on."""
    bucket = require(impl, "t5_bucket")
    bidirectional, nb, md = args
    e = max_exact(bidirectional, nb)
    dist = np.arange(0, md + 50)
    past = bucket(-dist, bidirectional=bidirectional, num_buckets=nb, max_distance=md)
    assert np.all(np.diff(past) >= 0)
    np.testing.assert_array_equal(past[:e], dist[:e])
    top = (nb // 2 if bidirectional else nb) - 1
    np.testing.assert_array_equal(past[md:], top)
    if bidirectional:
        future = bucket(dist[1:], bidirectional=True, num_buckets=nb, max_distance=md)
        assert np.all(np.diff(future) >= 0)


@given(args=bucket_args(), r=st.integers(1, 20000))
def test_direction_rules(impl, args, r):
    """Bidirectional: b(+r) = b(−r) + num_buckets/2 for r ≥ 1. Causal: b(r > 0) = 0."""
    bucket = require(impl, "t5_bucket")
    bidirectional, nb, md = args
    plus = bucket(np.array([r]), bidirectional=bidirectional, num_buckets=nb, max_distance=md)[0]
    minus = bucket(np.array([-r]), bidirectional=bidirectional, num_buckets=nb, max_distance=md)[0]
    if bidirectional:
        assert plus == minus + nb // 2
    else:
        assert plus == 0


@given(seed=st.integers(0, 2**32 - 1), start=st.integers(0, 500), shift=st.integers(0, 500),
       tq=st.integers(1, 6), tk=st.integers(1, 6), bidirectional=st.booleans())
def test_bias_is_the_table_row_and_shift_invariant(impl, seed, start, shift, tq, tk, bidirectional):
    bias_fn, bucket = require(impl, "t5_bias", "t5_bucket")
    table = np.random.default_rng(seed).standard_normal((32, 3))
    qpos = start + np.arange(tq) + max(tk - tq, 0)
    kpos = start + np.arange(tk)
    got = bias_fn(table, qpos, kpos, bidirectional=bidirectional)
    assert got.shape == (3, tq, tk)
    buckets = bucket(kpos[None, :] - qpos[:, None], bidirectional=bidirectional)
    # the table's rows, as stored in the declared dtype (bit for bit in float64)
    assert_close(got, np.moveaxis(table[buckets], -1, 0), impl, "stored", what="bias = table[bucket]")
    np.testing.assert_array_equal(bias_fn(table, qpos + shift, kpos + shift, bidirectional=bidirectional), got)


def test_bias_sign_convention(impl):
    """memory − query: a past key (j < i) reads a lower-half bucket; the flipped sign gives the transpose."""
    bias_fn = require(impl, "t5_bias")
    table = np.arange(32, dtype=np.float64)[:, None]  # bias = bucket number
    pos = np.arange(4)
    b = bias_fn(table, pos, pos)[0]
    assert b[3, 0] == 3.0 and b[0, 3] == 19.0
    causal = bias_fn(table, pos, pos, bidirectional=False)[0]
    assert causal[3, 0] == 3.0 and causal[0, 3] == 0.0


def test_decode_row_uses_the_cache_offset(impl):
    """A decode step at position P equals row P of the full bias (docs/relative.md#t5)."""
    bias_fn = require(impl, "t5_bias")
    table = np.random.default_rng(1).standard_normal((32, 2))
    full = bias_fn(table, np.arange(40), np.arange(40), bidirectional=False)
    step = bias_fn(table, np.array([39]), np.arange(40), bidirectional=False)
    np.testing.assert_array_equal(step[:, 0], full[:, 39])
    assert not within(step[:, 0], full[:, 0], **tol(impl))  # a different row, not a rounding of it


# ----------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        pytest.param({"num_buckets": 31}, "num_buckets", id="num_buckets=31-bidirectional"),
        pytest.param({"num_buckets": 32, "max_distance": 8}, "max_distance", id="max_distance=8-bidirectional"),
        pytest.param({"num_buckets": 32, "max_distance": 16, "bidirectional": False}, "max_distance",
                     id="max_distance=16-causal"),
    ],
)
def test_bad_bucket_arguments_name_the_parameter(impl, kwargs, name):
    bucket = require(impl, "t5_bucket")
    with pytest.raises(ValueError, match=name):
        bucket(np.array([0, -5]), **kwargs)


def test_odd_bucket_count_is_fine_when_causal(impl):
    bucket = require(impl, "t5_bucket")
    out = bucket(-np.arange(200), bidirectional=False, num_buckets=33, max_distance=128)
    assert out.max() == 32 and out[:16].tolist() == list(range(16))
