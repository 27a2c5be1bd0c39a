"""Vision towers whose 2-D RoPE reads the patches in raster order against transformers' own towers (anchors env):
PaddleOCR-VL's (Qwen2-VL's form, row-major although its ``spatial_merge_size`` is 2), Step 3.5's (the form
``step3p7``: the column's angles first), Kimi K2.5's (the form ``kimi_k25``: the column's and the row's pair
alternating, one frequency each), Muse Glimmer's and Muse Spark's (the form ``step3p7`` from 1, the patches
reordered window by window) and Inkling2's (Llama 4's form from 1 in merge blocks, an unrotated class token before
each image).

Each tower runs in eval with float64 weights; the query and key before and after every call of its rotary apply
function are compared with :func:`apply_vision_rope` of the query and key before, at the record's positions. The
tables are float32 (angles, cos, sin) and the apply casts to float32: each output is within the table bound of the
largest angle plus 6u (the inputs, cos, sin and the two products rounded), times the pair's norm. Wrong answers (the
other token order, the row first, the other forms) are outside that bound.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.rope.vision import VisionRope, apply_vision_rope, qwen_patch_positions, vision_angles
from refpos.tests.ports import float32_table_atol

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

U32 = 2.0**-24


def _pair_norm(x: np.ndarray) -> np.ndarray:
    """``(..., N, 1)``: each token's largest half-layout pair norm."""
    half = x.shape[-1] // 2
    return np.sqrt(x[..., :half] ** 2 + x[..., half:] ** 2).max(axis=-1, keepdims=True)


def _calls(hf, run) -> list[list[np.ndarray]]:
    """Every call of ``hf.apply_rotary_pos_emb_vision`` while ``run()`` runs: ``q, k, q', k'`` float64, heads first."""
    original = hf.apply_rotary_pos_emb_vision
    seen: list = []

    def wrapped(q, k, cos, sin, **kwargs):
        out = original(q, k, cos, sin, **kwargs)
        seen.append([np.moveaxis(t.detach().double().numpy().reshape(-1, *t.shape[-3:])[0], 1, 0)
                     for t in (q, k, *out)])  # (heads, N, D)
        return out

    hf.apply_rotary_pos_emb_vision = wrapped
    try:
        with torch.no_grad():
            run()
    finally:
        hf.apply_rotary_pos_emb_vision = original
    return seen


def _check(seen, rope: VisionRope, positions: np.ndarray, wrong: dict[str, tuple[VisionRope, np.ndarray]]) -> float:
    """Every call within the bound (module docstring), every wrong answer outside it; the largest error."""
    worst = 0.0
    table = float32_table_atol(np.abs(vision_angles(positions, rope)).max())
    for q, k, q_out, k_out in seen:
        for before, after in ((q, q_out), (k, k_out)):
            bound = (table + 6 * U32) * np.sqrt(2) * _pair_norm(before)
            error = np.abs(np.asarray(apply_vision_rope(before, positions, rope)) - after)
            assert np.all(error <= bound)
            worst = max(worst, float(error.max()))
            for name, (other, at) in wrong.items():
                assert np.any(np.abs(np.asarray(apply_vision_rope(before, at, other)) - after) > bound), name
    return worst


def test_paddleocr_vl_tower_rotates_its_patches_in_raster_order():
    """PaddleOCR-VL's tower (``spatial_merge_size`` 2) on two packed images: Qwen2-VL's rotation at the row-major
    ``(h, w)`` of each image, as its record says (``raster``); the merge blocks of 2 are outside the bound."""
    from transformers.models.paddleocr_vl import modeling_paddleocr_vl as hf

    torch.manual_seed(0)
    config = hf.PaddleOCRVisionConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64,
                                      num_hidden_layers=2, patch_size=2, image_size=8, spatial_merge_size=2)
    model = hf.PaddleOCRVisionModel(config).double().eval()
    grids = [(1, 4, 6), (1, 2, 4)]
    patches = sum(t * h * w for t, h, w in grids)
    pixels = torch.randn(1, patches, 3, 2, 2, dtype=torch.float64)
    seen = _calls(hf, lambda: model(pixel_values=pixels, grid_thw=torch.tensor(grids)))
    assert len(seen) == 2
    record = next(r for r in refpos.model_positions(config.to_dict()).layers if r.kind == "vision_rope")
    assert record.raster and record.rope == VisionRope("qwen2_vl", 16, theta=config.rope_parameters["rope_theta"])
    positions = qwen_patch_positions(grids, spatial_merge_size=1)
    worst = _check(seen, record.rope, positions, {
        "merge blocks of 2": (record.rope, qwen_patch_positions(grids, spatial_merge_size=2)),
        "the step3p7 form": (VisionRope("step3p7", 16, record.rope.theta), positions)})
    assert worst < 1e-5


