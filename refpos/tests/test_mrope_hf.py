"""from_hf_config on M-RoPE configs (v4 rope_scaling with type mrope, v5 rope_parameters, text_config) and
vision_rope_from_hf_config."""

from __future__ import annotations

import pytest

import refpos
from refpos.models.hf import from_hf_config
from refpos.models.vision_towers import vision_rope_from_hf_config
from refpos.rope.vision import VisionRope

QWEN2_VL_V4 = {"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1e6,
               "max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
               "vision_config": {"embed_dim": 1280, "num_heads": 16}}
QWEN3_VL_V5 = {"model_type": "qwen3_vl",
               "vision_config": {"model_type": "qwen3_vl", "hidden_size": 1152, "num_heads": 16},
               "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096,
                               "num_attention_heads": 32, "max_position_embeddings": 262144,
                               "rope_parameters": {"rope_type": "default", "rope_theta": 5e6,
                                                   "mrope_section": [24, 20, 20], "mrope_interleaved": True}}}


def test_v4_type_mrope_is_default_with_sections():
    rope = from_hf_config(QWEN2_VL_V4, strict=True)
    assert (rope.rope_type, rope.mrope_section, rope.mrope_interleaved, rope.layout) == \
        ("default", (16, 24, 24), False, "half")
    assert rope.provenance["mrope_section"] == "config"
    assert any("'mrope' read as 'default'" in n for n in rope.notes)


def test_v5_rope_parameters_in_text_config():
    rope = from_hf_config(QWEN3_VL_V5, strict=True)
    assert (rope.theta, rope.head_dim, rope.mrope_section, rope.mrope_interleaved) == (5e6, 128, (24, 20, 20), True)
    assert rope.provenance["mrope_interleaved"] == "config (text_config)"  # the provenance names the nesting


def test_the_family_decides_the_assignment():
    config = {**QWEN3_VL_V5, "text_config": {**QWEN3_VL_V5["text_config"], "rope_parameters": {
        "rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20]}}}
    rope = from_hf_config(config)
    assert rope.mrope_interleaved is True and rope.provenance["mrope_interleaved"] == "default"
    flagged = from_hf_config({**QWEN2_VL_V4, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24],
                                                              "mrope_interleaved": True}})
    assert flagged.mrope_interleaved is False
    assert any("mrope_interleaved=True ignored" in n for n in flagged.notes)


def test_module_default_sections_and_glm_layout():
    glm = {"model_type": "glm4v", "text_config": {"model_type": "glm4v_text", "hidden_size": 4096,
                                                  "num_attention_heads": 32, "partial_rotary_factor": 0.5,
                                                  "rope_theta": 10000, "rope_scaling": {"type": "default"}}}
    rope = from_hf_config(glm)
    assert (rope.mrope_section, rope.layout, rope.rotary_dim) == ((8, 12, 12), "interleaved", 64)
    assert rope.provenance["mrope_section"] == "default"
    assert not any(n.startswith("partial rotary") for n in rope.notes)


def test_scaling_beside_sections():
    config = {**QWEN2_VL_V4, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "mrope_section": [16, 24, 24],
                                              "original_max_position_embeddings": 32768}}
    rope = from_hf_config(config, strict=True)
    assert (rope.rope_type, rope.factor, rope.mrope_section) == ("yarn", 4.0, (16, 24, 24))


def test_plain_configs_have_no_sections():
    rope = from_hf_config({"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28})
    assert rope.mrope_section is None and "mrope_section" not in rope.provenance


def test_bad_sections_are_named():
    with pytest.raises(ValueError, match="sums to 63"):
        from_hf_config({**QWEN2_VL_V4, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 23]}})


@pytest.mark.parametrize(("config", "want"), [
    (QWEN2_VL_V4, VisionRope("qwen2_vl", 80)),
    (QWEN3_VL_V5, VisionRope("qwen2_vl", 72)),
    ({"model_type": "mistral3", "vision_config": {"model_type": "pixtral", "hidden_size": 1024, "head_dim": 64,
                                                  "num_attention_heads": 16, "rope_theta": 10000.0}},
     VisionRope("pixtral", 64)),
    ({"model_type": "llama4", "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408,
                                                "num_attention_heads": 16, "rope_theta": 10000}},
     VisionRope("llama4", 88)),
])
def test_vision_towers(config, want):
    assert vision_rope_from_hf_config(config) == want


