r"""refpos.encodings.deberta against transformers' ``DebertaV2`` and ``Deberta`` code (5.24, torch CPU).

* buckets: ``make_log_bucket_position`` over ``δ ∈ [−20000, 20000]`` for a grid of ``(position_buckets,
  max_relative_positions)``, equal. transformers takes the logarithm in float32, so far beyond the clamp its
  bucket can be one below the exact ceiling (the first at ``|δ| = 36334`` for 256/4096, ``65317`` for
  256/512); the index, what the layer reads, is compared over ``δ ∈ [−200000, 200000]`` and is equal;
* the c2p and p2c terms: ``DisentangledSelfAttention.disentangled_attention_bias`` with one term at a
  time, with and without ``share_att_key``;
* the attention output: transformers' ``DisentangledSelfAttention`` of v2 (buckets; ``norm_rel_ebd``'s
  LayerNorm; ``share_att_key``) and of v1 (``Deberta``: no buckets, fused ``in_proj``) with a padded
  batch, against :func:`refpos.self_attention` with :class:`refpos.encodings.DeBERTa` and the same weights; and
  ``position_biased_input`` against ``DebertaV2Embeddings``.

Tolerance. The modules run in float64 (``.double()``), but transformers computes the scale
``ŝ = √(d·(1 + n))`` in float32 (``scaled_size_sqrt``) before casting it, so every logit it divides
carries the relative error ``ε = |s/ŝ − 1| ≤ 2⁻²⁴`` of that one rounding (computed per case; 0 where
``d·(1 + n)`` is a square). A term is compared within ``ε·|term|``; an attention output within
``ε·(max_j z_ij − min_j z_ij)·max|v|`` (scaling every logit of row i by ``1 + ε`` moves weight ``A_ij``
by at most ``ε·A_ij·(max_j z_ij − min_j z_ij)``); each plus the float64 re-derivation rule of
:func:`refpos.golden.exact.tolerance.value_tolerance` (the same sums in another order).
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.backend import to_numpy
from refpos.encodings import (
    deberta_c2p_terms,
    deberta_log_buckets,
    deberta_p2c_terms,
    deberta_position_projection,
    deberta_relative_index,
)
from refpos.golden.exact.tolerance import value_tolerance

torch = pytest.importorskip("torch", reason="DeBERTa anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="DeBERTa anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

BUCKET_GRID = [(256, 512), (256, 1024), (256, 2048), (256, 4096), (255, 512), (128, 512), (64, 512), (32, 128),
               (8, 64), (4, 16), (3, 9), (2, 8)]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def _float32_scale_error(head_dim: int, n_terms: int) -> float:
    """``ε = |s/ŝ − 1|``: transformers' ``√(d·(1 + n))`` rounded to float32 against the exact one."""
    exact = np.sqrt(head_dim * (1.0 + n_terms))
    rounded = float(np.sqrt(np.float32(head_dim) * np.float32(1 + n_terms)))
    return abs(exact / rounded - 1.0)


@pytest.mark.parametrize(("position_buckets", "max_relative_positions"), BUCKET_GRID)
def test_log_buckets_equal_transformers(xp, position_buckets, max_relative_positions):
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    delta = np.arange(-20000, 20001)
    theirs = make_log_bucket_position(torch.from_numpy(delta), position_buckets, max_relative_positions).long()
    ours = deberta_log_buckets(xp.asarray(delta), position_buckets, max_relative_positions)
    np.testing.assert_array_equal(to_numpy(ours), theirs.numpy())


