"""The pipeline runs every layer kind the model resolver returns, query scales included, and a query-scale
rule is one record: its keys are reported as not modelled until a family's row honours the rule.

Each layer's ``encoding()`` runs through :func:`refpos.self_attention` and is compared with the attention
written out from the record's own parameters (the bias, the buckets, the table, the rotation, the scale).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.models import families, query_scales
from refpos.pipeline import layer as pipeline_layer

RNG = np.random.default_rng(7)
T, D_MODEL, HEADS = 6, 16, 4
X = RNG.standard_normal((T, D_MODEL))
W = refpos.AttentionWeights(*(RNG.standard_normal((D_MODEL, D_MODEL)) / 4 for _ in range(3)), n_heads=HEADS)
POS = np.arange(T)


def heads(x):
    """(T, H·d) -> (H, T, d) for the weights W."""
    return x.reshape(T, HEADS, -1).transpose(1, 0, 2)


def written_out(x, *, bias=None, before_scale=False, scale=None, rotate=None, temperature=None, causal=True):
    """softmax(t_i · scale · (q·kᵀ + B_before) + B_after) · v, from the weights W (the reference by hand)."""
    q, k, v = heads(x @ W.w_q), heads(x @ W.w_k), heads(x @ W.w_v)
    if rotate is not None:
        q, k = rotate(q), rotate(k)
    d = q.shape[-1]
    s = q @ k.transpose(0, 2, 1)
    s = (s + (bias if before_scale else 0)) * (d**-0.5 if scale is None else scale)
    s = s * (1.0 if temperature is None else temperature[:, None]) + (0 if before_scale or bias is None else bias)
    if causal:
        s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    return (a @ v).transpose(1, 0, 2).reshape(T, -1)


def run(layer, x=X, **weights):
    return refpos.self_attention(x, W, encoding=layer.encoding(**weights), causal=True)[0]


def test_alibi_layers_run_with_their_order_and_rounding():
    for model_type, extra, before in (("bloom", {}, False), ("falcon", {"alibi": True}, True)):
        config = {"model_type": model_type, "n_layer": 1, "n_head": HEADS, "hidden_size": D_MODEL, **extra}
        layer = refpos.model_positions(config).layers[0]
        expected = written_out(X, bias=layer.bias(attention_mask=np.ones(POS.size)), before_scale=before)
        np.testing.assert_allclose(run(layer), expected, rtol=1e-12, atol=1e-12)


def test_t5_learned_and_sinusoidal_layers_run_with_their_weights():
    t5 = refpos.model_positions({"model_type": "t5", "num_layers": 1, "num_heads": HEADS, "d_model": D_MODEL,
                                 "relative_attention_num_buckets": 8}).stack("decoder")[0]
    table = RNG.standard_normal((8, HEADS))
    np.testing.assert_allclose(run(t5, table=table), written_out(X, bias=np.asarray(t5.bias(table, cache_position=POS)),
                                                                 scale=1.0), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="pass table="):
        t5.encoding()
    opt = refpos.model_positions({"model_type": "opt", "num_hidden_layers": 1, "num_attention_heads": HEADS,
                                  "hidden_size": D_MODEL, "max_position_embeddings": 8}).layers[0]
    rows = RNG.standard_normal((10, D_MODEL))
    np.testing.assert_allclose(run(opt, table=rows), written_out(X + rows[POS + 2]), rtol=1e-12, atol=1e-12)
    m2m = refpos.model_positions({"model_type": "m2m_100", "encoder_layers": 1, "decoder_layers": 1,
                                  "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
                                  "d_model": D_MODEL, "pad_token_id": 1}).layers[0]
    np.testing.assert_allclose(run(m2m), written_out(X + m2m.sinusoid(POS)), rtol=1e-12, atol=1e-12)


LLAMA4 = {"model_type": "llama4_text", "hidden_size": D_MODEL, "num_attention_heads": HEADS, "head_dim": 4,
          "num_hidden_layers": 4, "rope_theta": 5e5, "max_position_embeddings": 64, "floor_scale": 2,
          "attn_scale": 0.5}


def test_a_query_scale_runs_as_the_query_multiplied_by_it():
    resolved = refpos.model_positions(LLAMA4)
    nope, rope = resolved.layers[3], resolved.layers[0]
    assert nope.label == "none+scale" and rope.label == "rope"
    scale = nope.scale(cache_position=POS)
    assert scale[0] == 1.0 and scale[-1] > 1.0  # 1 + 0.5 ln(1 + ⌊(p + 1)/2⌋)
    np.testing.assert_allclose(run(nope), written_out(X, temperature=scale), rtol=1e-12, atol=1e-12)
    rotated = written_out(X, rotate=lambda h: np.asarray(refpos.apply_rope(h, POS, rope.rope)))
    np.testing.assert_allclose(run(rope), rotated, rtol=1e-12, atol=1e-12)


def test_each_hook_reads_what_its_layer_reads():
    """self_attention takes the position ids, the slots and the attention mask separately and gives each hook what
    the layer's code reads: Llama 4's temperature the slot (id 32767 in slot 5 is scaled by 1), Falcon's ALiBi the
    mask's running count (ids ignored), RoPE the ids; a call that gives ids to a layer reading the slot or the mask
    is refused, never read as them."""
    ids = np.array([0, 1, 2, 3, 4, 32767])
    resolved = refpos.model_positions(LLAMA4)
    nope, rope = resolved.layers[3], resolved.layers[0]
    by_slot = written_out(X, temperature=nope.query_scale(POS))
    np.testing.assert_allclose(refpos.self_attention(X, W, encoding=nope.encoding(), positions=ids,
                                                     cache_position=POS, causal=True)[0], by_slot, rtol=1e-12)
    with pytest.raises(ValueError, match=r"slot .*cache_position="):
        refpos.self_attention(X, W, encoding=nope.encoding(), positions=ids, causal=True)
    rotated = written_out(X, rotate=lambda h: np.asarray(refpos.apply_rope(h, ids, rope.rope)))
    np.testing.assert_allclose(refpos.self_attention(X, W, encoding=rope.encoding(), positions=ids,
                                                     cache_position=POS, causal=True)[0], rotated, rtol=1e-12)
    falcon = refpos.model_positions({"model_type": "falcon", "n_layer": 1, "n_head": HEADS, "hidden_size": D_MODEL,
                                     "alibi": True}).layers[0]
    mask = np.array([0, 0, 1, 1, 1, 1])  # left padding: the keys count the mask's ones
    expected = written_out(X, bias=falcon.bias_at(POS, np.array([0, 0, 0, 1, 2, 3])), before_scale=True)
    np.testing.assert_allclose(refpos.self_attention(X, W, encoding=falcon.encoding(), positions=ids,
                                                     attention_mask=mask, causal=True)[0], expected, rtol=1e-12)
    with pytest.raises(ValueError, match="attention_mask="):
        refpos.self_attention(X, W, encoding=falcon.encoding(), positions=ids, causal=True)
    with pytest.raises(ValueError, match="cached tokens"):  # the pipeline runs no cache
        refpos.self_attention(X, W, encoding=falcon.encoding(), attention_mask=np.ones(8), causal=True)


def test_the_query_scale_test_breaks_when_the_pipeline_drops_the_temperature(monkeypatch):
    monkeypatch.setattr(pipeline_layer, "_per_query", lambda temperature: None)
    with pytest.raises(AssertionError):
        test_a_query_scale_runs_as_the_query_multiplied_by_it()


def test_layers_without_attention_or_refused_name_why_they_do_not_run():
    mamba = refpos.model_positions({"model_type": "mamba", "num_hidden_layers": 1}).layers[0]
    with pytest.raises(ValueError, match="mamba layer has no attention"):
        mamba.encoding()
    refused = refpos.model_positions({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2,
                                      "hidden_size": 8, "use_logn_attn": True}).layers[0]
    with pytest.raises(ValueError, match="not modelled: use_logn_attn"):
        refused.encoding()


# ---------------------------------------------------------------------------------- the query-scale registry
def _toy(p, c):
    return 1.0 + c["gain"] * p


TOY = query_scales.QueryScaleRule("toy_gain", r"1 + g\,p", "every", (query_scales.ScaleKey("top", "toy_gain", "gain"),),
                                  _toy, "toy/modeling_toy.py: ToyAttention.forward", ("position_ids", "cache_position"))
LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8, "toy_gain": 0.5}


def test_a_new_rule_is_one_record_its_key_reported_until_a_row_honours_it(monkeypatch):
    assert "toy_gain" not in refpos.models.hf_layers(LLAMA).not_modelled  # no rule reads it: an unused key
    monkeypatch.setitem(query_scales.QUERY_SCALES, "toy_gain", TOY)
    report = refpos.models.hf_layers(LLAMA).not_modelled  # the rule exists: its key is position-relevant, not honoured
    assert "1 + g\\,p (toy_gain)" in report["toy_gain"]
    assert [r.kind for r in refpos.model_positions(LLAMA)] == ["refused", "refused"]  # never ignored
    monkeypatch.setitem(families.FAMILIES, "llama", dataclasses.replace(families.FAMILIES["llama"],
                                                                          query_scale="toy_gain"))
    honoured = refpos.model_positions(LLAMA)
    assert not honoured.not_modelled and [r.label for r in honoured] == ["rope+scale"] * 2
    assert honoured.layers[0].query_scale([0, 2]).tolist() == [1.0, 2.0]
    two_heads = refpos.AttentionWeights(*(np.eye(8) for _ in range(3)), n_heads=2)
    by_hand = refpos.encoding.QueryScaled(refpos.rope.Rope(honoured.layers[0].rope), lambda p: 1 + 0.5 * p)
    np.testing.assert_allclose(
        refpos.self_attention(X[:, :8], two_heads, encoding=honoured.layers[0].encoding(), causal=True)[0],
        refpos.self_attention(X[:, :8], two_heads, encoding=by_hand, causal=True)[0], rtol=1e-14, atol=1e-14)


def test_a_deberta_layer_runs_the_encoding_of_its_keys():
    config = {"model_type": "deberta-v2", "num_hidden_layers": 1, "num_attention_heads": HEADS,
              "hidden_size": D_MODEL, "relative_attention": True, "position_buckets": 4, "max_relative_positions": 8,
              "pos_att_type": ["c2p", "p2c"], "share_att_key": False, "position_biased_input": False}
    layer = refpos.model_positions(config).layers[0]
    weights = {"rel_embeddings": RNG.standard_normal((8, D_MODEL)),
               "pos_key_proj": (RNG.standard_normal((D_MODEL, D_MODEL)), None),
               "pos_query_proj": (RNG.standard_normal((D_MODEL, D_MODEL)), RNG.standard_normal(D_MODEL))}
    by_hand = refpos.encodings.deberta.DeBERTa(
        pos_att_type=["c2p", "p2c"], position_buckets=4, max_relative_positions=8, max_position_embeddings=512,
        share_att_key=False, relative_attention=True, position_biased_input=False, **weights)
    np.testing.assert_array_equal(refpos.self_attention(X, W, encoding=layer.encoding(**weights))[0],
                                  refpos.self_attention(X, W, encoding=by_hand)[0])
    with pytest.raises(ValueError, match="pos_key_proj must be given"):
        layer.encoding()  # its weights are the checkpoint's: named when missing
