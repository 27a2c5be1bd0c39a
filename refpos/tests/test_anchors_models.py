"""Anchors: refpos.model_positions against transformers' own code, for the families of every encoding.

Each family's config is the one its transformers 5.24 config class writes for the checkpoint its docstring
names (``AutoConfig.for_model(model_type).to_dict()``: what a config.json of that class holds), shrunk where
a tiny model has to be built. refpos reads that dict; transformers runs its own position code on the same
config: its ALiBi builders, its bucket functions, its position-embedding modules (looked up at the
positions its forward uses), DeBERTa's relative positions, and, for the hybrids, the model's own modules
(whether its attention layers have a rotary embedding at all).

Tolerances: integers (buckets, rows, indices) and the ALiBi biases the family rounds itself compare exactly;
a sinusoid transformers computes or stores in float32 differs from the float64 one by the float32 rounding of
angles up to ``p·ω`` and of the values: ``(p_max + 1)·2^-24`` bounds it.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import refpos

torch = pytest.importorskip("torch", reason="the model anchors run transformers (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="the model anchors run transformers")
from transformers import AutoConfig, AutoModel  # noqa: E402

from refpos.tests.model_anchors import model_class  # noqa: E402

pytestmark = pytest.mark.anchors


def hf_config(model_type: str, **small) -> tuple[object, dict]:
    """transformers' config (class defaults, ``small`` overrides) and the dict a config.json of it holds."""
    config = AutoConfig.for_model(model_type, **small)
    return config, config.to_dict()


def positions_of(config: dict):
    return refpos.model_positions(config)


# ------------------------------------------------------------------------------------------------ ALiBi
@pytest.mark.parametrize("model_type, heads, extra", [
    ("bloom", 12, {}), ("bloom", 6, {}), ("bloom", 112, {}), ("falcon", 8, {"alibi": True}),
    ("falcon", 6, {"alibi": True}), ("falcon", 71, {"alibi": True}),
])
def test_alibi_bias_is_the_family_builder(model_type, heads, extra):
    """BLOOM builds float32 slopes × key index; Falcon rounds slopes and products to bfloat16."""
    _, config = hf_config(model_type, num_attention_heads=heads, hidden_size=heads * 8, **extra)
    layer = positions_of(config).layers[0]
    module = __import__(f"transformers.models.{model_type}.modeling_{model_type}", fromlist=["build_alibi_tensor"])
    length = 2048  # past 256 Falcon's bfloat16 holds the key index itself rounded (2047 as 2048)
    theirs = module.build_alibi_tensor(torch.ones(1, length, dtype=torch.long), heads, torch.float32)
    theirs = theirs.reshape(heads, length).double().numpy()
    ours = layer.bias(attention_mask=np.ones(length))[:, -1, :]  # every row equal: the mask's count, all ones
    np.testing.assert_array_equal(ours, theirs)
    assert layer.before_scale is (model_type == "falcon")


def test_mpt_bias_is_build_mpt_alibi_tensor():
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    _, config = hf_config("mpt", n_heads=6, d_model=48)
    layer = positions_of(config).layers[0]
    theirs = build_mpt_alibi_tensor(6, 40).reshape(6, 40).double().numpy()  # anchored at the last key
    np.testing.assert_array_equal(layer.bias(attention_mask=np.ones(40))[:, -1, :], theirs)


# -------------------------------------------------------------------------------------------------- T5
@pytest.mark.parametrize("model_type", ["t5", "mt5", "umt5", "switch_transformers", "pop2piano"])
def test_t5_buckets_and_table_owners_are_the_model_s(model_type):
    _, config = hf_config(model_type, num_layers=3, num_decoder_layers=3, num_heads=2, d_model=16, d_ff=16,
                          d_kv=8, vocab_size=64, num_experts=2)
    hf = AutoConfig.for_model(model_type, **{k: v for k, v in config.items() if k != "model_type"})
    model = (transformers.Pop2PianoForConditionalGeneration(hf) if model_type == "pop2piano"
             else AutoModel.from_config(hf))
    resolved = positions_of(config)
    rel = torch.arange(-300, 301)[None, :]
    for stack_name, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        for layer, block in zip(resolved.stack(stack_name), stack.block, strict=True):
            attention = block.layer[0].SelfAttention
            assert layer.owns_table is attention.has_relative_attention_bias
            if not attention.has_relative_attention_bias:
                continue
            if model_type == "umt5":
                theirs = attention._relative_position_bucket(rel)
            else:
                theirs = attention._relative_position_bucket(rel, bidirectional=not attention.is_decoder,
                                                             num_buckets=attention.relative_attention_num_buckets,
                                                             max_distance=attention.relative_attention_max_distance)
            ours = np.asarray(refpos.encodings.t5_bucket(rel.numpy(), bidirectional=layer.bidirectional,
                                                         num_buckets=layer.num_buckets,
                                                         max_distance=layer.max_distance))
            np.testing.assert_array_equal(ours, theirs.numpy())


