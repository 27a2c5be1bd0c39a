"""Every network of a composite config is answered or refused by name (refpos.models.parts, model_positions).

A composite nests one config per network; the language model is found through the wrappers, every other network
is a part with its stacks named for its place. A part whose model type the family table knows is resolved by its
own row (Qwen2-VL's vision tower); one it does not know is refused by name, layer by layer, and reported not
modelled — never left out. The model type of a part is the one transformers' config class builds there: a
composite that fixes the class (Qwen3-VL) wins over what an old hub config writes in the section.
"""

from __future__ import annotations

import pytest

import refpos
from refpos.models import families
from refpos.models.parts import parts_of
from refpos.models.view import ConfigView

TEXT = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16}
SIGLIP = {"model_type": "siglip_vision_model", "num_hidden_layers": 3, "num_attention_heads": 2, "hidden_size": 16}
#: a tower of a model type the family table does not know
UNKNOWN_TOWER = {**SIGLIP, "model_type": "not_a_vision_tower"}


def test_a_tower_the_table_does_not_know_is_refused_by_name():
    config = {"model_type": "paligemma", "text_config": TEXT, "vision_config": UNKNOWN_TOWER}
    positions = refpos.model_positions(config)
    assert positions.stacks == ("decoder", "vision")
    vision = positions.stack("vision")
    assert [r.kind for r in vision] == ["refused"] * 3
    assert "not_a_vision_tower" in vision[0].reason and "vision_config" in vision[0].reason
    assert "vision_config.model_type" in positions.not_modelled and not positions.complete
    assert positions.parts == (("vision", "vision_config", "not_a_vision_tower"),)
    with pytest.raises(ValueError, match="strict"):
        refpos.model_positions(config, strict=True)


def test_a_known_vision_tower_is_its_input_site_and_its_layers():
    positions = refpos.model_positions({"model_type": "paligemma", "text_config": TEXT, "vision_config": SIGLIP})
    assert positions.stacks == ("decoder", "vision.input", "vision") and positions.complete
    assert positions.summary().splitlines()[1:] == ["vision input: grid(bicubic)", "vision layers 0-2: none ×3"]


def test_a_known_tower_is_resolved_by_its_row():
    config = {"model_type": "qwen3_vl", "vision_config": {"model_type": "qwen3_vl", "depth": 2, "hidden_size": 64,
                                                          "num_heads": 4},
              "text_config": {**TEXT, "model_type": "qwen3_vl_text", "head_dim": 8,
                              "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1]}}}
    positions = refpos.model_positions(config)
    assert positions.summary().splitlines() == ["decoder layers 0-1: mrope ×2",
                                                "vision input: grid(bilinear_align_corners)",
                                                "vision layers 0-1: vision_rope(qwen2_vl) ×2"]
    # the hub writes model_type qwen3_vl in the vision section; Qwen3VLConfig builds Qwen3VLVisionConfig there
    assert positions.parts == (("vision", "vision_config", "qwen3_vl_vision"),) and positions.complete


def test_every_nested_network_is_a_part_and_settings_are_not():
    config = {"model_type": "omni", "thinker_config": {
        "model_type": "omni_thinker", "text_config": TEXT,
        "audio_config": {"model_type": "omni_audio", "encoder_layers": 2},
        "vision_config": {"model_type": "omni_vision", "depth": 2}},
        "talker_config": {**TEXT, "model_type": "omni_talker"},
        "token2wav_config": {"model_type": "omni_token2wav",  # a wrapper: its networks are the parts
                             "dit_config": {"model_type": "omni_dit", "num_hidden_layers": 1},
                             "bigvgan_config": {"model_type": "omni_bigvgan"}},
        "quantization_config": {"bits": 4}, "rope_scaling": {"rope_type": "default"}}
    parts = parts_of(ConfigView(config))
    assert [(p.name, p.key) for p in parts] == [
        ("audio", "thinker_config.audio_config"), ("vision", "thinker_config.vision_config"),
        ("talker", "talker_config"), ("token2wav.dit", "token2wav_config.dit_config"),
        ("token2wav.bigvgan", "token2wav_config.bigvgan_config")]
    positions = refpos.model_positions(config)
    assert positions.stacks == ("decoder", "audio", "vision", "talker", "token2wav.dit", "token2wav.bigvgan")
    assert [r.kind for r in positions.stack("talker")] == ["refused", "refused"]
    assert "omni_talker" in positions.stack("talker")[0].reason
    assert len(positions.stack("token2wav.bigvgan")) == 1  # no layer count: one record stands for the network


def test_a_composite_of_parts_alone_has_no_language_stack():
    config = {"model_type": "vision-encoder-decoder", "encoder": {**SIGLIP, "model_type": "vit"},
              "decoder": {"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 32}}
    positions = refpos.model_positions(config)
    assert positions.stacks == ("encoder.input", "encoder", "decoder")
    assert [r.kind for r in positions.stack("encoder.input")] == ["grid"]
    assert [r.kind for r in positions.stack("decoder")] == ["learned", "learned"]


def test_a_model_the_table_does_not_know_is_not_called_a_decoder():
    positions = refpos.model_positions({"model_type": "not_a_family", "num_hidden_layers": 2})
    assert positions.stacks == ("model",) and {r.kind for r in positions} == {"unknown"}


def test_a_composites_own_stage_is_not_modelled_and_its_other_layers_stand():
    """X-CLIP runs a multi-frame transformer of its own after its vision tower: its row's stage_unmodelled makes the
    answer incomplete, naming it under model_type, while the text model's and the tower's layers are answered (a
    wrapper's unmodelled would refuse them all)."""
    geometry = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16}
    config = {"model_type": "xclip", "text_config": {"model_type": "xclip_text_model", "max_position_embeddings": 77,
                                                     **geometry},
              "vision_config": {"model_type": "xclip_vision_model", **geometry}}
    positions = refpos.model_positions(config)
    assert not positions.complete and "multi-frame transformer" in positions.not_modelled["model_type"]
    assert {layer.kind for layer in positions.layers} >= {"learned", "grid", "none"}
    assert not any(layer.kind == "refused" for layer in positions.layers)
    with pytest.raises(ValueError, match="stage_unmodelled has the wrong type"):
        families.read_row("xclip", {"source": "x_clip/modeling_x_clip.py: XCLIPModel", "stacks": "none",
                                    "stage_unmodelled": 1})


def test_colpali_turns_its_paligemma_by_the_slot_plus_one():
    """ColPali's forward names no position ids, and PaliGemma then rotates by the slot plus one: the outer row says
    what its language model reads (position ids among its kwargs, else the slot plus one), not PaliGemma's answer
    for given ids; the vision tower resolved."""
    config = {"model_type": "colpali", "vlm_config": {"model_type": "paligemma", "text_config": TEXT,
                                                      "vision_config": SIGLIP}}
    positions = refpos.model_positions(config)
    decoder = [layer for layer in positions.layers if layer.stack == "decoder"]
    assert positions.complete and {layer.kind for layer in decoder} == {"rope"}
    assert dict(decoder[0].reads)["rotation"] == ("position_ids", "slot_plus_one")
    assert decoder[0].rotation_positions(cache_position=[0, 1, 2]).tolist() == [1, 2, 3]
    assert decoder[0].rotation_positions([5, 6, 7]).tolist() == [5, 6, 7]
    assert {layer.kind for layer in positions.layers if layer.stack == "vision"} == {"none"}
