"""DINOv3's and MLCD's 2-D vision RoPE against transformers' own modules (anchors env).

* DINOv3 coordinates: ``get_patches_center_coordinates`` in float64 against :func:`dinov3_patch_positions`, bit for
  bit (``(i + ½)/n·2 − 1`` and ``(2i + 1)/n − 1`` round alike: the factor 2 is exact);
* DINOv3 tables: the module computes coordinates, ω and angles in float32 whatever the input's dtype. The
  coordinate is off by ≤ 3u (a division, then ``−1`` on a value ≤ 1), ω by ≤ 3u relative (``pow``, ``1/…``),
  2π by u, the two products by u each: the angle, ≤ 2π, is off by ≤ 2π·9u; cos and sin add 2u:
  atol = (18π + 2)·2⁻²⁴;
* MLCD tables: the module's float32 tables against refpos's at row-major positions, the float32 table bound of
  :func:`refpos.tests.ports.float32_table_atol`; its ``recomposition_frequencies`` of float64 angles, exact;
* the whole towers (eval, float64 where the module allows): the query and key before and after the first call of
  the rotary apply function, against :func:`apply_vision_rope` of the query and key before — DINOv3 (float64
  run, float32 tables) within the table bound times the pair's norm; MLCD's apply casts to float32: within the
  table bound plus 6u (inputs, cos, sin and the products rounded to float32), times the pair's norm; its class
  token turned by the model's ``class_pos_emb``, given as ``prefix_angles``;
* wrong answers (un-normalised coordinates, prefix tokens rotated, axes swapped, Qwen2-VL's form on DINOv3's
  patches, MLCD's class token unrotated or at (0, 0)'s patch angles) are outside those bounds.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    dinov3_patch_positions,
    pixtral_patch_positions,
    vision_angles,
    vision_cos_sin,
    vision_frequencies,
)
from refpos.tests.ports import float32_table_atol

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

U32 = 2.0**-24
#: the DINOv3 table bound of the module docstring
DINOV3_ATOL = (18 * np.pi + 2) * U32


def _pair_norm(x: np.ndarray) -> np.ndarray:
    """``(..., N, 1)``: each token's largest half-layout pair norm."""
    half = x.shape[-1] // 2
    return np.sqrt(x[..., :half] ** 2 + x[..., half:] ** 2).max(axis=-1, keepdims=True)


def _first_call(module, name: str, run):
    """Run ``run()`` with ``module.name`` wrapped; the ``(q, k)`` before and after its first call, float64."""
    original = getattr(module, name)
    seen: list = []

    def wrapped(q, k, cos, sin, **kwargs):
        out = original(q, k, cos, sin, **kwargs)
        if not seen:
            seen.append([t.detach().double().numpy() for t in (q, k, *out)])
        return out

    setattr(module, name, wrapped)
    try:
        with torch.no_grad():
            run()
    finally:
        setattr(module, name, original)
    return seen[0]


def _dinov3_config(**extra):
    from transformers import DINOv3ViTConfig

    return DINOv3ViTConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64, num_hidden_layers=1,
                           patch_size=4, image_size=16, num_register_tokens=3, **extra)


@pytest.mark.parametrize(("h", "w"), [(4, 4), (3, 5), (1, 7)])
def test_dinov3_coordinates_and_tables(h, w):
    from transformers.models.dinov3_vit import modeling_dinov3_vit as hf

    coords = hf.get_patches_center_coordinates(h, w, dtype=torch.float64, device="cpu").numpy()
    np.testing.assert_array_equal(dinov3_patch_positions(h, w), coords)
    config = _dinov3_config()
    rotary = hf.DINOv3ViTRopePositionEmbedding(config).eval()
    cos, sin = rotary(torch.zeros(1, 3, 4 * h, 4 * w, dtype=torch.float64))
    rope = VisionRope("dinov3", 16, theta=config.rope_theta)
    ours_cos, ours_sin = vision_cos_sin(dinov3_patch_positions(h, w), rope)
    np.testing.assert_allclose(cos.numpy(), ours_cos, rtol=0, atol=DINOV3_ATOL)
    np.testing.assert_allclose(sin.numpy(), ours_sin, rtol=0, atol=DINOV3_ATOL)
    _, omega = vision_frequencies(rope)
    assert np.abs(vision_angles(dinov3_patch_positions(h, w), rope)).max() <= 2 * np.pi  # |c| ≤ 1, ω ≤ 2π
    np.testing.assert_allclose(omega[:4], 2 * np.pi * rotary.inv_freq.double().numpy(), rtol=4 * U32)


