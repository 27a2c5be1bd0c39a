"""Anchors: where positions come from — the inputs a layer reads — against transformers' own models.

Llama 4's NoPE layers scale the query by the token's slot, Falcon's ALiBi (``alibi=True``) multiplies each key's
slope by the running count of the attention mask's ones: neither reads the position ids. A tiny model of each runs
its own forward on the cases where ids, slots and the mask's count differ — gapped ids, an id (32767) far from its
slot (5), left padding, packed sequences, decoding after a cache — and refpos, given the same inputs by name, must
say what the model did. The old reading (the ids as the slot, the ids as the keys' positions) is shown wrong on
the same cases.

Tolerances, from the computation each side runs:

* Llama 4: transformers computes ``s = fl(1 + a·log1p(floor((p + 1)/f)))`` in float32 (log1p, the product and the
  sum each round once: relative error at most ``3·2⁻²⁴`` plus log1p's own ulp) and rounds ``q·s`` once more; the
  scale read back as ``(q·s)/q`` in float64 is within ``s·6·2⁻²⁴`` of the exact one.
* Falcon: the bias the model hands its layer (in the attention mask, added once by SDPA in 5.24 and 5.25) is
  ``fl32(b / fl32(√d))`` with ``b`` the bfloat16 product (exact in float32) that refpos rounds the same way: two
  roundings, ``|b/√d|·3·2⁻²⁴``.
* π0, π0.5, PaliGemma, OPT: integer positions, compared exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import refpos

torch = pytest.importorskip("torch", reason="the input anchors run transformers' models")
transformers = pytest.importorskip("transformers", reason="the input anchors run transformers' models")

pytestmark = pytest.mark.anchors

ULP = 2.0**-24
#: (name, position ids per row, attention mask per row or None, tokens cached before the call)
CASES = [
    ("id 32767 in slot 5", [[0, 1, 2, 3, 4, 32767]], None, 0),
    ("gapped ids", [[0, 5, 9, 100, 4000, 9000]], None, 0),
    ("left padding", [[0, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]], [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]], 0),
    ("packed sequences", [[0, 1, 2, 0, 1, 2]], None, 0),
    ("decoding after 6 cached tokens", [[6, 7]], None, 6),
    ("decoding, left-padded, id 2047", [[4, 2047]], [[0, 0, 1, 1, 1, 1, 1, 1]], 6),
]


def _capture(store: dict):
    """An attention function that records what the layer hands to attention (and attends to nothing)."""
    def capture(module, query, key, value, attention_mask, **kwargs):
        store.setdefault(module.layer_idx, []).append((query.detach().clone(), None if attention_mask is None else
                                                       attention_mask.detach().clone()))
        return torch.zeros_like(query).transpose(1, 2), None

    return capture


def _run(model, ids, mask, past, width, seed=0):
    """The model's forward on random embeddings: ``past`` tokens first (their cache), then the call's."""
    from transformers import DynamicCache

    gen = torch.Generator().manual_seed(seed)
    batch, t = len(ids), len(ids[0])
    cache = DynamicCache(config=model.config) if past else None
    full_mask = None if mask is None else torch.tensor(mask)
    with torch.no_grad():
        if past:
            prefix = torch.randn(batch, past, width, generator=gen)
            model(inputs_embeds=prefix, attention_mask=None if full_mask is None else full_mask[:, :past],
                  position_ids=torch.arange(past)[None].expand(batch, -1), cache=cache, use_cache=True)
        model(inputs_embeds=torch.randn(batch, t, width, generator=gen), attention_mask=full_mask,
              position_ids=torch.tensor(ids), cache=cache, use_cache=past > 0)


# --------------------------------------------------------------------------------------- Llama 4 temperature
def _llama4():
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model("llama4_text", hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
                                  head_dim=8, num_hidden_layers=4, intermediate_size=16, intermediate_size_mlp=16,
                                  vocab_size=32, num_local_experts=1, floor_scale=4, attn_temperature_tuning=True,
                                  attention_chunk_size=None)
    config._attn_implementation = "eager"
    model = AutoModel.from_config(config).eval()
    layer = next(i for i, rotates in enumerate(config.no_rope_layers) if not rotates)
    return model, layer, refpos.model_positions(config.to_dict()).stack("decoder")[layer]


def llama4_scales(ids, mask, past, monkeypatch):
    """The query scale Llama 4's NoPE layer applied to each token: its query after the scale over its q_proj."""
    from transformers.models.llama4 import modeling_llama4

    store: dict = {}
    monkeypatch.setattr(modeling_llama4, "eager_attention_forward", _capture(store))
    model, layer, record = _llama4()
    projected = []
    hook = model.layers[layer].self_attn.q_proj.register_forward_hook(
        lambda module, args, out: projected.append(out.detach().clone()))
    try:
        _run(model, ids, mask, past, 16)
    finally:
        hook.remove()
    query = store[layer][-1][0].transpose(1, 2).double()  # (B, T, H, d)
    raw = projected[-1].double().view(query.shape)
    return (query / raw).mean(dim=(2, 3)).numpy(), record