@pytest.mark.parametrize(("position_buckets", "max_relative_positions"), BUCKET_GRID)
def test_relative_index_equals_transformers(xp, position_buckets, max_relative_positions):
    """The clamped row index over ±200000 (one query at 200000, keys 0 … 400000), and transformers' own
    ``build_relative_position`` over a 600-token sequence."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position, make_log_bucket_position

    span = position_buckets
    settings = {"position_buckets": position_buckets, "max_relative_positions": max_relative_positions}
    keys = np.arange(400001)
    delta = torch.from_numpy(200000 - keys)
    theirs = torch.clamp(make_log_bucket_position(delta, position_buckets, max_relative_positions).long() + span,
                         0, 2 * span - 1)
    ours = deberta_relative_index(xp.asarray([200000]), xp.asarray(keys), **settings)
    np.testing.assert_array_equal(to_numpy(ours)[0], theirs.numpy())
    hidden = torch.zeros(1, 600, 1)
    grid = build_relative_position(hidden, hidden, bucket_size=position_buckets, max_position=max_relative_positions)
    ours = deberta_relative_index(xp.arange(600), xp.arange(600), **settings)
    np.testing.assert_array_equal(to_numpy(ours), torch.clamp(grid[0] + span, 0, 2 * span - 1).numpy())


def _v2_config(**overrides):
    from transformers import DebertaV2Config

    settings = {"hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32, "num_hidden_layers": 1,
                "max_position_embeddings": 64, "relative_attention": True, "position_buckets": 8,
                "max_relative_positions": -1, "pos_att_type": ["p2c", "c2p"], "share_att_key": True,
                "norm_rel_ebd": "layer_norm", "position_biased_input": False, "hidden_dropout_prob": 0.0,
                "attention_probs_dropout_prob": 0.0}
    return DebertaV2Config(**{**settings, **overrides})


def _encoder(config, module):
    torch.manual_seed(0)
    encoder = module(config).double().eval()
    with torch.no_grad():  # the LayerNorm of norm_rel_ebd away from its identity initialisation
        for name, parameter in encoder.named_parameters():
            if "LayerNorm" in name:
                parameter.add_(0.3 * torch.randn_like(parameter))
    return encoder


def _pair(linear) -> tuple[np.ndarray, np.ndarray | None]:
    """A torch Linear as refpos's ``(weight (in, out), bias)``."""
    return _np(linear.weight).T, None if linear.bias is None else _np(linear.bias)


def _on(xp, pair: tuple) -> tuple:
    """A ``(weight, bias)`` pair on the backend."""
    return tuple(None if a is None else xp.asarray(a) for a in pair)


def _settings(config) -> dict:
    """The DeBERTa keyword arguments of a transformers config, key for key."""
    return {"pos_att_type": config.pos_att_type, "position_buckets": getattr(config, "position_buckets", -1),
            "max_relative_positions": config.max_relative_positions,
            "max_position_embeddings": config.max_position_embeddings, "position_biased_input": False}


@pytest.mark.parametrize("term", ["c2p", "p2c"])
@pytest.mark.parametrize("share_att_key", [True, False])
@pytest.mark.parametrize(("position_buckets", "max_relative_positions", "head_dim"), [(8, 32, 8), (-1, 12, 6)])
def test_c2p_and_p2c_terms_equal_transformers(xp, term, share_att_key, position_buckets, max_relative_positions,
                                              head_dim):
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    config = _v2_config(pos_att_type=[term], share_att_key=share_att_key, position_buckets=position_buckets,
                        max_relative_positions=max_relative_positions, hidden_size=2 * head_dim)
    encoder = _encoder(config, DebertaV2Encoder)
    attention = encoder.layer[0].attention.self
    hidden = torch.randn(1, 40, config.hidden_size, dtype=torch.float64)
    q = attention.transpose_for_scores(attention.query_proj(hidden), 2)  # (B·H, T, d)
    k = attention.transpose_for_scores(attention.key_proj(hidden), 2)
    rel = encoder.get_rel_embedding()
    theirs = _np(attention.disentangled_attention_bias(q, k, encoder.get_rel_pos(hidden), rel, 2))
    source = {("c2p", True): "key_proj", ("p2c", True): "query_proj", ("c2p", False): "pos_key_proj",
              ("p2c", False): "pos_query_proj"}[term, share_att_key]
    table = deberta_position_projection(xp.asarray(_np(rel)), *_on(xp, _pair(getattr(attention, source))),
                                               n_heads=2)
    index = deberta_relative_index(xp.arange(40), xp.arange(40), position_buckets=position_buckets,
                                          max_relative_positions=max_relative_positions)
    x = xp.asarray(_np(q if term == "c2p" else k))
    ours = deberta_c2p_terms(x, table, index) if term == "c2p" else deberta_p2c_terms(x, table, index)
    ours = to_numpy(ours) / np.sqrt(head_dim * 2.0)
    eps = _float32_scale_error(head_dim, 1)
    atol = eps * np.abs(ours) + value_tolerance("float64", ours, scale=float(np.abs(ours).max()))
    np.testing.assert_array_less(np.abs(ours - theirs), atol + 1e-300)