# -------------------------------------------------------------------------------- learned and sinusoidal
def _rows_read(module, call) -> np.ndarray:
    """The rows a position-embedding module reads: its table set to the row index, then called."""
    with torch.no_grad():
        weight = module.weight if hasattr(module, "weight") else module.weights
        weight.zero_()
        weight[:, 0] = torch.arange(weight.shape[0], dtype=weight.dtype)
        return call(module)[..., 0].reshape(-1).double().numpy()


LEARNED = [
    ("opt", {}, lambda m: m.decoder.embed_positions, lambda e: e(torch.ones(1, 12, dtype=torch.long))),
    ("bart", {}, lambda m: m.encoder.embed_positions, lambda e: e(torch.zeros(1, 12, dtype=torch.long))),
    ("mbart", {}, lambda m: m.decoder.embed_positions, lambda e: e(torch.zeros(1, 12, dtype=torch.long))),
    ("biogpt", {}, lambda m: m.embed_positions, lambda e: e(torch.ones(1, 12, dtype=torch.long))),
    ("gpt2", {}, lambda m: m.wpe, lambda e: e(torch.arange(12))),
    ("gpt_bigcode", {}, lambda m: m.wpe, lambda e: e(torch.arange(12))),
    ("whisper", {}, lambda m: m.decoder.embed_positions, lambda e: e(torch.zeros(1, 12, dtype=torch.long))),
]


@pytest.mark.parametrize("model_type, extra, module_of, call", LEARNED, ids=[row[0] for row in LEARNED])
def test_learned_rows_and_table_size_are_the_model_s(model_type, extra, module_of, call):
    small = {"hidden_size": 16, "d_model": 16, "n_embd": 16, "num_hidden_layers": 1, "n_layer": 1,
             "encoder_layers": 1, "decoder_layers": 1, "num_attention_heads": 2, "n_head": 2,
             "encoder_attention_heads": 2, "decoder_attention_heads": 2, "ffn_dim": 16, "encoder_ffn_dim": 16,
             "decoder_ffn_dim": 16, "intermediate_size": 16, "vocab_size": 52000, "word_embed_proj_dim": 16,
             "num_mel_bins": 8, **extra}
    hf, config = hf_config(model_type, **small)
    model = AutoModel.from_config(hf)
    module = module_of(model)
    layer = next(r for r in positions_of(config) if r.kind == "learned" and (
        model_type != "whisper" or r.stack == "decoder"))
    np.testing.assert_array_equal(layer.rows(np.arange(12)), _rows_read(module, call))
    assert layer.table_size == module.weight.shape[0]


def test_sinusoids_are_the_model_s_tables():
    small = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
             "decoder_attention_heads": 2, "encoder_ffn_dim": 16, "decoder_ffn_dim": 16, "vocab_size": 58200,
             "num_mel_bins": 8}
    for model_type, module_of in (("marian", lambda m: m.encoder.embed_positions.weight),
                                  ("pegasus", lambda m: m.encoder.embed_positions.weight),
                                  ("whisper", lambda m: m.encoder.embed_positions.weight)):
        hf, config = hf_config(model_type, **small)
        table = module_of(AutoModel.from_config(hf)).detach().double().numpy()
        layer = positions_of(config).stack("encoder")[0]
        p = np.arange(table.shape[0])
        bound = (p.max() + 1) * 2.0**-24 * 2
        np.testing.assert_allclose(layer.sinusoid(p), table, rtol=0, atol=bound, err_msg=model_type)
        assert layer.table_size == table.shape[0]
    for model_type in ("m2m_100", "nllb-moe", "speech_to_text"):
        hf, config = hf_config(model_type, **small, num_experts=2, expert_capacity=2, input_feat_per_channel=8,
                               max_source_positions=64)
        model = AutoModel.from_config(hf)
        embed = model.encoder.embed_positions
        layer = positions_of(config).stack("encoder")[0]
        rows = layer.rows_at(np.arange(40))  # padding_idx + 1 + p
        np.testing.assert_allclose(layer.sinusoid(np.arange(40)), embed.weights[rows].double().numpy(), rtol=0,
                                   atol=(rows.max() + 1) * 2.0**-24 * 2, err_msg=model_type)


