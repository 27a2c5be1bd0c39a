"""refpos.encodings.deberta: the two forms agree, the Encoding's parameters are checked one by one, the pipeline
runs a DeBERTa layer (docs/deberta.md). The formulas themselves are spec_tests/test_deberta.py's; the anchor is
refpos/tests/test_anchors_deberta.py.

Tolerance of the two forms: the same float64 dot products of d terms in another order, rtol 1e-13.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos.backend import to_numpy
from refpos.encodings import (
    deberta_c2p_terms,
    deberta_log_buckets,
    deberta_p2c_terms,
    deberta_position_projection,
    deberta_relative_index,
)
from refpos.encodings.deberta import deberta_attention_span, deberta_pos_att_type, deberta_softmax_scale


def _layer(xp, *, share_att_key=True, terms=("p2c", "c2p"), position_buckets=4, m=8, seed=0):
    rng = np.random.default_rng(seed)
    w = refpos.AttentionWeights(*(xp.asarray(rng.standard_normal((12, 12)) / 3) for _ in range(3)), n_heads=3)
    span = position_buckets if position_buckets > 0 else m
    rel = xp.asarray(rng.standard_normal((2 * span, 12)))
    keys, queries = ("key_proj", "query_proj") if share_att_key else ("pos_key_proj", "pos_query_proj")
    own = {"key_proj": (w.w_k, None), "query_proj": (w.w_q, None),
           "pos_key_proj": (xp.asarray(rng.standard_normal((12, 12))), xp.asarray(rng.standard_normal(12))),
           "pos_query_proj": (xp.asarray(rng.standard_normal((12, 12))), None)}
    projections = {name: own[name] for name, term in ((keys, "c2p"), (queries, "p2c")) if term in terms}
    encoding = refpos.encodings.DeBERTa(rel, pos_att_type=list(terms), position_buckets=position_buckets,
                                        max_relative_positions=m, position_biased_input=False,
                                        share_att_key=share_att_key, **projections)
    return w, encoding, rng


@given(seed=st.integers(0, 2**32 - 1), batched=st.booleans(), buckets=st.sampled_from([(4, 8), (8, 40), (-1, 3)]))
def test_gather_and_direct_forms_agree(xp, seed, batched, buckets):
    rng = np.random.default_rng(seed)
    position_buckets, m = buckets
    span = position_buckets if position_buckets > 0 else m
    q, k = (xp.asarray(rng.standard_normal((2, 3, 7, 4))) for _ in range(2))
    table = xp.asarray(rng.standard_normal((3, 2 * span, 4)))
    positions = rng.integers(0, 50, size=(2, 7) if batched else (7,))
    index = deberta_relative_index(xp.asarray(positions), xp.asarray(positions),
                                          position_buckets=position_buckets, max_relative_positions=m)
    for term, x in ((deberta_c2p_terms, q), (deberta_p2c_terms, k)):
        gather, direct = (to_numpy(term(x, table, index, form=form)) for form in ("gather", "direct"))
        np.testing.assert_allclose(gather, direct, rtol=1e-13, atol=1e-13 * np.abs(direct).max())


def test_batched_positions_give_each_row_its_own_index(xp):
    """A left-padded row at positions 0…4 after 2 pads equals the unpadded row at 0…4."""
    w, encoding, rng = _layer(xp)
    x = rng.standard_normal((5, 12))
    alone, _ = refpos.self_attention(xp.asarray(x), w, encoding=encoding)
    padded = np.concatenate([np.zeros((2, 12)), x])[None]  # (1, 7, 12)
    positions = xp.asarray(np.array([[0, 0, 0, 1, 2, 3, 4]]))
    allowed = xp.asarray(np.arange(7)[None, None, None, :] >= 2)
    out, _ = refpos.self_attention(xp.asarray(padded), w, encoding=encoding, positions=positions, mask=allowed)
    np.testing.assert_allclose(to_numpy(out)[0, 2:], to_numpy(alone), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("share_att_key", [True, False])
@pytest.mark.parametrize("terms", [("p2c", "c2p"), ("c2p",), ("p2c",), ()])
def test_the_pipeline_logits_are_the_logits_function(xp, share_att_key, terms):
    """self_attention with DeBERTa gives the logits of deberta_attention_logits on its own Q, K and tables."""
    w, encoding, rng = _layer(xp, share_att_key=share_att_key, terms=terms)
    x = xp.asarray(rng.standard_normal((9, 12)))
    _, trace = refpos.self_attention(x, w, encoding=encoding)
    tables = [None if proj is None else deberta_position_projection(encoding.rel_embeddings, *proj, n_heads=3)
              for proj in (encoding.key_proj, encoding.query_proj)]
    positions = xp.arange(9)
    logits = refpos.encodings.deberta_attention_logits(trace["Q"], trace["K"], *tables, positions, positions,
                                                       pos_att_type=list(terms), position_buckets=4,
                                                       max_relative_positions=8)
    np.testing.assert_allclose(to_numpy(trace["logits"]), to_numpy(logits), rtol=1e-13, atol=1e-13)


def test_relative_attention_off_keeps_the_scale_and_adds_nothing(xp):
    encoding = refpos.encodings.DeBERTa(None, pos_att_type="c2p|p2c", position_buckets=256, max_relative_positions=-1,
                                        max_position_embeddings=512, relative_attention=False,
                                        position_biased_input=False)
    q = xp.asarray(np.ones((1, 2, 3, 4)))
    assert encoding.qk_terms(q, q, xp.arange(3), xp.arange(3)) is None
    assert encoding.softmax_scale(64) == deberta_softmax_scale(64, ["c2p", "p2c"]) == 1 / np.sqrt(192)


def test_config_values_resolve_as_the_anchor():
    assert deberta_attention_span(256, -1, 512) == (256, 512)  # v3: buckets, m from max_position_embeddings
    assert deberta_attention_span(-1, -1, 512) == (512, 512)  # v1: no buckets
    assert deberta_attention_span(0, 24) == (24, 24)
    assert deberta_pos_att_type("P2C | c2p") == ("p2c", "c2p")
    assert deberta_pos_att_type(None) == deberta_pos_att_type("") == ()


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"position_buckets": 1}, ValueError, "position_buckets"),
    ({"position_buckets": 256, "max_relative_positions": 129}, ValueError, "max_relative_positions"),
    ({"max_relative_positions": -1}, ValueError, "max_position_embeddings"),
    ({"position_buckets": 4.0}, TypeError, "position_buckets"),
    ({"pos_att_type": ["c2p", "p2p"]}, ValueError, "pos_att_type"),
    ({"pos_att_type": ["c2p", "c2p"]}, ValueError, "pos_att_type"),
    ({"pos_att_type": 3}, TypeError, "pos_att_type"),
    ({"share_att_key": "yes"}, TypeError, "share_att_key"),
    ({"position_biased_input": True}, ValueError, "position_embeddings"),
    ({"key_proj": None}, ValueError, "key_proj"),
    ({"pos_key_proj": "W"}, ValueError, "pos_key_proj"),
    ({"key_proj": np.eye(4)}, TypeError, "key_proj"),
    ({"rel_embeddings": np.zeros((7, 4))}, ValueError, "rel_embeddings"),
    ({"rel_embeddings": None}, ValueError, "rel_embeddings"),
    ({"form": "skewed"}, ValueError, "form"),
])
def test_bad_arguments_name_the_parameter(kwargs, error, name):
    settings = {"rel_embeddings": np.zeros((8, 4)), "pos_att_type": ["c2p"], "position_buckets": 4,
                "max_relative_positions": 8, "position_biased_input": False, "share_att_key": True,
                "key_proj": (np.eye(4), None)}
    settings.update(kwargs)
    with pytest.raises(error, match=name):
        refpos.encodings.DeBERTa(settings.pop("rel_embeddings"), **settings)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: deberta_log_buckets([1.5], 8, 32), "relative"),
    (lambda: deberta_log_buckets([2**60], 8, 32), "relative"),
    (lambda: deberta_log_buckets([1], -1, 32), "position_buckets"),
    (lambda: deberta_c2p_terms(np.ones((1, 2, 4)), np.ones((1, 8, 4)), np.full((2, 2), 8)), "index"),
    (lambda: deberta_c2p_terms(np.ones((1, 2, 4)), np.ones((2, 8, 4)), np.zeros((2, 2), int)), "pos_key"),
    (lambda: deberta_position_projection(np.ones((8, 4)), np.ones((5, 4)), n_heads=2), "weight"),
    (lambda: deberta_position_projection(np.ones((8, 4)), np.ones((4, 4)), np.ones(3), n_heads=2), "bias"),
    (lambda: refpos.encodings.deberta_attention_logits(np.ones((1, 2, 4)), np.ones((1, 2, 4)), None, None, [0, 1], [0,
                                                                                                                    1],
                                                       pos_att_type=["c2p"], position_buckets=4,
                                                       max_relative_positions=8), "pos_key"),
    (lambda: refpos.encodings.deberta_attention_logits(np.ones((2, 2, 4)), np.ones((1, 2, 4)), None, None, [0, 1], [0,
                                                                                                                    1],
                                                       pos_att_type=[], position_buckets=4, max_relative_positions=8),
     "heads"),
])
def test_bad_input_to_the_functions_names_it(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


def test_position_biased_input_adds_the_table_and_checks_its_width(xp):
    table = xp.asarray(np.arange(40.0).reshape(10, 4))
    encoding = refpos.encodings.DeBERTa(None, pos_att_type=None, position_buckets=-1, max_relative_positions=10,
                                        relative_attention=False, position_biased_input=True, position_embeddings=table)
    np.testing.assert_array_equal(to_numpy(encoding.embed(xp.asarray([3, 0]), 4, xp)), to_numpy(table)[[3, 0]])
    with pytest.raises(ValueError, match="d_model"):
        encoding.embed(xp.asarray([0]), 8, xp)
    with pytest.raises(ValueError, match="positions"):
        encoding.embed(xp.asarray([10]), 4, xp)