def test_step3p5_tower_turns_the_column_first():
    """Step 3.5's tower (``Step3p7VisionModel``) on a 4 × 6 image: the ``step3p7`` form at row-major positions;
    Qwen2-VL's form (the row first) and Kimi K2.5's are outside the bound."""
    from transformers.models.step3p7 import modeling_step3p7 as hf

    torch.manual_seed(0)
    config = hf.Step3p7VisionConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64,
                                    num_hidden_layers=2, patch_size=2, image_size=8)
    model = hf.Step3p7VisionModel(config).double().eval()
    seen = _calls(hf, lambda: model(pixel_values=torch.randn(1, 3, 8, 12, dtype=torch.float64)))
    assert len(seen) == 2
    record = next(r for r in refpos.model_positions(config.to_dict()).layers if r.kind == "vision_rope")
    assert record.rope == VisionRope("step3p7", 16, theta=config.rope_parameters["rope_theta"])
    positions = qwen_patch_positions([(1, 4, 6)], spatial_merge_size=1)
    worst = _check(seen, record.rope, positions, {
        "the qwen2_vl form": (VisionRope("qwen2_vl", 16, record.rope.theta), positions),
        "the kimi_k25 form": (VisionRope("kimi_k25", 16, record.rope.theta), positions),
        "row and column swapped": (record.rope, positions[:, ::-1].copy())})
    assert worst < 1e-5


def test_kimi_k25_tower_alternates_column_and_row_pairs():
    """Kimi K2.5's tower on two packed images: the ``kimi_k25`` form at each image's row-major positions; the
    ``step3p7`` form (one span per axis), the row first and the merge blocks of 2 are outside the bound."""
    from transformers.models.kimi_k25 import modeling_kimi_k25 as hf

    torch.manual_seed(0)
    config = hf.Kimi_K25VisionConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64,
                                     num_hidden_layers=2, patch_size=2, pos_emb_height=4, pos_emb_width=4)
    model = hf.Kimi_K25VisionModel(config).double().eval()
    grids = [(1, 4, 6), (1, 2, 4)]
    patches = sum(t * h * w for t, h, w in grids)
    seen = _calls(hf, lambda: model(pixel_values=torch.randn(patches, 3, 2, 2, dtype=torch.float64),
                                    grid_thw=torch.tensor(grids)))
    assert len(seen) == 2
    rope = VisionRope("kimi_k25", 16, theta=config.rope_parameters["rope_theta"])
    positions = qwen_patch_positions(grids, spatial_merge_size=1)
    worst = _check(seen, rope, positions, {
        "the step3p7 form": (VisionRope("step3p7", 16, rope.theta), positions),
        "row and column swapped": (rope, positions[:, ::-1].copy()),
        "merge blocks of 2": (rope, qwen_patch_positions(grids, spatial_merge_size=2))})
    assert worst < 1e-5