# ---------------------------------------------------------------------------------------------- DeBERTa
def test_deberta_v3_relative_rows_are_the_model_s():
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    _, config = hf_config("deberta-v2", relative_attention=True, position_buckets=256, max_relative_positions=-1,
                          pos_att_type="p2c|c2p", share_att_key=True, position_biased_input=False)
    layer = positions_of(config).layers[0]
    length, span = 600, layer.params()["attention_span"]
    q = torch.zeros(1, length, 4)
    relative = build_relative_position(q, q, bucket_size=256, max_position=512)[0]  # query − key, bucketed
    theirs = torch.clamp(relative + span, 0, span * 2 - 1).numpy()  # c2p_pos of DisentangledSelfAttention
    np.testing.assert_array_equal(layer.relative_index(cache_position=np.arange(length)), theirs)
    assert layer.pos_att_type == ("p2c", "c2p") and layer.share_att_key


# -------------------------------------------------------------------------------------------- hybrids
def _has_rotary(model) -> bool:
    """Whether any module of the model is a rotary embedding that is used (transformers sets it None if not)."""
    return any("Rotary" in type(m).__name__ for m in model.modules())


HYBRIDS = [
    ("granitemoehybrid", {"position_embedding_type": "nope", "layer_types": ["mamba", "attention"]}),
    ("jamba", {"attn_layer_period": 2, "attn_layer_offset": 1}),
    ("nemotron_h", {"hybrid_override_pattern": "M*"}),
    ("zamba2", {"layers_block_type": ["mamba", "hybrid"], "use_mem_rope": False}),
    ("kimi_linear", {"linear_attn_config": {"full_attn_layers": [2], "kda_layers": [1], "head_dim": 16,
                                            "num_heads": 2, "short_conv_kernel_size": 4}}),
]