@pytest.mark.parametrize("name, ids, mask, past", CASES, ids=[c[0] for c in CASES])
def test_llama4_temperature_is_the_slot_s(name, ids, mask, past, monkeypatch):
    theirs, record = llama4_scales(ids, mask, past, monkeypatch)
    t = len(ids[0])
    slots = np.arange(past, past + t)
    inputs = {"attention_mask": np.asarray(mask)} if mask is not None else {"cache_position": slots}
    ours = np.broadcast_to(record.scale(np.asarray(ids), **inputs), theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=6 * ULP, atol=0)
    assert record.reads == (("scale", ("cache_position",)),)
    with pytest.raises(ValueError, match="cache_position="):
        record.scale(np.asarray(ids))  # ids alone are refused, never read as slots


def test_llama4_temperature_at_the_id_was_wrong(monkeypatch):
    """The old reading — the scale at the position id — differs from transformers where ids are not slots."""
    theirs, record = llama4_scales([[0, 1, 2, 3, 4, 32767]], None, 0, monkeypatch)
    at_ids = record.query_scale(np.array([0, 1, 2, 3, 4, 32767]))  # the rule at p = the id
    assert abs(at_ids[-1] - theirs[0, -1]) > 0.1


# ------------------------------------------------------------------------------------------------ Falcon ALiBi
def _falcon():
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model("falcon", hidden_size=32, num_attention_heads=4, num_hidden_layers=1,
                                  vocab_size=32, alibi=True, new_decoder_architecture=False, multi_query=False,
                                  parallel_attn=True, bias=False)
    config._attn_implementation = "sdpa"  # the mask it hands the layer is the bias attention adds, once
    return AutoModel.from_config(config).eval(), refpos.model_positions(config.to_dict()).layers[0]


def falcon_bias(ids, mask, past, monkeypatch=None):
    """The ALiBi bias Falcon adds to its scaled logits — the mask its model hands the layer, b/√d where allowed
    (``FalconModel.forward`` puts the bias there) — and the entries it allows."""
    model, record = _falcon()
    handed = []
    model.h[0].register_forward_pre_hook(lambda module, args, kwargs: handed.append(kwargs["attention_mask"]),
                                         with_kwargs=True)
    _run(model, ids, mask, past, 32)
    added = handed[-1].double().numpy()  # (B, H, T, T_k)
    allowed = added > torch.finfo(torch.float32).min / 2
    return added, allowed, record