def _compare_layer(xp, encoder, attention, config, encoding, weights, hidden, mask2d):
    """transformers' attention output against refpos.self_attention (biases via a constant-1 input channel)."""
    mask4d = encoder.get_attention_mask(torch.from_numpy(mask2d))
    theirs = _np(attention(torch.from_numpy(hidden), mask4d, relative_pos=encoder.get_rel_pos(torch.from_numpy(hidden)),
                           rel_embeddings=encoder.get_rel_embedding())[0])
    with_one = np.concatenate([hidden, np.ones((*hidden.shape[:-1], 1))], axis=-1)  # (B, T, hidden + 1)
    allowed = (mask2d[:, :, None] * mask2d[:, None, :]).astype(bool)[:, None]  # (B, 1, T, T)
    out, trace = refpos.self_attention(xp.asarray(with_one), weights, encoding=encoding, mask=xp.asarray(allowed))
    ours, z, v = to_numpy(out), to_numpy(trace["logits"]), to_numpy(trace["V"])
    head_dim = v.shape[-1]
    z_range = np.where(allowed, z, -np.inf).max(-1) - np.where(allowed, z, np.inf).min(-1)  # (B, H, T)
    z_range = np.where(allowed.any(-1), z_range, 0.0)  # padded query rows: no key allowed
    eps = _float32_scale_error(head_dim, len(encoding.terms))
    atol = eps * z_range.max(axis=1)[..., None] * np.abs(v).max() + value_tolerance(
        "float64", theirs, scale=float(np.abs(theirs).max()))
    rows = mask2d.astype(bool)  # padded query rows: transformers spreads them evenly, refpos gives zeros
    np.testing.assert_array_less(np.abs(ours - theirs)[rows], np.broadcast_to(atol, ours.shape)[rows])
    return float(np.abs(ours - theirs)[rows].max())


def _stacked(*pairs) -> np.ndarray:
    """``[W; b]``: a projection with its bias as the row read by the constant-1 channel."""
    return np.concatenate([np.concatenate([w, b[None, :] if b is not None else np.zeros((1, w.shape[1]))])
                           for w, b in pairs], axis=1)


@pytest.mark.parametrize("pos_att_type", [["p2c", "c2p"], ["c2p"], ["p2c"], []])
@pytest.mark.parametrize("share_att_key", [True, False])
@pytest.mark.parametrize(("position_buckets", "max_relative_positions"), [(8, -1), (256, 512), (-1, 16)])
def test_v2_attention_output_equals_transformers(xp, pos_att_type, share_att_key, position_buckets,
                                                 max_relative_positions):
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    config = _v2_config(pos_att_type=pos_att_type, share_att_key=share_att_key, position_buckets=position_buckets,
                        max_relative_positions=max_relative_positions)
    encoder = _encoder(config, DebertaV2Encoder)
    attention = encoder.layer[0].attention.self
    keys, queries = ("key_proj", "query_proj") if share_att_key else ("pos_key_proj", "pos_query_proj")
    projections = {keys: "c2p", queries: "p2c"}  # the projection of each term
    given = {name: _on(xp, _pair(getattr(attention, name))) for name, term in projections.items()
             if term in pos_att_type}
    encoding = refpos.encodings.DeBERTa(xp.asarray(_np(encoder.get_rel_embedding())), share_att_key=share_att_key,
                                        **_settings(config), **given)
    weights = refpos.AttentionWeights(*(xp.asarray(_stacked(_pair(getattr(attention, n))))
                                        for n in ("query_proj", "key_proj", "value_proj")), n_heads=2)
    rng = np.random.default_rng(len(pos_att_type) + 3 * max(position_buckets, 0))
    hidden = rng.standard_normal((2, 40, 16))
    mask2d = np.ones((2, 40), dtype=np.int64)
    mask2d[1, 31:] = 0  # the second row is padded after 31 tokens
    _compare_layer(xp, encoder, attention, config, encoding, weights, hidden, mask2d)