@pytest.mark.parametrize("model_type, extra", HYBRIDS, ids=[row[0] for row in HYBRIDS])
def test_hybrid_attention_layers_carry_no_positions(model_type, extra):
    small = {"hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 32,
             "num_hidden_layers": 2, "vocab_size": 128, "pad_token_id": 0, "mamba_d_state": 8, "mamba_n_heads": 4,
             "n_mamba_heads": 2, "mamba_head_dim": 32, "num_experts": 2, "kv_lora_rank": 16, "q_lora_rank": None,
             "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, **extra}
    hf, config = hf_config(model_type, **small)
    model = AutoModel.from_config(hf)
    kinds = [r.label for r in positions_of(config)]
    assert "none" in kinds and "rope" not in kinds, kinds
    assert not _has_rotary(model) or getattr(model, "rotary_emb", None) is None


def test_zamba2_with_rope_rotates_at_its_attention_head_width():
    small = {"hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2, "vocab_size": 128,
             "layers_block_type": ["mamba", "hybrid"], "use_mem_rope": True, "mamba_d_state": 8, "n_mamba_heads": 2}
    hf, config = hf_config("zamba2", **small)
    model = AutoModel.from_config(hf)
    layer = next(r for r in positions_of(config) if r.kind == "rope")
    rotary = next(m for m in model.modules() if "Rotary" in type(m).__name__)
    assert layer.rope.head_dim == 2 * rotary.inv_freq.numel() == 2 * 64 // 2  # 2·hidden/heads


# --------------------------------------------------------------------------------------------- wrappers
@pytest.mark.parametrize("model_type, nesting", [
    ("qwen2_5_omni", "thinker_config.text_config."), ("qwen3_omni_moe", "thinker_config.text_config."),
    ("voxtral", "text_config."),
])
def test_the_language_model_is_found_inside_its_wrapper(model_type, nesting):
    hf, config = hf_config(model_type)
    if model_type == "qwen3_omni_moe":  # the class's defaults are 2048 wide with 28 heads: give the head size
        config["thinker_config"]["text_config"]["head_dim"] = 128
    resolved = positions_of(config)
    text = hf.thinker_config.text_config if nesting.startswith("thinker") else hf.text_config
    decoder = [layer for layer in resolved.layers if layer.stack == "decoder"]  # the towers are stacks of their own
    assert resolved.nesting == nesting and len(decoder) == text.num_hidden_layers
    assert resolved.model_type == text.model_type


# ---------------------------------------------------------------------------------------------- meta tests
def test_the_alibi_anchor_breaks_without_the_family_rounding(monkeypatch):
    from refpos.models.kinds import alibi

    monkeypatch.setattr(alibi, "round_to", lambda a, dtype: np.asarray(a, dtype=np.float64))
    with pytest.raises(AssertionError):
        test_alibi_bias_is_the_family_builder("falcon", 8, {"alibi": True})


def test_the_learned_anchor_breaks_without_the_offset(monkeypatch):
    import dataclasses

    from refpos.models import families

    opt = families.FAMILIES["opt"]
    learned = dataclasses.replace(opt.positions.facts_of("learned"), offset=0)  # OPT's row without its offset of 2
    facts = tuple((name, learned if name == "learned" else value) for name, value in opt.positions.facts)
    monkeypatch.setitem(families.FAMILIES, "opt", dataclasses.replace(
        opt, positions=dataclasses.replace(opt.positions, facts=facts)))
    with pytest.raises(AssertionError):
        test_learned_rows_and_table_size_are_the_model_s(*LEARNED[0])


ENCODER_TABLES = [row.model_type for row in refpos.models.families.FAMILY_ROWS
                  if row.stacks == "encoder" and row.positions.encoding == "learned" and row.switch is None]


@pytest.mark.parametrize("model_type", ENCODER_TABLES)
def test_every_encoder_table_row_reads_the_model_s_rows(model_type):
    """Every learned-table encoder of the family table: a tiny model of its config class runs 10 tokens, the first
    two of them padding, a hook on its position table records the rows it reads; refpos, given the same input ids,
    reads those rows (the RoBERTa families count the non-padding ids, the others read the token's slot), and the
    table's length is the model's. Given gapped position ids, refpos reads the model's rows too: the RoBERTa
    families read an id passed as its row, the others the id plus their offset."""
    small = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
             "vocab_size": 64, "pad_token_id": 1, "embedding_size": 16, "max_position_embeddings": 40,
             "attention_window": 4}
    hf = AutoConfig.for_model(model_type, **small)
    model = model_class(hf)(hf).eval()  # a tower's class where AutoModel maps none (SigLIP's text model)
    if model_type == "xmod":
        model.set_default_language(hf.languages[0])
    table = next(m for name, m in model.named_modules() if name.endswith(("position_embeddings", "position_embedding")))
    seen = []
    table.register_forward_hook(lambda module, args, out: seen.append(args[0].reshape(-1).tolist()))
    ids = torch.cat([torch.ones(1, 2, dtype=torch.long), torch.arange(2, 10)[None, :]], dim=1)  # pad_token_id 1
    with torch.no_grad():
        model(input_ids=ids, attention_mask=(ids != 1).long())
    # the table's record (LayoutLM's box tables come first, at the input)
    layer = next(r for r in positions_of(hf.to_dict()).layers if r.kind == "learned")
    inputs = {"input_ids": ids.numpy(), "cache_position": np.arange(10), "attention_mask": (ids != 1).long().numpy()}
    read = layer.rows(**{k: v for k, v in inputs.items() if k != "cache_position" or
                         "input_ids_cumsum" not in layer.source("rows")})
    assert read.reshape(-1).tolist() == seen[0][:10]
    assert layer.table_size == table.weight.shape[0]
    # ids passed: the RoBERTa families read them as rows (refpos's row_ids), the others add their offset
    if "position_ids" not in inspect.signature(model.forward).parameters:
        return  # a forward that takes no ids (DPR's, AIMv2's text model): the slot is all it reads
    ids_passed = torch.tensor([[2, 3, 4, 6, 9, 13, 17, 20, 24, 30]])
    with torch.no_grad():
        model(input_ids=ids, position_ids=ids_passed)
    assert layer.rows(positions=ids_passed.numpy()).reshape(-1).tolist() == seen[-1][:10]


