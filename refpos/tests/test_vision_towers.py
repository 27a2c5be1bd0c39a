"""Vision towers and DSA indexers in model_positions' per-layer records (refpos.models.vision_towers, indexer)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

import refpos
from refpos.models.families import FAMILY_ROWS
from refpos.models.kinds.rope import RopeLayer
from refpos.models.kinds.vision_rope import VisionRopeLayer
from refpos.models.vision_towers import vision_rope_from_hf_config
from refpos.rope.vision import VisionRope
from refpos.rope.vision3d import VisionRope3D

VLM = json.loads(resources.files("refpos").joinpath("data/vlm_configs.json").read_text(encoding="utf8"))
VJEPA2 = {"model_type": "vjepa2", "hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 3,
          "pred_hidden_size": 384, "pred_num_attention_heads": 12, "pred_num_hidden_layers": 2, "crop_size": 256,
          "patch_size": 16}
OMNI = {"model_type": "qwen2_5_omni", "thinker_config": {
    "model_type": "qwen2_5_omni_thinker",
    "vision_config": {"model_type": "qwen2_5_omni_vision_encoder", "depth": 4, "hidden_size": 1280, "num_heads": 16},
    "text_config": {"model_type": "qwen2_5_omni_text", "hidden_size": 3584, "num_attention_heads": 28,
                    "num_hidden_layers": 2, "rope_theta": 1e6,
                    "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default", "type": "default"}}}}


def test_a_vision_language_model_has_a_vision_stack():
    positions = refpos.model_positions(VLM["Qwen/Qwen3.5-27B"]["config"])
    assert positions.stacks == ("decoder", "vision.input", "vision")
    assert positions.stack("vision.input")[0].label == "grid(bilinear_align_corners)"  # Qwen3.5's resampled grid
    vision = positions.stack("vision")
    assert len(vision) == 27 and {layer.rope for layer in vision} == {VisionRope("qwen2_vl", 72)}
    assert vision[0].describe() == {"stack": "vision", "index": 0, "layer_type": None, "kind": "vision_rope",
                                    "reads": {"rotation": ["image_grid"]}, "form": "qwen2_vl", "head_dim": 72,
                                    "theta": 10000.0, "axes": 2}
    assert positions.complete


def test_omni_thinker_tower_and_text():
    positions = refpos.model_positions(OMNI)
    assert positions.summary().splitlines() == ["decoder layers 0-1: mrope ×2", "vision layers 0-3: "
                                                "vision_rope(qwen2_vl) ×4"]
    assert positions.stack("vision")[0].rope == VisionRope("qwen2_vl", 80) and positions.complete


def test_vjepa2_is_its_towers():
    positions = refpos.model_positions(VJEPA2)
    assert positions.stacks == ("encoder", "predictor") and positions.complete
    assert {layer.rope for layer in positions.stack("encoder")} == {VisionRope3D("vjepa2", 64)}
    assert {layer.rope for layer in positions.stack("predictor")} == {VisionRope3D("vjepa2", 32)}
    assert {layer.side for layer in positions} == {16}  # crop_size // patch_size: the side token indices split along
    with pytest.raises(ValueError, match="vision_rope"):
        positions.layers[0].encoding()


def test_minimax_m3_vl_tower_is_three_dimensional():
    config = {"model_type": "minimax_m3_vl", "vision_config": {"model_type": "minimax_m3_vl_vision",
                                                               "hidden_size": 1280, "num_attention_heads": 16,
                                                               "num_hidden_layers": 2,
                                                               "rope_parameters": {"rope_theta": 10000.0}},
              "text_config": {"model_type": "minimax_m3_vl_text", "hidden_size": 64, "num_attention_heads": 4,
                              "num_hidden_layers": 1}}
    assert vision_rope_from_hf_config(config) == VisionRope3D("minimax_m3_vl", 80)
    vision = [layer for layer in refpos.model_positions(config) if isinstance(layer, VisionRopeLayer)]
    assert len(vision) == 2 and vision[0].params()["axes"] == 3


def test_a_language_config_alone_has_no_tower():
    text = VLM["Qwen/Qwen3.5-27B"]["config"]["text_config"]
    alone = refpos.model_positions(text)
    assert alone.stacks == ("decoder",) and alone.parts == ()
    towers = [row for row in FAMILY_ROWS if "vision_rope" in row.encodings]
    assert len(towers) >= 15 and all(row.source.split(":")[0].endswith(".py") for row in towers)


def test_bad_tower_geometry_is_named():
    with pytest.raises(ValueError, match="pred_num_hidden_layers"):
        refpos.model_positions({k: v for k, v in VJEPA2.items() if k != "pred_num_hidden_layers"})
    with pytest.raises(ValueError, match="not a multiple of the head count"):
        refpos.model_positions({**VJEPA2, "pred_hidden_size": 100})
    with pytest.raises(TypeError, match="crop_size"):
        refpos.model_positions({k: v for k, v in VJEPA2.items() if k != "crop_size"})
    with pytest.raises(ValueError, match="crop_size: a clip of 8 holds no patch of 16"):
        refpos.model_positions({**VJEPA2, "crop_size": 8})


def test_dsa_layers_carry_their_indexer():
    v32 = {"model_type": "deepseek_v32", "hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64,
           "qk_nope_head_dim": 128, "v_head_dim": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
           "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048, "num_hidden_layers": 4,
           "rope_theta": 10000}
    layers = refpos.model_positions(v32).layers
    assert all(isinstance(layer, RopeLayer) and layer.indexer is not None for layer in layers)
    assert (layers[0].indexer.head_dim, layers[0].indexer.layout) == (128, "half")
    assert layers[0].describe()["indexer"]["placement"] == "first"
    glm = refpos.model_positions({**v32, "model_type": "glm_moe_dsa", "index_topk_freq": 2})
    assert [layer.label for layer in glm] == ["rope+indexer", "rope+indexer", "rope", "rope+indexer"]


@pytest.mark.parametrize("model_type", ["glm4v_vision", "glm4v_moe_vision"])
def test_a_tower_with_a_learned_grid_beside_its_rope_answers_both(model_type):
    """GLM-4.1V's tower adds a learned grid, resampled bicubic at each patch's centre, to its patches before rotating
    them in every layer (glm4v/modeling_glm4v.py: Glm4vVisionEmbeddings.forward): refpos answers the grid at the
    tower's input and the rotation in its layers; GLM-OCR's tower, with the rotation alone, has no input site."""
    tower = {"depth": 2, "hidden_size": 64, "num_heads": 4}
    both = refpos.model_positions({"model_type": model_type, **tower})
    assert both.summary().splitlines() == ["vision input: grid(bicubic_gather)",
                                           "vision layers 0-1: vision_rope(qwen2_vl) ×2"]
    assert both.stack("vision.input")[0].packed and not both.stack("vision.input")[0].clips and both.complete
    alone = refpos.model_positions({"model_type": "glm_ocr_vision", **tower})
    assert [r.kind for r in alone] == ["vision_rope"] * 2 and alone.complete


def test_a_raster_tower_says_its_token_order_and_the_new_forms_their_frequencies():
    """PaddleOCR-VL's tower reads Qwen2-VL's form in raster order (its record's ``raster``, described as
    ``token_order``); ``raster`` with another form is refused by name. Step 3.5's form turns pair ``j < D/4`` by the
    column at θ^(−4j/D) and the rest by the row; Kimi K2.5's pair ``j`` by the column (even ``j``) or the row (odd)
    at θ^(−4⌊j/2⌋/D)."""
    import numpy as np

    from refpos.models.kinds.vision_rope import VisionRopeFacts
    from refpos.rope.vision import vision_frequencies

    paddle = {"model_type": "paddleocr_vl_vision", "hidden_size": 64, "num_attention_heads": 4,
              "num_hidden_layers": 2, "spatial_merge_size": 2, "rope_parameters": {"rope_type": "axial",
                                                                                    "rope_theta": 10000.0}}
    vision = [r for r in refpos.model_positions(paddle).layers if r.kind == "vision_rope"]
    assert len(vision) == 2 and all(r.raster and r.rope == VisionRope("qwen2_vl", 16) for r in vision)
    assert vision[0].describe()["token_order"] == "raster"
    with pytest.raises(ValueError, match=r"vision_rope\.raster"):
        VisionRopeFacts(form="pixtral", raster=True).check("row")
    quarter = np.arange(4)
    step = vision_frequencies(VisionRope("step3p7", 16, 100.0))
    assert step[0] == (1,) * 4 + (0,) * 4
    np.testing.assert_allclose(step[1], np.tile(100.0 ** (-4.0 * quarter / 16), 2), rtol=1e-15)
    kimi = vision_frequencies(VisionRope("kimi_k25", 16, 100.0))
    assert kimi[0] == (1, 0) * 4
    np.testing.assert_allclose(kimi[1], np.repeat(100.0 ** (-4.0 * quarter / 16), 2), rtol=1e-15)


def test_kimi_k25_tower_answers_its_rotation_grid_and_frame_sinusoid():
    """Kimi K2.5's row: the ``kimi_k25`` form in every layer beside its table of ``pos_emb_height`` ×
    ``pos_emb_width`` rows (grid fact ``sides``) at the input, with the sinusoid over a clip's frames (grid fact
    ``frames``: ``pos_emb_time``); complete, and refused naming ``pos_emb_width`` where the table is not square (the
    code reads it as a square)."""
    config = {"model_type": "kimi_k25_vision", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "pos_emb_height": 6, "pos_emb_width": 6, "pos_emb_time": 3,
              "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0}}
    positions = refpos.model_positions(config)
    [grid] = positions.stack("vision.input")
    assert (grid.way, grid.grid, grid.packed, grid.merge, grid.frames) == ("bicubic_gather", (6, 6), True, 1, 3)
    assert positions.complete and [r.kind for r in positions.stack("vision")] == ["vision_rope"] * 2
    assert "pos_emb_width" in refpos.model_positions({**config, "pos_emb_width": 5}).not_modelled


def test_window_patch_positions_order_each_frame_window_by_window():
    """A 3 × 5 grid in windows of 2, counted from 1: the windows (0, 0), (0, 1), (0, 2) (cut to one column), then
    the bottom row's, each window's patches row-major; a second frame repeats the first; bad input named."""
    from refpos.rope.vision_positions import window_patch_positions

    expected = []
    for window_row, window_column in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]:
        for r in range(2 * window_row, min(2 * window_row + 2, 3)):
            for c in range(2 * window_column, min(2 * window_column + 2, 5)):
                expected.append([r + 1, c + 1])
    got = window_patch_positions([(2, 3, 5)], 2, start=1)
    assert got.tolist() == expected * 2
    assert window_patch_positions([(1, 4, 4)], 8).tolist() == [[r, c] for r in range(4) for c in range(4)]
    with pytest.raises(ValueError, match="window"):
        window_patch_positions([(1, 2, 2)], 0)
    with pytest.raises(ValueError, match=r"grids\[0\]"):
        window_patch_positions([(1, 2)], 2)


def test_muse_towers_count_from_1_in_window_order():
    """Muse Glimmer's row: the ``step3p7`` form from 1 in windows of ``pos_emb_height`` (class default 32 where the
    config leaves it out) beside its transposed bilinear grid; ``start`` and ``window_order`` on a form they do not
    fit are refused by name."""
    from refpos.models.kinds.vision_rope import VisionRopeFacts

    config = {"model_type": "muse_glimmer_vision", "hidden_size": 64, "num_attention_heads": 4,
              "num_hidden_layers": 2, "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}
    positions = refpos.model_positions(config)
    vision = positions.stack("vision")
    assert {(r.rope, r.start, r.window_order) for r in vision} == {(VisionRope("step3p7", 16), 1, 32)}
    assert positions.stack("vision.input")[0].way == "bilinear_zeros_transposed" and positions.complete
    with pytest.raises(ValueError, match=r"vision_rope\.start"):
        VisionRopeFacts(form="dinov3", start=1).check("row")
    with pytest.raises(ValueError, match=r"vision_rope\.window_order"):
        VisionRopeFacts(form="qwen2_vl", window_order="pos_emb_height").check("row")


def test_inkling2_row_answers_its_rotation_and_input():
    """Inkling2's row states its rotation (Llama 4's form from 1, an unrotated class token before each image) and its
    input (the packed grid after each image's class token, which carries ``cls_position_embedding``: grid fact
    ``class_row``); ``class_token`` beside ``class_angles`` is refused by name."""
    from refpos.models.kinds.vision_rope import VisionRopeFacts

    config = {"model_type": "inkling2_vision", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}
    positions = refpos.model_positions(config)
    assert positions.complete and positions.stack("vision.input")[0].class_row == "cls_position_embedding"
    [row] = [row for row in FAMILY_ROWS if row.model_type == "inkling2_vision"]
    assert dict(row.positions.facts)["vision_rope"] == VisionRopeFacts(form="llama4", rope_type="axial", start=1,
                                                                       class_token=True)
    with pytest.raises(ValueError, match=r"vision_rope\.class_token"):
        VisionRopeFacts(form="qwen2_vl", class_token=True, class_angles="class_pos_emb").check("row")
