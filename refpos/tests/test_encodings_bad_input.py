"""Bad input to the absolute and relative encodings: ValueError/TypeError naming the parameter, nothing clipped."""

from __future__ import annotations

import math

import pytest

import refpos
from refpos.encodings import (
    FIRE,
    KERPLE,
    CoPE,
    LearnedAbsolute,
    Sandwich,
    Sinusoidal,
    TransformerXL,
    XPos,
    alibi_bias,
    alibi_slopes,
    cope_positions,
    fire_bias,
    fire_features,
    kerple_bias,
    learned_lookup,
    sandwich_bias,
    shaw_key_terms,
    sinusoidal_shift_matrix,
    t5_bucket,
    txl_scores,
)
from refpos.encodings.sinusoidal import sinusoidal
from refpos.encodings.xpos import xpos


def _zeros(xp, *shape):
    return xp.zeros(shape, dtype=xp.float64)


def _pos(xp, n, start=0):
    return xp.arange(start, start + n, dtype=xp.int64)


# ----------------------------------------------------------------------------------------- sinusoid


@pytest.mark.parametrize("dim", [0, -2, 3, 7])
def test_sinusoid_dim_must_be_positive_and_even(xp, dim):
    with pytest.raises(ValueError, match="dim"):
        sinusoidal(_pos(xp, 3), dim)
    with pytest.raises(ValueError, match="dim"):
        sinusoidal_shift_matrix(1, dim, xp=xp)


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"layout": "half"}, ValueError, "layout"),
    ({"spacing": "t2t"}, ValueError, "spacing"),
    ({"base": 0.0}, ValueError, "base"),
    ({"base": 1.0}, ValueError, "base"),
    ({"base": math.nan}, ValueError, "base"),
    ({"offset": 1.5}, TypeError, "offset"),
])
def test_sinusoid_options(xp, kwargs, error, name):
    with pytest.raises(error, match=name):
        sinusoidal(_pos(xp, 3), 4, **kwargs)


def test_sinusoid_positions(xp):
    with pytest.raises(ValueError, match="positions"):
        sinusoidal([0, -1], 4, xp=xp)
    with pytest.raises(TypeError, match="positions"):
        sinusoidal([0.5, 1.0], 4, xp=xp)
    with pytest.raises(ValueError, match="positions"):
        sinusoidal(_pos(xp, 3), 4, offset=-1)
    with pytest.raises(TypeError, match="r"):
        sinusoidal_shift_matrix(1.0, 4, xp=xp)


def test_sinusoidal_encoding_rejects_odd_model_width(xp):
    x = _zeros(xp, 3, 5)
    with pytest.raises(ValueError, match="dim"):
        refpos.self_attention(x, refpos.AttentionWeights.identity(5, xp=xp), encoding=Sinusoidal())


# ----------------------------------------------------------------------------------------- learned


@pytest.mark.parametrize("bad", [[0, 4], [-1, 0], [9]])
def test_learned_positions_outside_the_table(xp, bad):
    table = _zeros(xp, 4, 2)
    with pytest.raises(ValueError, match="positions"):
        learned_lookup(table, xp.asarray(bad, dtype=xp.int64))


def test_learned_offset_is_checked_at_both_ends(xp):
    table = _zeros(xp, 4, 2)
    assert tuple(learned_lookup(table, xp.asarray([2], dtype=xp.int64), offset=1).shape) == (1, 2)
    with pytest.raises(ValueError, match="positions"):
        learned_lookup(table, xp.asarray([3], dtype=xp.int64), offset=1)
    with pytest.raises(ValueError, match="positions"):
        learned_lookup(table, xp.asarray([-3], dtype=xp.int64), offset=2)


def test_learned_pipeline_longer_than_the_table(xp):
    enc = LearnedAbsolute(_zeros(xp, 4, 3))
    with pytest.raises(ValueError, match="positions"):
        refpos.self_attention(_zeros(xp, 5, 3), refpos.AttentionWeights.identity(3, xp=xp), encoding=enc)


# ----------------------------------------------------------------------------------------- ALiBi, T5


