"""Bad input to the attention core gets a ValueError/TypeError naming the parameter; NaN propagates."""

from __future__ import annotations

import math

import numpy as np
import pytest

import refpos
from refpos.backend import to_numpy


def arrays(xp, *shapes, dtype=None):
    rng = np.random.default_rng(0)
    return [xp.asarray(rng.standard_normal(s)) for s in shapes]


@pytest.mark.parametrize(
    ("shapes", "match"),
    [
        (((1, 2, 3, 4), (1, 2, 3, 5), (1, 2, 3, 5)), "head dims differ"),
        (((1, 3, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)), "not a multiple"),
        (((2, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)), "batch shapes differ"),
        (((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 2, 4)), "must agree"),
        (((3, 4), (3, 4), (3, 4)), "must have shape"),
    ],
)
def test_shape_errors_name_the_problem(xp, shapes, match):
    q, k, v = arrays(xp, *shapes)
    with pytest.raises(ValueError, match=match):
        refpos.attention(q, k, v)


def test_mask_must_be_boolean_and_broadcast(xp):
    q, k, v = arrays(xp, (1, 1, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4))
    with pytest.raises(TypeError, match="mask must be a boolean"):
        refpos.attention(q, k, v, mask=xp.ones((3, 3)))
    with pytest.raises(ValueError, match="mask of shape"):
        refpos.attention(q, k, v, mask=xp.ones((2, 3), dtype=xp.bool))


def test_bias_must_broadcast(xp):
    q, k, v = arrays(xp, (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    with pytest.raises(ValueError, match="bias of shape"):
        refpos.attention(q, k, v, bias=xp.zeros((3, 3, 3)))
    with pytest.raises(ValueError, match="bias of shape"):
        refpos.attention(q, k, v, bias=xp.zeros((5, 1, 2, 3, 3)))


@pytest.mark.parametrize("chunk_size", [0, -3])
def test_chunk_size_must_be_positive(xp, chunk_size):
    q, k, v = arrays(xp, (1, 1, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4))
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        refpos.core.chunked_attention(q, k, v, chunk_size=chunk_size)
    with pytest.raises(TypeError, match="chunk_size must be an int"):
        refpos.core.chunked_attention(q, k, v, chunk_size=2.0)


def test_scalar_options_are_checked(xp):
    q, k, v = arrays(xp, (1, 1, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4))
    with pytest.raises(ValueError, match="scale must be > 0"):
        refpos.attention(q, k, v, scale=0.0)
    with pytest.raises(ValueError, match="softcap must be > 0"):
        refpos.attention(q, k, v, softcap=-1.0)
    with pytest.raises(ValueError, match="fully_masked must be one of"):
        refpos.attention(q, k, v, fully_masked="uniform")
    with pytest.raises(TypeError, match="causal must be a bool"):
        refpos.attention(q, k, v, causal=1)
    with pytest.raises(TypeError, match="real floating"):
        refpos.attention(xp.ones((1, 1, 3, 4), dtype=xp.int64), k, v)


def test_causal_with_more_queries_than_keys_is_rejected(xp):
    q, k, v = arrays(xp, (1, 1, 4, 2), (1, 1, 3, 2), (1, 1, 3, 2))
    with pytest.raises(ValueError, match="q_len <= k_len"):
        refpos.attention(q, k, v, causal=True)


def test_nan_propagates_and_is_never_replaced(xp):
    """A NaN score makes its row NaN (documented); other rows are untouched."""
    q, k, v = (np.asarray(a) for a in arrays(np, (1, 1, 3, 2), (1, 1, 3, 2), (1, 1, 3, 2)))
    k[0, 0, 1, 0] = math.nan  # every query sees key 1
    v2 = v.copy()
    v2[0, 0, 2, 1] = math.nan
    out = to_numpy(refpos.attention(xp.asarray(q), xp.asarray(k), xp.asarray(v)))
    assert np.isnan(out).all()
    out_v = to_numpy(refpos.attention(xp.asarray(q), xp.asarray(k[..., [0, 0, 2], :]), xp.asarray(v2)))
    assert np.isnan(out_v[..., 1]).all() and np.isfinite(out_v[..., 0]).all()
    chunked = to_numpy(refpos.core.chunked_attention(xp.asarray(q), xp.asarray(k), xp.asarray(v), chunk_size=1))
    assert np.isnan(chunked).all()


def test_softmax_of_nan_row_is_nan_even_with_zeros_policy(xp):
    p = to_numpy(refpos.core.softmax.softmax(xp.asarray([[1.0, math.nan], [1.0, 1.0]]), fully_masked="zeros"))
    assert np.isnan(p[0]).all() and p[1].tolist() == [0.5, 0.5]


def test_split_and_merge_heads_are_inverse(xp):
    x = xp.reshape(xp.arange(2 * 3 * 12, dtype=xp.float64), (2, 3, 12))
    h = refpos.core.split_heads(x, 4)
    assert h.shape == (2, 4, 3, 3)
    assert to_numpy(refpos.core.merge_heads(h)).tolist() == to_numpy(x).tolist()
    with pytest.raises(ValueError, match="not a multiple of n_heads"):
        refpos.core.split_heads(x, 5)