def test_vision_bad_input_is_named():
    with pytest.raises(ValueError, match="no vision_config"):
        vision_rope_from_hf_config({"model_type": "qwen2"})
    with pytest.raises(ValueError, match="not modelled"):
        vision_rope_from_hf_config({"model_type": "siglip", "vision_config": {"model_type": "siglip_vision_model"}})


def test_every_mrope_family_takes_its_layout_from_the_family_table():
    from refpos.models import families, mrope_hf

    for family in mrope_hf.MROPE_FAMILIES:
        row = families.family_of(f"{family}_text") or families.family_of(family)
        assert row is not None and row.multi_axis, family
        assert mrope_hf._family_layout(family) == row.layout
    assert mrope_hf._family_layout("glm4v") == "interleaved"  # glm4v/modeling_glm4v.py: rotate_half_llm
    assert mrope_hf._family_layout("ernie4_5_vl_moe") == "interleaved"  # rotate_half_text: adjacent pairs


QWEN3_5 = {"model_type": "qwen3_5", "vision_config": {"model_type": "qwen3_5", "hidden_size": 1152, "num_heads": 16},
           "text_config": {"model_type": "qwen3_5_text", "hidden_size": 1024, "head_dim": 256,
                           "num_attention_heads": 8, "num_hidden_layers": 4, "full_attention_interval": 4,
                           "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                               "mrope_interleaved": True, "mrope_section": [11, 11, 10]}}}
ERNIE_VL = {"model_type": "ernie4_5_vl_moe",
            "vision_config": {"model_type": "ernie4_5_vl_moe_vision", "hidden_size": 1280, "num_heads": 16},
            "text_config": {"model_type": "ernie4_5_vl_moe_text", "hidden_size": 2560, "num_attention_heads": 20,
                            "rope_parameters": {"rope_type": "default", "rope_theta": 5e5,
                                                "mrope_section": [22, 22, 20]}}}


def test_qwen3_5_is_interleaved_on_a_quarter_of_the_channels():
    rope = from_hf_config(QWEN3_5)
    assert (rope.mrope_section, rope.mrope_scheme, rope.rotary_dim, rope.placement, rope.layout) == \
        ((11, 11, 10), "interleaved", 64, "first", "half")
    assert not any(n.startswith("partial rotary") for n in rope.notes)  # its module honours the factor
    assert vision_rope_from_hf_config(QWEN3_5) == VisionRope("qwen2_vl", 72)
    default = {**QWEN3_5, "text_config": {**QWEN3_5["text_config"], "rope_parameters": {
        "rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25}}}
    rope = from_hf_config(default)
    assert rope.mrope_section == (11, 11, 10) and rope.provenance["mrope_section"] == "default"


def test_ernie_vl_sections_are_h_w_t_and_alternate():
    """ERNIE-4.5-VL's [22, 22, 20] is (h, w, t): refpos's (t, h, w) = (20, 22, 22), h and w alternating, on
    adjacent channel pairs (rotate_half_text; the vision tower's rotate_half is half-split)."""
    rope = from_hf_config(ERNIE_VL, strict=True)
    assert (rope.mrope_section, rope.mrope_scheme, rope.layout, rope.rotary_dim) == \
        ((20, 22, 22), "hw_alternating", "interleaved", 128)
    assert rope.provenance["mrope_section"].startswith("config") and any("(h, w, t)" in n for n in rope.notes)
    default = from_hf_config({**ERNIE_VL, "text_config": {**ERNIE_VL["text_config"], "rope_parameters": {
        "rope_type": "default", "rope_theta": 5e5}}})
    assert default.mrope_section == (20, 22, 22) and default.provenance["mrope_section"] == "default"
    assert vision_rope_from_hf_config(ERNIE_VL) == VisionRope("qwen2_vl", 80)


def test_ernie_vl_takes_default_rope_only():
    yarn = {**ERNIE_VL, "text_config": {**ERNIE_VL["text_config"], "rope_parameters": {
        "rope_type": "yarn", "factor": 2.0, "rope_theta": 5e5, "original_max_position_embeddings": 4096,
        "mrope_section": [22, 22, 20]}}}
    with pytest.raises(ValueError, match="accepts \\['default'\\] only"):
        from_hf_config(yarn)
    with pytest.raises(ValueError, match="needs s_h = s_w"):
        from_hf_config({**ERNIE_VL, "text_config": {**ERNIE_VL["text_config"], "rope_parameters": {
            "rope_type": "default", "rope_theta": 5e5, "mrope_section": [24, 20, 20]}}})


COSMOS3_EDGE = {"model_type": "cosmos3_edge",
                "text_config": {"model_type": "cosmos3_edge_text", "hidden_size": 2048, "head_dim": 128,
                                "num_attention_heads": 16, "max_position_embeddings": 262144,
                                "rope_parameters": {"rope_type": "default", "rope_theta": 5e6,
                                                    "mrope_section": [24, 20, 20]}}}
HY_V4_VL_TEXT = {"model_type": "hy_v4_vl_text", "hidden_size": 2048, "num_attention_heads": 16,
                 "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "kv_lora_rank": 512, "q_lora_rank": 1536,
                 "head_dim": 64, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
NEOMME = {"model_type": "neomme", "hidden_size": 1024, "num_attention_heads": 16, "head_dim": 64,
          "num_hidden_layers": 6, "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
          "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6,
                                                 "partial_rotary_factor": 0.5},
                              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4,
                                                    "partial_rotary_factor": 1.0}}}
COHERE_COMPASS_TEXT = {"model_type": "cohere_compass_text", "hidden_size": 2048, "num_attention_heads": 16,
                       "num_hidden_layers": 4, "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
                       "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4,
                                                                 "mrope_section": [24, 20, 20]},
                                           "full_attention": {"rope_type": "default", "rope_theta": 1e6}}}


def test_qwen3_vl_form_families_are_interleaved():
    """Cosmos3-Edge, HY-V4-VL and Cohere-Compass run Qwen3-VL's round-robin (recomposition_frequencies: h on
    pairs 1, 4, …, w on 2, 5, …); HY-V4-VL's config class fills [12, 10, 10] over its 64 rotated channels."""
    rope = from_hf_config(COSMOS3_EDGE, strict=True)
    assert (rope.mrope_section, rope.mrope_scheme, rope.layout, rope.rotary_dim) == \
        ((24, 20, 20), "interleaved", "half", 128)
    rope = from_hf_config(HY_V4_VL_TEXT)
    assert (rope.mrope_section, rope.mrope_scheme, rope.layout, rope.rotary_dim) == \
        ((12, 10, 10), "interleaved", "deinterleaved", 64)
    assert rope.provenance["mrope_section"] == "default"
    for layer_type, theta in (("sliding_attention", 5e4), ("full_attention", 1e6)):
        rope = from_hf_config(COHERE_COMPASS_TEXT, layer_type=layer_type)
        assert (rope.theta, rope.mrope_section, rope.mrope_scheme) == (theta, (24, 20, 20), "interleaved")


def test_neomme_alternates_row_and_column_over_every_pair():
    """NeoMME's two axes (row, col) take the even and odd pairs of each layer type's own rotated width
    (NeoMMERotaryEmbedding.recomposition_frequencies): refpos's h and w alternating with no t pairs."""
    full = from_hf_config(NEOMME, layer_type="full_attention")
    assert (full.mrope_section, full.mrope_scheme, full.rotary_dim, full.theta) == \
        ((0, 8, 8), "hw_alternating", 32, 1e6)
    sliding = from_hf_config(NEOMME, layer_type="sliding_attention")
    assert (sliding.mrope_section, sliding.mrope_scheme, sliding.rotary_dim) == ((0, 16, 16), "hw_alternating", 64)
    assert not any("multi-axis" in str(v) for v in full.not_modelled.values())


def test_hy_v4_vl_before_5_25_is_refused_by_name():
    """HY-V4-VL's text rotation changed in 5.25 (apply_rotary_pos_emb_interleave, anchored above); the 5.24 code's is
    not anchored and the survey of 5.24 finds the interleaved reading off: a config naming 5.24 is refused by name,
    never answered with an unanchored layout."""
    old = refpos.model_positions({**HY_V4_VL_TEXT, "num_hidden_layers": 2}, transformers_version="5.24.0")
    assert not old.complete and all(layer.kind == "refused" for layer in old.layers)
    assert any("5.24" in str(why) for why in old.not_modelled.values()) or "5.24" in old.summary() or any(
        "5.24" in str(getattr(layer, "reason", "")) for layer in old.layers)
    new = refpos.model_positions({**HY_V4_VL_TEXT, "num_hidden_layers": 2}, transformers_version="5.25.0")
    assert new.complete and all(layer.kind == "mrope" for layer in new.layers)


@pytest.mark.parametrize(("sections", "pairs", "reach"), [
    ((24, 20, 20), 64, (24, 20, 20)),  # fits: the stated sections
    ((24, 20, 20), 32, (11, 11, 10)),  # Qwen3-Omni's talker default on a 64-wide head: the slices stop at pair 31
    ((44, 44, 40), 128, (45, 43, 40)),  # 3·44 > 129: h on every pair 1 (mod 3)
    ((11, 11, 10), 128, (107, 11, 10)),  # Qwen4-Exp's default on a fully rotated 256-wide head: t the rest
    ((0, 0, 0), 6, (6, 0, 0)),
])
def test_round_robin_reach_places_pairs_as_the_module_slices(sections, pairs, reach):
    """h on pairs 1, 4, … below min(m, 3·s_h), w on 2, 5, … below min(m, 3·s_w), t on the rest."""
    from refpos.models.mrope_hf import round_robin_reach
    from refpos.rope.mrope import pair_axes

    assert round_robin_reach(sections, pairs) == reach
    axes = pair_axes(reach, interleaved=True)
    for j, axis in enumerate(axes):
        want = 1 if j % 3 == 1 and j < 3 * sections[1] else 2 if j % 3 == 2 and j < 3 * sections[2] else 0
        assert axis == want, (j, axis, want)


QWEN4_EXP_TEXT = {"model_type": "qwen4_exp_text", "hidden_size": 256, "num_attention_heads": 4, "head_dim": 256,
                  "num_hidden_layers": 4, "rope_parameters": {"rope_type": "default", "rope_theta": 1e7}}


def test_talker_and_qwen4_exp_resolve_the_module_reach():
    """Qwen3-Omni's talker text model and Qwen4-Exp run the round-robin: sections that do not fit the rotated pairs
    resolve to the pairs the module places (derived, with a note), never to a one-axis rotation."""
    talker = from_hf_config(COSMOS3_EDGE["text_config"] | {"model_type": "qwen3_omni_moe_talker_text", "head_dim": 64,
                                                           "rope_parameters": {"rope_type": "default",
                                                                               "rope_theta": 1e6}})
    assert (talker.mrope_section, talker.mrope_scheme, talker.layout) == ((11, 11, 10), "interleaved", "half")
    assert talker.provenance["mrope_section"] == "derived"
    assert any("slices stop at the last pair" in note for note in talker.notes)
    rope = from_hf_config(QWEN4_EXP_TEXT)
    assert (rope.mrope_section, rope.mrope_scheme, rope.rotary_dim) == ((107, 11, 10), "interleaved", 256)
    assert not any("multi-axis" in str(v) for v in rope.not_modelled.values())


def test_qwen4_exp_layers_are_linear_or_refused_by_their_indexer():
    """Without layer_types the config class makes every 4th layer an attention layer (full_attention_interval) and
    the others linear_attention (no attention); the attention layers are refused by the QSA indexer's pooled keys."""
    import refpos

    layers = refpos.model_positions(QWEN4_EXP_TEXT).layers
    assert [r.kind for r in layers] == ["no_attention"] * 3 + ["refused"]
    assert "QSA indexer" in layers[3].reason
