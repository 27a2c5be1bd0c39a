"""Layer facts of families whose layers differ from a plain decoder of identical RoPE layers, each checked on a
config of that family (what transformers 5.24's modeling file the family table cites does; the survey in
survey/ compares them against that code, layer by layer).
"""

from __future__ import annotations

import pytest

import refpos
from refpos.models import families

GEOMETRY = {"hidden_size": 64, "num_attention_heads": 4}


def test_openai_privacy_filter_pairs_neighbouring_channels():
    """``_apply_rotary_emb`` rotates x[..., ::2] against x[..., 1::2] and interleaves the result back."""
    layers = refpos.model_positions({"model_type": "openai_privacy_filter", "num_hidden_layers": 2, **GEOMETRY})
    assert {layer.rope.layout for layer in layers} == {"interleaved"}


def test_mllama_cross_attention_layers_have_no_positions():
    """The layers ``cross_attention_layers`` lists attend to the image states only (no self-attention, no
    RoPE); the others rotate."""
    config = {"model_type": "mllama_text_model", "num_hidden_layers": 6, "cross_attention_layers": [1, 4],
              **GEOMETRY}
    layers = refpos.model_positions(config).layers
    assert [layer.kind for layer in layers] == ["rope", "no_attention", "rope", "rope", "no_attention", "rope"]
    assert {layer.mixer for layer in layers if layer.kind == "no_attention"} == {"cross_attention"}


def test_mllama_without_its_cross_attention_list_is_refused_by_name():
    """Without ``cross_attention_layers`` the config class fills a default list refpos does not assume."""
    positions = refpos.model_positions({"model_type": "mllama_text_model", "num_hidden_layers": 4, **GEOMETRY})
    assert {layer.kind for layer in positions.layers} == {"refused"}
    assert "cross_attention" in positions.not_modelled["model_type"]


def test_bailing_hybrid_linear_attention_layers_have_no_positions():
    """Every ``layer_group_size``-th layer is full attention with RoPE; the others run a gated delta rule."""
    config = {"model_type": "bailing_hybrid", "num_hidden_layers": 6, "layer_group_size": 3, **GEOMETRY}
    kinds = [layer.kind for layer in refpos.model_positions(config).layers]
    assert kinds == ["no_attention", "no_attention", "rope", "no_attention", "no_attention", "rope"]
    given = {**config, "layer_types": ["full_attention", "linear_attention"] * 3}
    assert [layer.kind for layer in refpos.model_positions(given).layers] == ["rope", "no_attention"] * 3


def test_hrm_text_two_stacks_are_refused_by_name():
    """HRM runs an L and an H stack in cycles: not one stack of ``num_hidden_layers`` layers."""
    positions = refpos.model_positions({"model_type": "hrm_text", "num_hidden_layers": 4, **GEOMETRY})
    assert {layer.kind for layer in positions.layers} == {"refused"}
    assert "H_module" in positions.not_modelled["model_type"]


def test_a_listed_type_needs_a_list_or_a_period():
    """``listed`` names the listed layers' type, or every n-th layer's (Qwen4-Exp's indexed_attention); a character
    pattern names each type itself."""
    with pytest.raises(ValueError, match="listed"):
        families.LayerPattern(key="pattern", chars=(("M", "mamba"),), listed="cross_attention")
    from refpos.models.schedule import layer_types

    row = families.family_of("qwen4_exp_text")
    assert layer_types({"full_attention_interval": 2}, row, 4) == ["linear_attention", "indexed_attention"] * 2


@pytest.mark.parametrize("model_type", ["gemma4_text", "gemma4_unified_text", "embedding_gemma2_text"])
def test_gemma4_full_attention_layers_are_wider(model_type):
    """The config classes give full-attention layers ``global_head_dim`` (default 512) in ``per_layer_config``;
    sliding layers keep ``head_dim`` (default 256)."""
    config = {"model_type": model_type, "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "layer_types": ["sliding_attention", "full_attention"],
              "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                  "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}}
    heads = [layer.rope.head_dim for layer in refpos.model_positions(config).layers]
    assert heads == [256, 512]


def test_lfm3_conv_layers_have_no_attention():
    """LFM3's ``conv`` layers run a short convolution in place of attention; its attention layers rotate with
    the rope dict of their own type."""
    config = {"model_type": "lfm3", "num_hidden_layers": 3, **GEOMETRY,
              "layer_types": ["conv", "full_attention", "sliding_attention"],
              "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                  "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}}
    layers = refpos.model_positions(config).layers
    assert [layer.kind for layer in layers] == ["no_attention", "rope", "rope"]
    assert [layer.rope.theta for layer in layers[1:]] == [1000000.0, 10000.0]