@pytest.mark.parametrize("name, ids, mask, past", CASES, ids=[c[0] for c in CASES])
def test_falcon_alibi_reads_the_mask_s_running_count(name, ids, mask, past, monkeypatch):
    added, allowed, record = falcon_bias(ids, mask, past, monkeypatch)
    t = len(ids[0])
    full = np.asarray(mask) if mask is not None else np.ones((len(ids), past + t), dtype=np.int64)
    ours = record.bias(np.asarray(ids), attention_mask=full) / math.sqrt(record.head_dim)  # (B, H, T, T_k)
    real = full[:, None, past:].astype(bool)  # (B, 1, T): the queries that are not padding
    assert allowed.any(axis=-1)[np.broadcast_to(real, allowed.shape[:-1])].all()  # each attends: compared there
    np.testing.assert_allclose(ours[allowed], added[allowed], rtol=3 * ULP, atol=0)
    assert record.reads == (("key", ("mask_cumsum",)),)
    with pytest.raises(ValueError, match="attention_mask="):
        record.bias(np.asarray(ids))  # ids alone are refused, never read as the keys' positions


def test_falcon_alibi_at_the_ids_was_wrong(monkeypatch):
    """The old reading — each key's slope times its position id — is off by 510 at (0…6, 2047)."""
    ids = [[0, 1, 2, 3, 4, 5, 6, 2047]]
    added, allowed, record = falcon_bias(ids, None, 0, monkeypatch)
    old = record.bias_at(np.asarray(ids[0]), np.asarray(ids[0]))[None] / math.sqrt(record.head_dim)
    assert np.abs(old - added)[allowed].max() * math.sqrt(record.head_dim) > 500


# ---------------------------------------------------------------------------- π0's and π0.5's prefix and expert
def _pi(model_type):
    from transformers import AutoConfig, AutoModel

    if model_type not in transformers.models.auto.configuration_auto.CONFIG_MAPPING_NAMES:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    gemma = {"model_type": "gemma", "hidden_size": 16, "num_hidden_layers": 2, "intermediate_size": 16,
             "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8}
    config = AutoConfig.for_model(
        model_type, chunk_size=3, max_action_dim=4, dit_config=gemma,
        vlm_config={"model_type": "paligemma", "text_config": {**gemma, "vocab_size": 64}, "projection_dim": 16,
                    "image_token_id": 63, "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 16,
                                                            "intermediate_size": 16, "num_hidden_layers": 1,
                                                            "num_attention_heads": 2, "patch_size": 4,
                                                            "image_size": 8}})
    return AutoModel.from_config(config).eval(), refpos.model_positions(config.to_dict())


def _ids_reaching(rotary, seen):
    rotary.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs.get("position_ids", args[1] if len(args) > 1 else None)),
        with_kwargs=True)


def pi_positions(model_type, prefix_mask):
    """The positions π0's (or π0.5's) VLM turns its prefix of 5 tokens by and its action expert its chunk of 3
    actions by, run as ``PI0Model.forward`` runs them: the prefix's embeddings handed with pixels (so that the
    VLM runs) and no ids, then the chunk after the prefix's cache."""
    model, resolved = _pi(model_type)
    gen = torch.Generator().manual_seed(0)
    mask = None if prefix_mask is None else torch.tensor(prefix_mask)
    prefix_seen, expert_seen = [], []
    _ids_reaching(model.vlm.language_model.rotary_emb, prefix_seen)
    _ids_reaching(model.dit.rotary_emb, expert_seen)
    with torch.no_grad():
        model(action_embeds=torch.randn(2, 3, 16, generator=gen), inputs_embeds=torch.randn(2, 5, 16, generator=gen),
              pixel_values=torch.zeros(1), attention_mask=mask, timestep_embeds=torch.randn(2, 16, generator=gen))
    return (np.broadcast_to(prefix_seen[-1].numpy(), (2, 5)), np.broadcast_to(expert_seen[-1].numpy(), (2, 3)),
            resolved)