@pytest.mark.parametrize("n_heads", [0, -1])
def test_alibi_n_heads(xp, n_heads):
    with pytest.raises(ValueError, match="n_heads"):
        alibi_slopes(n_heads, xp=xp)
    with pytest.raises(ValueError, match="n_heads"):
        alibi_bias(n_heads, 2, 2, xp=xp)


def test_alibi_other_arguments(xp):
    with pytest.raises(TypeError, match="n_heads"):
        alibi_slopes(2.0, xp=xp)
    with pytest.raises(ValueError, match="form"):
        alibi_bias(2, 2, 2, form="mpt", xp=xp)
    with pytest.raises(ValueError, match="q_len"):
        alibi_bias(2, 3, 2, xp=xp)
    with pytest.raises(ValueError, match="form"):
        refpos.encodings.ALiBi(form="Causal")


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"num_buckets": 31}, ValueError, "num_buckets"),
    ({"num_buckets": 2}, ValueError, "num_buckets"),
    ({"num_buckets": 1, "bidirectional": False}, ValueError, "num_buckets"),
    ({"max_distance": 8}, ValueError, "max_distance"),
    ({"max_distance": 4}, ValueError, "max_distance"),
    ({"max_distance": 16, "bidirectional": False}, ValueError, "max_distance"),
    ({"max_distance": 128.0}, TypeError, "max_distance"),
    ({"bidirectional": 1}, TypeError, "bidirectional"),
])
def test_t5_bucket_arguments(xp, kwargs, error, name):
    with pytest.raises(error, match=name):
        t5_bucket(xp.asarray([0, -3], dtype=xp.int64), **kwargs)


def test_t5_relative_positions_must_be_integers(xp):
    with pytest.raises(TypeError, match="relative_position"):
        t5_bucket(xp.asarray([0.5]))


def test_t5_table(xp):
    with pytest.raises(ValueError, match="table"):
        refpos.encodings.T5(_zeros(xp, 32))
    with pytest.raises(ValueError, match="num_buckets"):
        refpos.encodings.T5(_zeros(xp, 31, 2))
    with pytest.raises(ValueError, match="n_heads"):
        refpos.encodings.T5(_zeros(xp, 32, 3)).bias(_pos(xp, 2), _pos(xp, 2), 2)


# ----------------------------------------------------------------------------------------- Shaw, TXL


def test_shaw_arguments(xp):
    with pytest.raises(ValueError, match="max_relative_position"):
        refpos.encodings.Shaw(_zeros(xp, 1, 2), None, -1)
    with pytest.raises(ValueError, match="w_k"):
        refpos.encodings.Shaw(_zeros(xp, 4, 2), None, 2)
    with pytest.raises(ValueError, match="w_v"):
        refpos.encodings.Shaw(_zeros(xp, 5, 2), _zeros(xp, 3, 2), 2)
    with pytest.raises(ValueError, match="form"):
        refpos.encodings.Shaw(_zeros(xp, 5, 2), None, 2, form="skew")


def test_shaw_skewed_needs_consecutive_positions(xp):
    q = _zeros(xp, 1, 3, 2)
    with pytest.raises(ValueError, match="consecutive"):
        shaw_key_terms(q, _zeros(xp, 3, 2), xp.asarray([0, 2, 3]), xp.asarray([0, 2, 3]), 1, form="skewed")
    with pytest.raises(ValueError, match="q_positions equal"):
        shaw_key_terms(q, _zeros(xp, 3, 2), _pos(xp, 3), _pos(xp, 3, 1), 1, form="skewed")