def test_lara_mini_linear_attention_layers_have_no_positions():
    """LaRA-mini's ``linear_attention`` layers run a gated delta rule; only its sliding layers rotate."""
    config = {"model_type": "lara_mini", "num_hidden_layers": 3, **GEOMETRY,
              "layer_types": ["linear_attention", "sliding_attention", "full_attention"]}
    assert [layer.kind for layer in refpos.model_positions(config).layers] == ["no_attention", "rope", "none"]


def test_t5gemma_encoder_and_decoder_rotate_each_by_its_own_positions():
    """T5Gemma configures its encoder and decoder under the keys ``encoder`` and ``decoder`` (T5GemmaModuleConfig
    each, whatever the sections say): both stacks rotate, the encoder by the position ids (else its index), the
    decoder by its own ids (``decoder_position_ids``, else its slot), and each decoder layer's cross-attention over
    the encoder's states carries no positions."""
    geometry = {"num_hidden_layers": 2, "head_dim": 16, "num_attention_heads": 2, "hidden_size": 32}
    config = {"model_type": "t5gemma", "encoder": {**geometry, "is_decoder": False},
              "decoder": {**geometry, "is_decoder": True}}
    positions = refpos.model_positions(config)
    assert positions.complete and positions.summary().splitlines() == [
        "encoder layers 0-1: rope ×2", "decoder layers 0-1: rope ×2", "decoder cross-attention layers 0-1: none ×2"]
    encoder, decoder = positions.stack("encoder")[0], positions.stack("decoder")[0]
    assert dict(encoder.reads)["rotation"] == ("position_ids", "cache_position")
    assert dict(decoder.reads)["rotation"] == ("decoder_position_ids", "cache_position")
    assert decoder.rotation_positions(cache_position=[4, 5]).tolist() == [4, 5]
    assert decoder.rotation_positions([9, 10]).tolist() == [9, 10]  # the decoder's own ids, given to its layer


def test_zaya_convolved_queries_and_keys_are_refused_by_name():
    """ZAYA's CCA convolves queries and keys over the preceding tokens (the mask zeroes padding first) before
    the rotation: what a token attends with is not its position's alone, so its layers are refused by name."""
    positions = refpos.model_positions({"model_type": "zaya", "num_hidden_layers": 2, **GEOMETRY})
    assert {layer.kind for layer in positions.layers} == {"refused"}
    assert "causal convolution" in positions.not_modelled["model_type"]


def test_recurrent_gemma_blocks_repeat_over_the_layers():
    """block_types (absent: recurrent, recurrent, attention) repeated and cut at the layer count, as
    RecurrentGemmaConfig.layers_block_type; a block name without a type, or too few blocks, refused by name."""
    from refpos.models.schedule import layer_types

    row = families.family_of("recurrent_gemma")
    assert layer_types({}, row, 5) == ["linear_attention", "linear_attention", "sliding_attention"] + \
        ["linear_attention"] * 2
    assert layer_types({"block_types": ["attention", "recurrent"]}, row, 3) == \
        ["sliding_attention", "linear_attention", "sliding_attention"]
    for bad in (["mlp"], [], "recurrent"):
        with pytest.raises(ValueError, match="block_types"):
            layer_types({"block_types": bad}, row, 3)
    with pytest.raises(ValueError, match="fewer than its 101 layers"):
        layer_types({"block_types": ["attention"]}, row, 101)
    with pytest.raises(ValueError, match="cycle"):
        families.LayerPattern(key="block_types", chars=(("a", "full_attention"),), cycle=("a", "b"))
    layers = refpos.model_positions({"model_type": "recurrent_gemma", "num_hidden_layers": 3, "hidden_size": 64,
                                     "num_attention_heads": 2}).layers
    assert [r.kind for r in layers] == ["no_attention", "no_attention", "refused"]
    assert "RG-LRU" in layers[2].reason


def test_pocket_tts_codec_rotates_in_both_halves_of_its_flat_config():
    """Pocket TTS's codec derives its encoder and decoder halves from one flat config (every field shared): each
    half is one transformer of num_hidden_layers layers rotating at its position ids, else its slot (count =
    "each_stack"); another encoder–decoder row's RoPE stacks stay refused by name."""
    config = {"model_type": "pocket_tts_audio_tokenizer", "num_hidden_layers": 3, "num_attention_heads": 2,
              "hidden_size": 32, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}
    positions = refpos.model_positions(config)
    assert positions.summary().splitlines() == ["encoder layers 0-2: rope ×3", "decoder layers 0-2: rope ×3"]
    assert {(r.rope.head_dim, r.rope.theta) for r in positions.layers} == {(16, 1e4)}
    assert all(dict(r.reads)["rotation"] == ("position_ids", "cache_position") for r in positions.layers)
    two = {"model_type": "my_codec", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 32,
           "encoder_layers": 2, "decoder_layers": 2}
    stated = refpos.model_positions(two, assume={"encoding": "rope", "layout": "half", "stacks": "encoder-decoder"})
    assert {r.kind for r in stated.layers} == {"refused"}
    assert "encoder–decoder model are not modelled" in stated.layers[0].reason