MASKS = [[[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], [[1, 0, 1, 1, 1], [1, 1, 0, 1, 1]], None]


@pytest.mark.parametrize("prefix_mask", MASKS, ids=["left-padded", "a hole", "no mask"])
@pytest.mark.parametrize("model_type", ["pi0", "pi05"])
def test_pi_prefix_and_action_expert(model_type, prefix_mask):
    """The prefix reads the ids, else ``Σm − 1`` (``mask_cumsum_minus_one``: −1 at left padding, the count so
    far at a hole; neither BLOOM's nor OPT's count), else PaliGemma's slot plus one; the action expert continues
    the prefix's mask count over its chunk, or its slots after the prefix's cache."""
    prefix, chunk, resolved = pi_positions(model_type, prefix_mask)
    vlm, expert = resolved.layers[0], resolved.stack("dit")
    assert len(expert) == 2 and all(layer.reads == (("rotation", ("mask_cumsum", "cache_position")),)
                                    for layer in expert)
    if prefix_mask is None:
        ours_prefix = vlm.rotation_positions(length=5)
        ours = expert[0].rotation_positions(cache_position=np.arange(5, 8))  # the slots after the prefix's cache
    else:
        mask = np.asarray(prefix_mask)
        ours_prefix = vlm.rotation_positions(attention_mask=mask)
        ours = expert[0].rotation_positions(attention_mask=np.concatenate([mask, np.ones((2, 3), np.int64)], 1),
                                            length=3)
        if prefix_mask == MASKS[1]:  # at a hole neither BLOOM's count (0 there) nor OPT's (−1) is the model's
            for wrong in ((np.cumsum(mask, -1) - 1) * mask, np.cumsum(mask, -1) * mask - 1):
                assert not np.array_equal(wrong, prefix)
    np.testing.assert_array_equal(np.broadcast_to(ours_prefix, (2, 5)), prefix)  # integers: exact
    np.testing.assert_array_equal(np.broadcast_to(ours, (2, 3)), chunk)
    assert not np.array_equal(np.broadcast_to(np.arange(3), (2, 3)), chunk)  # a fresh sequence's 0, 1, 2 is wrong
    with pytest.raises(ValueError, match=r"attention_mask=|cache_position="):
        expert[0].rotation_positions(np.arange(3))  # ids alone: not what the expert reads


@pytest.mark.parametrize("past", [0, 3], ids=["fresh", "after a cache"])
def test_paligemma_given_no_ids_turns_each_token_by_its_slot_plus_one(past):
    """PaliGemma's language model, run by ``PaliGemmaModel.forward`` with no ids (a cache of ``past`` tokens
    before): the ids reaching its rotary table are the slots plus one, refpos's ``("position_ids",
    "slot_plus_one")``; Gemma's own reading (the slot) is one place off."""
    from transformers import AutoConfig, AutoModel

    gemma = {"model_type": "gemma", "hidden_size": 16, "num_hidden_layers": 1, "intermediate_size": 16,
             "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 64}
    config = AutoConfig.for_model("paligemma", text_config=gemma, projection_dim=16, image_token_id=63,
                                  vision_config={"model_type": "siglip_vision_model", "hidden_size": 16,
                                                 "intermediate_size": 16, "num_hidden_layers": 1,
                                                 "num_attention_heads": 2, "patch_size": 4, "image_size": 8})
    model = AutoModel.from_config(config).eval()
    seen = []
    model.language_model.rotary_emb.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs.get("position_ids", args[1] if len(args) > 1 else None)),
        with_kwargs=True)
    ids = torch.arange(1, 9).reshape(1, 8)
    with torch.no_grad():
        cache = model(input_ids=ids[:, :past], use_cache=True).past_key_values if past else None
        model(input_ids=ids[:, past:], past_key_values=cache, use_cache=True)
    theirs = seen[-1].numpy().reshape(-1)
    layer = refpos.model_positions(config.to_dict()).layers[0]
    ours = layer.rotation_positions(cache_position=np.arange(past, 8))
    np.testing.assert_array_equal(ours, theirs)  # integers: exact
    assert not np.array_equal(np.arange(past, 8), theirs)  # the slot, Gemma's reading, is wrong