def test_v1_attention_output_equals_transformers(xp):
    """DeBERTa-v1: no buckets (the index clips ``δ`` to ``[−m, m − 1]``), a fused ``in_proj`` without key bias,
    ``q_bias`` and ``v_bias``, a c2p projection without bias, and ``pos_att_type`` written ``"c2p|p2c"``."""
    from transformers import DebertaConfig
    from transformers.models.deberta.modeling_deberta import DebertaEncoder

    config = DebertaConfig(hidden_size=12, num_attention_heads=2, intermediate_size=24, num_hidden_layers=1,
                           max_position_embeddings=64, relative_attention=True, max_relative_positions=10,
                           pos_att_type="c2p|p2c", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    encoder = _encoder(config, DebertaEncoder)
    attention = encoder.layer[0].attention.self
    head_dim = 6
    in_proj = _np(attention.in_proj.weight).T.reshape(12, 2, 3, head_dim)  # per head: [q | k | v] columns
    q_w, k_w, v_w = (in_proj[:, :, part, :].reshape(12, 12) for part in range(3))
    q_b, v_b = _np(attention.q_bias), _np(attention.v_bias)
    weights = refpos.AttentionWeights(*(xp.asarray(_stacked((w, b))) for w, b in ((q_w, q_b), (k_w, None),
                                                                               (v_w, v_b))), n_heads=2)
    encoding = refpos.encodings.DeBERTa(xp.asarray(_np(encoder.get_rel_embedding())), pos_att_type="c2p|p2c",
                              position_buckets=-1, max_relative_positions=10, position_biased_input=False,
                              pos_key_proj=_on(xp, _pair(attention.pos_proj)),
                              pos_query_proj=_on(xp, _pair(attention.pos_q_proj)))
    hidden = np.random.default_rng(1).standard_normal((2, 30, 12))
    mask2d = np.ones((2, 30), dtype=np.int64)
    mask2d[0, 25:] = 0
    _compare_layer(xp, encoder, attention, config, encoding, weights, hidden, mask2d)


@pytest.mark.parametrize("position_biased_input", [True, False])
def test_position_biased_input_equals_transformers_embeddings(xp, position_biased_input):
    """``DebertaV2Embeddings``: LayerNorm(x + P[p]) when ``position_biased_input``, else LayerNorm(x)."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Embeddings

    config = _v2_config(position_biased_input=position_biased_input, type_vocab_size=0)
    torch.manual_seed(1)
    embeddings = DebertaV2Embeddings(config).double().eval()
    x = np.random.default_rng(2).standard_normal((1, 20, 16))
    theirs = _np(embeddings(inputs_embeds=torch.from_numpy(x)))
    table = xp.asarray(_np(embeddings.position_embeddings.weight)) if position_biased_input else None
    encoding = refpos.encodings.DeBERTa(None, pos_att_type=["c2p"], position_buckets=8, max_relative_positions=-1,
                                        max_position_embeddings=64, relative_attention=False,
                                        position_biased_input=position_biased_input, position_embeddings=table)
    p = encoding.embed(xp.arange(20), 16, xp)
    summed = x + (0.0 if p is None else to_numpy(p))
    mean, var = summed.mean(-1, keepdims=True), summed.var(-1, keepdims=True)
    ours = (summed - mean) / np.sqrt(var + config.layer_norm_eps) * _np(embeddings.LayerNorm.weight) \
        + _np(embeddings.LayerNorm.bias)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=value_tolerance("float64", theirs, scale=1.0).max())