def test_txl_arguments(xp):
    with pytest.raises(ValueError, match="u and v"):
        TransformerXL(_zeros(xp, 4, 4), _zeros(xp, 2, 2), _zeros(xp, 2, 3))
    with pytest.raises(ValueError, match="w_r"):
        TransformerXL(_zeros(xp, 4, 3), _zeros(xp, 2, 2), _zeros(xp, 2, 2))
    with pytest.raises(ValueError, match="clamp_len"):
        TransformerXL(_zeros(xp, 4, 4), _zeros(xp, 2, 2), _zeros(xp, 2, 2), clamp_len=-1)
    enc = TransformerXL(_zeros(xp, 4, 4), _zeros(xp, 2, 2), _zeros(xp, 2, 2))
    with pytest.raises(ValueError, match="consecutive"):
        enc.qk_terms(_zeros(xp, 1, 2, 3, 2), _zeros(xp, 1, 2, 3, 2), xp.asarray([0, 1, 5]), xp.asarray([0, 1, 5]))
    with pytest.raises(ValueError, match="qlen"):
        txl_scores(_zeros(xp, 1, 3, 2), _zeros(xp, 1, 2, 2), _zeros(xp, 1, 2, 2), _zeros(xp, 1, 2),
                          _zeros(xp, 1, 2))


# ----------------------------------------------------------------------------------------- beyond the anchors


def test_kernel_arguments(xp):
    pos = _pos(xp, 3)
    with pytest.raises(ValueError, match="kind"):
        kerple_bias(_zeros(xp, 2), _zeros(xp, 2), pos, pos, kind="exp")
    with pytest.raises(ValueError, match="r1 and r2"):
        kerple_bias(_zeros(xp, 2), _zeros(xp, 3), pos, pos)
    with pytest.raises(ValueError, match="r1"):
        kerple_bias(xp.asarray([math.nan]), _zeros(xp, 1), pos, pos)
    with pytest.raises(ValueError, match="head_dim"):
        sandwich_bias(pos, pos, 5, 2)
    with pytest.raises(ValueError, match="n_heads"):
        sandwich_bias(pos, pos, 4, 0)
    with pytest.raises(ValueError, match="head_dim"):
        Sandwich(3)
    with pytest.raises(ValueError, match="w2"):
        fire_bias(pos, pos, _zeros(xp, 4), _zeros(xp, 4), _zeros(xp, 2, 3), _zeros(xp, 2))
    with pytest.raises(ValueError, match="b2"):
        fire_bias(pos, pos, _zeros(xp, 4), _zeros(xp, 4), _zeros(xp, 2, 4), _zeros(xp, 3))
    with pytest.raises(ValueError, match="c"):
        fire_features(pos, pos, c=math.inf)


def test_xpos_and_cope_arguments(xp):
    with pytest.raises(ValueError, match="head dim"):
        xpos(_zeros(xp, 3, 3), _pos(xp, 3), is_query=True)
    with pytest.raises(ValueError, match="positions"):
        xpos(_zeros(xp, 3, 4), _pos(xp, 2), is_query=True)
    with pytest.raises(TypeError, match="is_query"):
        xpos(_zeros(xp, 3, 4), _pos(xp, 3), is_query=1)
    with pytest.raises(ValueError, match="scale_base"):
        XPos(scale_base=0.0)
    with pytest.raises(ValueError, match="npos"):
        cope_positions(_zeros(xp, 2, 2), 0)
    with pytest.raises(ValueError, match="e must"):
        CoPE(_zeros(xp, 4))
    with pytest.raises(ValueError, match="e has"):
        CoPE(_zeros(xp, 3, 5)).qk_terms(_zeros(xp, 1, 1, 2, 4), _zeros(xp, 1, 1, 2, 4), _pos(xp, 2),
                                               _pos(xp, 2))


@pytest.mark.parametrize(("enc", "n_heads_of_enc"), [("kerple", 3), ("fire", 3)])
def test_per_head_parameters_must_match_the_layer(xp, enc, n_heads_of_enc):
    pos = _pos(xp, 2)
    if enc == "kerple":
        e = KERPLE(_zeros(xp, n_heads_of_enc), _zeros(xp, n_heads_of_enc))
    else:
        e = FIRE(_zeros(xp, 4), _zeros(xp, 4), _zeros(xp, n_heads_of_enc, 4), _zeros(xp, n_heads_of_enc))
    with pytest.raises(ValueError, match="n_heads"):
        e.bias(pos, pos, 2)