@pytest.mark.parametrize("name", ["muse_glimmer", "muse_spark"])
def test_muse_towers_turn_the_column_first_from_1_window_by_window(name):
    """Muse Glimmer's and Muse Spark's towers (windows of ``pos_emb_height`` = 4 patches a side) on two packed
    images, 4 × 8 (two windows) and 6 × 10 (six, cut short at the bottom and right): the ``step3p7`` form at
    ``(h + 1, w + 1)``, the patches reordered window by window, as the row's record says; the raster order,
    coordinates from 0 and Qwen2-VL's form (the row first) are outside the bound."""
    import importlib

    from refpos.rope.vision import window_patch_positions

    hf = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    prefix = "MuseGlimmer" if name == "muse_glimmer" else "MuseSpark"
    torch.manual_seed(0)
    config = getattr(hf, f"{prefix}VisionConfig")(hidden_size=64, num_attention_heads=4, intermediate_size=64,
                                                  num_hidden_layers=2, patch_size=2, pos_emb_height=4,
                                                  pos_emb_width=4)
    model = getattr(hf, f"{prefix}VisionModel")(config).double().eval()
    grids = [(1, 4, 8), (1, 6, 10)]
    patches = sum(t * h * w for t, h, w in grids)
    width = config.patch_temporal * 3 * config.patch_size**2
    seen = _calls(hf, lambda: model(pixel_values=torch.randn(patches, width, dtype=torch.float64),
                                    grid_thw=torch.tensor(grids)))
    assert len(seen) == 2
    record = next(r for r in refpos.model_positions(config.to_dict()).layers if r.kind == "vision_rope")
    assert record.rope == VisionRope("step3p7", 16, theta=config.rope_parameters["rope_theta"])
    assert (record.start, record.window_order) == (1, 4)
    positions = window_patch_positions(grids, record.window_order, record.start)
    raster = qwen_patch_positions(grids, spatial_merge_size=1) + 1
    worst = _check(seen, record.rope, positions, {
        "raster order": (record.rope, raster),
        "positions from 0": (record.rope, positions - 1),
        "the qwen2_vl form": (VisionRope("qwen2_vl", 16, record.rope.theta), positions)})
    assert worst < 1e-5


def test_inkling2_tower_turns_llama4_pairs_from_1_after_each_image_class_token():
    """Inkling2's tower on two packed images: before each image's patches an unrotated class token, the patches in
    merge blocks of 2 turned by Llama 4's form (the column's pairs first, interleaved) at ``(h + 1, w + 1)``
    (:func:`apply_vision_rope_frames` with zero class angles); the patches row-major, coordinates from 0 and
    Qwen2-VL's form (half layout, the row first) are outside the bound."""
    from transformers.models.inkling2 import modeling_inkling2 as hf

    from refpos.rope.vision import apply_vision_rope_frames

    torch.manual_seed(0)
    config = hf.Inkling2VisionConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64,
                                     num_hidden_layers=2, patch_size=2, spatial_merge_size=2, posemb_grid_size=4,
                                     projection_hidden_dim=32, text_hidden_size=32)
    model = hf.Inkling2VisionModel(config).double().eval()
    tokens = [(1, 2, 3), (1, 3, 1)]  # language-model tokens; patches: (1, 4, 6) and (1, 6, 2)
    grids = [(t, 2 * h, 2 * w) for t, h, w in tokens]
    pixels = torch.randn(sum(t * h * w for t, h, w in tokens), 4, 4, 3, dtype=torch.float64)
    seen = _calls(hf, lambda: model(pixel_values=pixels, image_grid_thw=torch.tensor(tokens)))
    assert len(seen) == 2
    rope = VisionRope("llama4", 16, theta=config.rope_parameters["rope_theta"])
    frames = [h * w for _, h, w in grids]
    zero = np.zeros((1, 8))
    positions = qwen_patch_positions(grids, spatial_merge_size=2) + 1
    wrong = {"patches row-major": (rope, qwen_patch_positions(grids, spatial_merge_size=1) + 1),
             "positions from 0": (rope, positions - 1),
             "the qwen2_vl form": (VisionRope("qwen2_vl", 16, rope.theta), positions)}
    worst = 0.0
    for q, k, q_out, k_out in seen:
        for before, after in ((q, q_out), (k, k_out)):
            table = float32_table_atol(np.abs(vision_angles(positions, rope)).max())
            norm = np.sqrt(2) * np.abs(before).max(axis=-1, keepdims=True)  # any pairing: √2 × the largest entry
            bound = (table + 6 * U32) * norm
            ours = np.asarray(apply_vision_rope_frames(before, positions, rope, frames, prefix_angles=zero))
            assert np.all(np.abs(ours - after) <= bound)
            worst = max(worst, float(np.abs(ours - after).max()))
            for name, (other, at) in wrong.items():
                made = np.asarray(apply_vision_rope_frames(before, at, other, frames, prefix_angles=zero))
                assert np.any(np.abs(made - after) > bound), name
    assert worst < 1e-5