def test_ctrl_fsmt_xlm_and_led_positions_are_the_model_s():
    """CTRL's pos_encoding buffer, FSMT's fairseq table from padding_idx + 1, XLM's sinusoid switch, LED's
    two tables."""
    small = {"n_embd": 16, "n_layer": 1, "n_head": 2, "dff": 16, "vocab_size": 64, "n_positions": 300}
    hf, config = hf_config("ctrl", **small)
    table = AutoModel.from_config(hf).pos_encoding.double().numpy()
    layer = positions_of(config).layers[0]
    np.testing.assert_allclose(layer.sinusoid(np.arange(300)), table, rtol=0, atol=300 * 2.0**-24 * 2)
    hf, config = hf_config("fsmt", d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, src_vocab_size=64,
                           tgt_vocab_size=64, max_position_embeddings=64)
    embed = AutoModel.from_config(hf).encoder.embed_positions
    layer = positions_of(config).stack("encoder")[0]
    rows = layer.rows(np.arange(40))
    np.testing.assert_allclose(layer.sinusoid(np.arange(40)), embed.weight[rows].double().detach().numpy(),
                               rtol=0, atol=(rows.max() + 1) * 2.0**-24 * 2)
    hf, config = hf_config("xlm", emb_dim=16, n_layers=1, n_heads=2, vocab_size=64, sinusoidal_embeddings=True,
                           max_position_embeddings=64)
    table = AutoModel.from_config(hf).position_embeddings.weight.double().detach().numpy()
    layer = positions_of(config).layers[0]
    assert layer.kind == "sinusoidal"
    np.testing.assert_allclose(layer.sinusoid(np.arange(64)), table, rtol=0, atol=64 * 2.0**-24 * 2)
    hf, config = hf_config("led", d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, vocab_size=64,
                           max_encoder_position_embeddings=64, max_decoder_position_embeddings=32,
                           attention_window=[4])
    model = AutoModel.from_config(hf)
    resolved = positions_of(config)
    assert resolved.stack("encoder")[0].table_size == model.encoder.embed_positions.weight.shape[0] == 64
    assert resolved.stack("decoder")[0].table_size == model.decoder.embed_positions.weight.shape[0] == 32


def test_roformer_rotation_is_the_model_s():
    """RoFormer turns adjacent channel pairs by its sinusoid table's angles at the slots after the cache
    (RoFormerSelfAttention.apply_rotary_position_embeddings): refpos's interleaved RoPE at base 10000 gives the same
    queries and keys within the table's float32 rounding (|Δ| ≤ 1e-6 on unit-scale inputs)."""
    config = AutoConfig.for_model("roformer", hidden_size=32, num_attention_heads=2, num_hidden_layers=1,
                                  intermediate_size=16, vocab_size=64, max_position_embeddings=64)
    model = AutoModel.from_config(config).eval()
    cached, length = 3, 10
    table = model.encoder.embed_positions((1, length), cached)[None, None].double()
    q, k = torch.randn(2, 1, 2, length, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    want_q, want_k = type(model.encoder.layer[0].attention.self).apply_rotary_position_embeddings(table, q, k)
    (layer,) = positions_of(config.to_dict()).layers
    slots = np.arange(cached, cached + length)
    got_q, got_k = layer.encoding().rotate(q.numpy()[0], k.numpy()[0], slots, slots)
    assert np.abs(got_q - want_q.numpy()[0]).max() < 1e-6 and np.abs(got_k - want_k.numpy()[0]).max() < 1e-6


def test_mpnet_bias_and_rows_are_the_model_s():
    """MPNet's encoder computes one bucket map (T5's bidirectional buckets, 32 of them, max distance 128) that every
    layer adds, and reads its table at the running count of the non-padding ids from padding_idx + 1 = 2: refpos's
    bias from the model's bucket table, and its rows, are the model's (the survey sees neither: the bias is
    computed once in MPNetEncoder, the table is the stack's input)."""
    from transformers.models.mpnet.modeling_mpnet import create_position_ids_from_input_ids

    config = AutoConfig.for_model("mpnet", hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                                  intermediate_size=16, vocab_size=64)
    model = AutoModel.from_config(config).eval()
    length = 150  # past max_exact and into the log-spaced buckets
    with torch.no_grad():
        want = model.encoder.compute_position_bias(torch.zeros(1, length, 32))[0].numpy()
    layers = positions_of(config.to_dict()).layers
    (rows_layer,) = [layer for layer in layers if layer.kind == "learned"]
    first = next(layer for layer in layers if layer.kind == "t5")
    table = model.encoder.relative_attention_bias.weight.detach().numpy().astype(np.float64)
    assert np.array_equal(np.asarray(first.bias(table, cache_position=np.arange(length))), want)
    ids = torch.tensor([[5, 7, 1, 9, 1, 1, 4, 3]])  # padding_idx 1
    assert np.array_equal(rows_layer.rows(input_ids=ids.numpy()), create_position_ids_from_input_ids(ids, 1).numpy())