def test_dinov3_training_augmentations_do_not_act_in_eval():
    """shift, jitter and rescale move the coordinates in training only: in eval the tables are the plain ones."""
    from transformers.models.dinov3_vit import modeling_dinov3_vit as hf

    pixels = torch.zeros(1, 3, 12, 20)
    plain = hf.DINOv3ViTRopePositionEmbedding(_dinov3_config(pos_embed_rescale=None)).eval()(pixels)
    augmented = hf.DINOv3ViTRopePositionEmbedding(
        _dinov3_config(pos_embed_shift=0.3, pos_embed_jitter=1.5, pos_embed_rescale=2.0))
    for table, ours in zip(augmented.eval()(pixels), plain, strict=True):
        np.testing.assert_array_equal(table.numpy(), ours.numpy())
    torch.manual_seed(0)
    assert not np.array_equal(augmented.train()(pixels)[1].numpy(), plain[1].numpy())


@pytest.mark.parametrize(("height", "width"), [(16, 16), (12, 20)])
def test_dinov3_model_rotation(height, width):
    from transformers import DINOv3ViTModel
    from transformers.models.dinov3_vit import modeling_dinov3_vit as hf

    torch.manual_seed(0)
    config = _dinov3_config()
    model = DINOv3ViTModel(config).double().eval()
    pixels = torch.randn(1, 3, height, width, dtype=torch.float64)
    q, k, q_out, k_out = _first_call(hf, "apply_rotary_pos_emb", lambda: model(pixel_values=pixels))
    rope = VisionRope("dinov3", 16, theta=config.rope_theta)
    prefix = 1 + config.num_register_tokens
    positions = dinov3_patch_positions(height // 4, width // 4, prefix=prefix)
    wrong = {
        "un-normalised coordinates": (rope, np.concatenate(
            [np.zeros((prefix, 2)), pixtral_patch_positions(height // 4, width // 4)], axis=0).astype(np.float64)),
        "prefix tokens rotated": (rope, np.concatenate([np.full((prefix, 2), -1.0), positions[prefix:]], axis=0)),
        "axes swapped": (rope, positions[:, ::-1].copy()),
        "no 2π": (rope, positions / (2 * np.pi)),
    }
    for before, after in ((q, q_out), (k, k_out)):
        bound = DINOV3_ATOL * _pair_norm(before)
        ours = apply_vision_rope(before, positions, rope)
        assert np.all(np.abs(ours - after) <= bound)
        np.testing.assert_array_equal(ours[..., :prefix, :], before[..., :prefix, :])  # unrotated
        for name, (claim, at) in wrong.items():
            if name == "axes swapped" and height == width:
                continue  # a square grid's transpose is the same set of coordinates: shown at 12 × 20
            assert np.any(np.abs(apply_vision_rope(before, at, claim) - after) > bound), name


def test_mlcd_tables():
    from transformers import MLCDVisionConfig
    from transformers.models.mlcd import modeling_mlcd as hf

    config = MLCDVisionConfig(hidden_size=64, num_attention_heads=4)
    rotary = hf.MLCDRotaryEmbedding(config)
    rope = VisionRope("mlcd", 16, theta=config.rope_parameters["rope_theta"])
    positions = pixtral_patch_positions(5, 7)
    cos, sin = rotary(torch.zeros(1), torch.from_numpy(positions))
    ours_cos, ours_sin = vision_cos_sin(positions, rope)
    atol = float32_table_atol(np.abs(vision_angles(positions, rope)).max())
    np.testing.assert_allclose(cos.double().numpy(), ours_cos, rtol=0, atol=atol)
    np.testing.assert_allclose(sin.double().numpy(), ours_sin, rtol=0, atol=atol)
    _, omega = vision_frequencies(rope)
    per_axis = positions[..., None].astype(np.float64) * omega[:4]  # (N, 2, D/4)
    np.testing.assert_array_equal(np.cos(rotary.recomposition_frequencies(torch.from_numpy(per_axis)).numpy()),
                                  ours_cos)


@pytest.mark.parametrize(("height", "width"), [(28, 28), (21, 35)])
def test_mlcd_model_rotation(height, width):
    from transformers import MLCDVisionConfig, MLCDVisionModel
    from transformers.models.mlcd import modeling_mlcd as hf

    torch.manual_seed(0)
    config = MLCDVisionConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64, num_hidden_layers=1,
                              image_size=28, patch_size=7)
    model = MLCDVisionModel(config).double().eval()
    with torch.no_grad():
        model.class_pos_emb.normal_(0.0, 2.0)
    class_angles = model.class_pos_emb.detach().double().numpy()  # (1, D/2): pair j of the class token
    pixels = torch.randn(1, 3, height, width, dtype=torch.float64)
    q, k, q_out, k_out = _first_call(hf, "apply_rotary_pos_emb_vision", lambda: model(pixel_values=pixels))
    q, k, q_out, k_out = (np.moveaxis(t[0], 1, 0) for t in (q, k, q_out, k_out))  # (heads, 1 + N, D)
    rope = VisionRope("mlcd", 16, theta=config.rope_parameters["rope_theta"])
    positions = pixtral_patch_positions(height // 7, width // 7)
    wrong = {
        "class token unrotated": (positions, np.zeros_like(class_angles)),
        "class token as patch (0, 0)": (positions, np.zeros((1, 8)) + 1e-3),
        "axes swapped": (positions[:, ::-1].copy(), class_angles),
        "positions from 1": (positions + 1, class_angles),
    }
    for before, after in ((q, q_out), (k, k_out)):
        table = float32_table_atol(np.abs(vision_angles(positions, rope)).max())
        bound = (table + 6 * U32) * np.sqrt(2) * _pair_norm(before)
        ours = apply_vision_rope(before, positions, rope, prefix_angles=class_angles)
        assert np.all(np.abs(ours - after) <= bound)
        for name, (at, angles) in wrong.items():
            if name == "axes swapped" and height == width:
                continue
            assert np.any(np.abs(apply_vision_rope(before, at, rope, prefix_angles=angles) - after) > bound), name


def test_llava_onevision1_5_model_rotation_with_a_class_token_per_frame():
    """LLaVA-OneVision-1.5's tower on two packed images and a two-frame video: each frame's class token, turned by
    ``class_pos_emb``, before its patches in merge blocks; the float32 apply's bound as MLCD's."""
    from transformers.models.llava_onevision1_5 import modeling_llava_onevision1_5 as hf

    from refpos.rope.vision import apply_vision_rope_frames, qwen_patch_positions

    torch.manual_seed(0)
    config = hf.LlavaOnevision15VisionConfig(hidden_size=64, num_heads=4, intermediate_size=64, depth=1,
                                             patch_size=2, spatial_merge_size=2, out_hidden_size=32)
    model = hf.LlavaOnevision15VisionModel(config).double().eval()
    with torch.no_grad():
        model.cls_embeddings.class_pos_emb.normal_(0.0, 2.0)
    class_angles = model.cls_embeddings.class_pos_emb.detach().double().numpy()  # (1, D/2)
    grids = [(1, 4, 6), (2, 2, 4), (1, 6, 2)]
    patches = sum(t * h * w for t, h, w in grids)
    pixels = torch.randn(patches, 3 * 2 * 2, dtype=torch.float64)
    q, k, q_out, k_out = _first_call(hf, "apply_rotary_pos_emb_vision",
                                     lambda: model(pixel_values=pixels, grid_thw=torch.tensor(grids)))
    q, k, q_out, k_out = (np.moveaxis(t, 1, 0) for t in (q, k, q_out, k_out))  # (heads, F + N, D)
    rope = VisionRope("qwen2_vl", 16, theta=config.rope_parameters["rope_theta"])
    positions = qwen_patch_positions(grids, spatial_merge_size=2)
    frames = [h * w for t, h, w in grids for _ in range(t)]
    wrong = {
        "class angles reversed": lambda x: apply_vision_rope_frames(x, positions, rope, frames,
                                                                    prefix_angles=class_angles[:, ::-1].copy()),
        "class tokens unrotated": lambda x: apply_vision_rope_frames(x, positions, rope, frames,
                                                                     prefix_angles=np.zeros_like(class_angles)),
        "patches row-major": lambda x: apply_vision_rope_frames(
            x, qwen_patch_positions(grids, spatial_merge_size=1), rope, frames, prefix_angles=class_angles),
    }
    for before, after in ((q, q_out), (k, k_out)):
        table = float32_table_atol(np.abs(vision_angles(positions, rope)).max() + np.abs(class_angles).max())
        bound = (table + 6 * U32) * np.sqrt(2) * _pair_norm(before)
        ours = np.asarray(apply_vision_rope_frames(before, positions, rope, frames, prefix_angles=class_angles))
        assert np.all(np.abs(ours - after) <= bound)
        assert np.abs(ours - after).max() < 1e-5
        for name, make in wrong.items():
            assert np.any(np.abs(np.asarray(make(before)) - after) > bound), name


def test_eomt_dinov3_rotation_with_its_query_tokens_in_the_last_layers():
    """EoMT-DINOv3 (float64 weights, float32 tables): every layer's call against refpos's record of that layer —
    DINOv3's centres after the class and register tokens, and in the last ``num_blocks`` layers after the
    ``num_queries`` query tokens too, all unrotated; the query tokens rotated (at (−1, −1)), or left out of the
    prefix, are outside the bound."""
    from transformers import EomtDinov3Config
    from transformers.models.eomt_dinov3 import modeling_eomt_dinov3 as hf

    import refpos

    torch.manual_seed(0)
    config = EomtDinov3Config(hidden_size=64, num_attention_heads=4, intermediate_size=64, num_hidden_layers=3,
                              num_blocks=1, num_queries=5, num_register_tokens=2, image_size=16, patch_size=4)
    model = hf.EomtDinov3ForUniversalSegmentation(config).double().eval()
    model.attn_mask_probs.zero_()  # no mask annealing: the plain attention in the last layers
    records = refpos.model_positions(config.to_dict()).layers
    assert [r.prefix for r in records] == [3, 3, 8] and [r.queries for r in records] == [0, 0, 5]
    pixels = torch.randn(1, 3, 16, 16, dtype=torch.float64)  # its mask head takes image_size alone
    seen: list = []
    original = hf.apply_rotary_pos_emb

    def wrapped(q, k, cos, sin, **kwargs):
        out = original(q, k, cos, sin, **kwargs)
        seen.append([t.detach().double().numpy()[0] for t in (q, k, *out)])
        return out

    hf.apply_rotary_pos_emb = wrapped
    try:
        with torch.no_grad():
            model(pixel_values=pixels)
    finally:
        hf.apply_rotary_pos_emb = original
    assert len(seen) == 3
    rope = VisionRope("dinov3", 16, theta=config.rope_parameters["rope_theta"])
    for record, (q, k, q_out, k_out) in zip(records, seen, strict=True):
        positions = dinov3_patch_positions(4, 4, prefix=record.prefix)
        assert record.rope == rope
        for before, after in ((q, q_out), (k, k_out)):
            bound = DINOV3_ATOL * _pair_norm(before)
            assert np.all(np.abs(apply_vision_rope(before, positions, rope) - after) <= bound)
            if record.queries:
                rotated = positions.copy()
                rotated[:record.queries] = -1.0
                assert np.any(np.abs(apply_vision_rope(before, rotated, rope) - after) > bound)
                shifted = np.concatenate([dinov3_patch_positions(4, 4, prefix=3), np.zeros((5, 2))])
                assert np.any(np.abs(apply_vision_rope(before, shifted, rope) - after) > bound)