@pytest.mark.parametrize("module", ["opt.modeling_opt.OPTLearnedPositionalEmbedding"])
@pytest.mark.parametrize(("mask", "past"), [([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]], 0),
                                            ([[0, 1, 1, 0, 1, 0, 1]], 4)])
def test_opt_tables_read_the_mask_count_with_padding_at_minus_one(module, mask, past):
    """OPT's table, given no ids, reads ``Σm·m − 1`` (−1 at padding, its row the offset less one): refpos's
    ``mask_count``, every token's row the module's (padding included, a cache's tokens left out); the ``(Σm − 1)·m``
    of BLOOM's ALiBi (0 at padding) reads another row at each padding token. ``OPTDecoder.forward`` hands the
    module the mask and no ids where it is given none."""
    path, name = module.rsplit(".", 1)
    embedding = getattr(__import__(f"transformers.models.{path}", fromlist=[name]), name)(16, 1)
    with torch.no_grad():
        embedding.weight.copy_(torch.arange(18, dtype=torch.float32)[:, None])  # row r holds r
        read = embedding(torch.tensor(mask), past)[..., 0].numpy().astype(np.int64)
    config = {"model_type": path.split(".")[0], "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
              "ffn_dim": 8, "intermediate_size": 8, "max_position_embeddings": 16, "word_embed_proj_dim": 8}
    layer = refpos.model_positions(config).layers[0]
    assert layer.reads == (("rows", ("position_ids", "mask_count")),)
    slots = np.arange(past, len(mask[0]))  # the call's tokens: those after the cache
    assert np.array_equal(layer.rows(attention_mask=mask, cache_position=slots), read)
    bloom_form = (np.cumsum(mask, axis=-1) - 1) * np.asarray(mask)
    assert not np.array_equal(bloom_form[..., past:] + 2, read)


@pytest.mark.parametrize(("mask", "past"), [([[0, 0, 1, 1, 1, 1]], 0), ([[0, 1, 1, 0, 1, 0, 1]], 4)])
def test_biogpt_given_no_ids_reads_the_slot(mask, past):
    """BioGPT's model, given no ids, builds them from the slot (``BioGptModel.forward``: ``arange(T) +
    cache_length``) and hands them to its table, whose own mask count is then never read: every token's row is its
    slot + 2, padding included, refpos's ``("position_ids", "cache_position")``; OPT's ``mask_count`` reads other
    rows at the padding."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model("biogpt", vocab_size=64, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=8, max_position_embeddings=16)
    model = AutoModel.from_config(config).eval()
    with torch.no_grad():
        model.embed_positions.weight.copy_(torch.arange(18, dtype=torch.float32)[:, None].expand(18, 8))
    read = []
    model.embed_positions.register_forward_hook(lambda module, args, out: read.append(out[..., 0]))
    ids = torch.arange(1, len(mask[0]) + 1).reshape(1, -1)
    with torch.no_grad():
        cache = model(input_ids=ids[:, :past], attention_mask=torch.tensor(mask)[:, :past],
                      use_cache=True).past_key_values if past else None
        model(input_ids=ids[:, past:], attention_mask=torch.tensor(mask), past_key_values=cache, use_cache=True)
    theirs = read[-1].numpy().astype(np.int64).reshape(-1)
    layer = refpos.model_positions(config.to_dict()).layers[0]
    assert layer.reads == (("rows", ("position_ids", "cache_position")),)
    slots = np.arange(past, len(mask[0]))
    np.testing.assert_array_equal(layer.rows(attention_mask=mask, cache_position=slots).reshape(-1), theirs)
    counted = np.cumsum(mask, axis=-1) * np.asarray(mask) - 1
    assert not np.array_equal(counted[..., past:].reshape(-1) + 2, theirs)  # OPT's reading is wrong here
