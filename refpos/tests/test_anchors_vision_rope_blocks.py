"""Gemma 4's and SAM 3's 2-D vision RoPE against transformers' own modules (anchors env).

* Gemma 4 tables: ``Gemma4VisionRotaryEmbedding`` (float32 angles and tables) at ``(x, y)`` position ids against
  :func:`vision_cos_sin` of the form ``gemma4`` at ``(h, w) = (y, x)``, within the float32 table bound of
  :func:`refpos.tests.ports.float32_table_atol`;
* SAM 3 positions: ``Sam3ViTLayer.precompute_positions`` (float32) of a windowed and a global layer against
  :func:`sam3_patch_positions` in the order ``(w, h)`` the layer stores: the window's exactly (integers), the global
  ones within 2u relative (the scale ``window_size / G`` rounded to float32, then the product);
* SAM 3 tables: ``Sam3ViTRotaryEmbedding`` at those positions: the table bound of the largest angle, plus the
  coordinate's 2u relative error carried through ``ω`` (``2u·|φ|``);
* the whole towers (eval, float64 weights): the query and key before and after each layer's call of the rotary
  apply function against :func:`apply_vision_rope` of the query and key before. Gemma 4's call runs in float64 on
  float32 tables: the table bound times the pair's norm (√2 × the largest entry of the pair); SAM 3's apply casts to
  float32: the table bound plus 6u (inputs, cos, sin and the products rounded), times the pair's norm;
* wrong answers (the row and column swapped, Llama 4's or Qwen2-VL's form, positions from 1, a global layer's
  patch indices unscaled) are outside those bounds.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    pixtral_patch_positions,
    sam3_patch_positions,
    vision_angles,
    vision_cos_sin,
)
from refpos.tests.ports import float32_table_atol

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

U32 = 2.0**-24


def _pair_norm(x: np.ndarray, rope: VisionRope) -> np.ndarray:
    """``(..., N, 1)``: √2 × each token's largest channel (a bound on every pair's norm, whatever the layout)."""
    return np.sqrt(2.0) * np.abs(x).max(axis=-1, keepdims=True) * np.ones((1,) * x.ndim)


def _calls(module, name: str, run, tensors: int = 2) -> list:
    """Run ``run()`` with ``module.name`` wrapped; every call's first ``tensors`` tensor arguments and its outputs,
    float64."""
    original = getattr(module, name)
    seen: list = []

    def wrapped(*args, **kwargs):
        out = original(*args, **kwargs)
        given = [a for a in args if isinstance(a, torch.Tensor)][:tensors]
        outs = out if isinstance(out, tuple) else (out,)
        seen.append([t.detach().double().numpy() for t in (*given, *outs)])
        return out

    setattr(module, name, wrapped)
    try:
        with torch.no_grad():
            run()
    finally:
        setattr(module, name, original)
    return seen


def _gemma4_config():
    from transformers import Gemma4VisionConfig

    return Gemma4VisionConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                              intermediate_size=64, num_hidden_layers=1, patch_size=4, pooling_kernel_size=3,
                              position_embedding_size=32)


def _xy(height: int, width: int, padding: int = 0) -> np.ndarray:
    """The image processor's ``(x, y)`` ids, row-major, then ``padding`` patches at ``(−1, −1)``."""
    hw = pixtral_patch_positions(height, width)
    return np.concatenate([hw[:, ::-1], -np.ones((padding, 2), dtype=np.int64)], axis=0)


@pytest.mark.parametrize(("height", "width"), [(3, 6), (5, 2)])
def test_gemma4_tables(height, width):
    from transformers.models.gemma4 import modeling_gemma4 as hf

    config = _gemma4_config()
    rotary = hf.Gemma4VisionRotaryEmbedding(config)
    xy = _xy(height, width, padding=3)
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), torch.from_numpy(xy)[None])
    rope = VisionRope("gemma4", 16, theta=config.rope_parameters["rope_theta"])
    hw = xy[:, ::-1].copy()
    ours_cos, ours_sin = vision_cos_sin(hw, rope)
    atol = float32_table_atol(np.abs(vision_angles(hw, rope)).max())
    np.testing.assert_allclose(cos[0].double().numpy(), ours_cos, rtol=0, atol=atol)
    np.testing.assert_allclose(sin[0].double().numpy(), ours_sin, rtol=0, atol=atol)
    real = height * width  # the other forms take no padding position (−1)
    for form in ("llama4", "qwen2_vl"):  # the same frequencies in another layout or axis order
        other = vision_cos_sin(hw[:real], VisionRope(form, 16, rope.theta))[1]
        assert np.abs(other - sin[0, :real].double().numpy()).max() > atol


@pytest.mark.parametrize(("height", "width", "padding"), [(3, 6, 9), (6, 3, 0)])
def test_gemma4_model_rotation(height, width, padding):
    from transformers.models.gemma4 import modeling_gemma4 as hf

    torch.manual_seed(0)
    config = _gemma4_config()
    model = hf.Gemma4VisionModel(config).double().eval()
    xy = _xy(height, width, padding)
    pixels = torch.randn(1, len(xy), 3 * 16, dtype=torch.float64)
    calls = _calls(hf, "apply_multidimensional_rope",
                   lambda: model(pixel_values=pixels, pixel_position_ids=torch.from_numpy(xy)[None]), tensors=1)
    assert len(calls) == 2  # the query's and the key's, in the one layer
    rope = VisionRope("gemma4", 16, theta=config.rope_parameters["rope_theta"])
    hw = xy[:, ::-1].copy()
    wrong = {"row and column swapped": (rope, xy), "llama4 form": (VisionRope("llama4", 16, rope.theta), hw),
             "qwen2_vl form": (VisionRope("qwen2_vl", 16, rope.theta), hw), "positions from 1": (rope, hw + 1)}
    worst = 0.0
    for before, after in calls:
        before, after = np.moveaxis(before[0], 1, 0), np.moveaxis(after[0], 1, 0)  # (heads, N, D)
        bound = float32_table_atol(np.abs(vision_angles(hw, rope)).max()) * _pair_norm(before, rope)
        ours = np.asarray(apply_vision_rope(before, hw, rope))
        assert np.all(np.abs(ours - after) <= bound)
        worst = max(worst, float(np.abs(ours - after).max()))
        real = height * width  # the wrong answers on the image's patches (the other forms take no −1)
        for name, (claim, at) in wrong.items():
            wrong_answer = np.asarray(apply_vision_rope(before[:, :real], at[:real], claim))
            assert np.any(np.abs(wrong_answer - after[:, :real]) > bound[:, :real]), name
    assert worst < 1e-5


def _sam3_config():
    from transformers import Sam3ViTConfig

    return Sam3ViTConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64, num_hidden_layers=2,
                         image_size=40, patch_size=4, window_size=4, global_attn_indexes=[1],
                         pretrain_image_size=24)


def _sam3_positions(config, layer: int) -> np.ndarray:
    """refpos's ``(h, w)`` of the layer: window-local (windowed), or the config's grid scaled (global)."""
    if layer not in config.global_attn_indexes:
        return sam3_patch_positions(config.window_size, config.window_size)
    side = config.image_size // config.patch_size
    return sam3_patch_positions(side, side, config.window_size / side)


def test_sam3_positions_and_tables():
    from transformers.models.sam3 import modeling_sam3 as hf

    config = _sam3_config()
    rope = VisionRope("sam3", 16, theta=config.rope_parameters["rope_theta"])
    rotary = hf.Sam3ViTRotaryEmbedding(config)
    for layer, window in ((0, config.window_size), (1, 0)):
        stored = hf.Sam3ViTLayer.precompute_positions(config, window)  # (N, 2): (w, h), float32
        ours = _sam3_positions(config, layer)
        np.testing.assert_allclose(stored.double().numpy()[:, ::-1], ours, rtol=2 * U32, atol=0)
        if window:
            np.testing.assert_array_equal(stored.double().numpy()[:, ::-1], ours)
        cos, sin = rotary(torch.zeros(1), stored)
        angle = np.abs(vision_angles(ours, rope)).max()
        atol = float32_table_atol(angle) + 2 * U32 * angle
        ours_cos, ours_sin = vision_cos_sin(ours, rope)
        np.testing.assert_allclose(cos[0].double().numpy(), ours_cos, rtol=0, atol=atol)
        np.testing.assert_allclose(sin[0].double().numpy(), ours_sin, rtol=0, atol=atol)


@pytest.mark.parametrize("side", [40, 36])  # 36: the windows pad the 9 × 9 grid to 12 × 12
def test_sam3_model_rotation(side):
    from transformers import Sam3ViTModel
    from transformers.models.sam3 import modeling_sam3 as hf

    torch.manual_seed(0)
    config = _sam3_config()
    config.image_size = side
    model = Sam3ViTModel(config).double().eval()
    pixels = torch.randn(1, 3, side, side, dtype=torch.float64)
    calls = _calls(hf, "apply_rotary_pos_emb_2d", lambda: model(pixel_values=pixels))
    assert len(calls) == config.num_hidden_layers
    rope = VisionRope("sam3", 16, theta=config.rope_parameters["rope_theta"])
    worst = 0.0
    for layer, (q, k, q_out, k_out) in enumerate(calls):
        positions = _sam3_positions(config, layer)
        wrong = {"row and column swapped": (rope, positions[:, ::-1].copy()),
                 "positions from 1": (rope, positions + 1.0)}
        if layer in config.global_attn_indexes:  # Llama 4's rotation, of which SAM 3's is the scaled coordinates'
            wrong["the patch indices, not scaled"] = (rope, np.rint(positions / positions[1, 1]))
        else:  # integer coordinates: Qwen2-VL's form (the other layout and axis order) takes them
            wrong["qwen2_vl form"] = (VisionRope("qwen2_vl", 16, rope.theta), positions.astype(np.int64))
        angle = np.abs(vision_angles(positions, rope)).max()
        for before, after in ((q, q_out), (k, k_out)):
            before, after = before[0], after[0]  # the first window (windowed) or the image: (heads, N, D)
            bound = (float32_table_atol(angle) + 2 * U32 * angle + 6 * U32) * _pair_norm(before, rope)
            ours = np.asarray(apply_vision_rope(before, positions, rope))
            assert np.all(np.abs(ours - after) <= bound)
            worst = max(worst, float(np.abs(ours - after).max()))
            for name, (claim, at) in wrong.items():
                assert np.any(np.abs(np.asarray(apply_vision_rope(before, at, claim)) - after) > bound), name
    assert worst < 1e-5


def test_video_llama_3_rotation_over_packed_grids_of_their_own_merge_sizes():
    """Video-LLaMA 3's tower on an image (merge 1) and a two-frame video (merge 2), packed: Qwen2-VL's rotation of
    each grid's patches in merge blocks of its own size; the float32 apply's bound; the patches taken in merge blocks
    of one size for both, or row-major, are outside it."""
    from transformers.models.video_llama_3 import modeling_video_llama_3 as hf

    from refpos.rope.vision import qwen_patch_positions

    torch.manual_seed(0)
    config = hf.VideoLlama3VisionConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64,
                                        num_hidden_layers=1, patch_size=2)
    model = hf.VideoLlama3VisionModel(config).double().eval()
    grids, merges = [(1, 4, 6), (2, 4, 4)], [1, 2]
    patches = sum(t * h * w for t, h, w in grids)
    pixels = torch.randn(patches, 3 * 2 * 2, dtype=torch.float64)
    calls = _calls(hf, "apply_rotary_pos_emb_vision", lambda: model(
        pixel_values=pixels, grid_thw=torch.tensor(grids), merge_sizes=torch.tensor(merges)))
    q, k, q_out, k_out = (np.moveaxis(t, 1, 0) for t in calls[0])  # (heads, N, D)
    rope = VisionRope("qwen2_vl", 16, theta=config.rope_parameters["rope_theta"])
    positions = qwen_patch_positions(grids, spatial_merge_size=merges)
    wrong = {"one merge size (2)": qwen_patch_positions([(1, 4, 6), (2, 4, 4)], spatial_merge_size=2),
             "row-major": qwen_patch_positions(grids, spatial_merge_size=1)}
    angle = np.abs(vision_angles(positions, rope)).max()
    for before, after in ((q, q_out), (k, k_out)):
        bound = (float32_table_atol(angle) + 6 * U32) * _pair_norm(before, rope)
        ours = np.asarray(apply_vision_rope(before, positions, rope))
        assert np.all(np.abs(ours - after) <= bound)
        assert np.abs(ours - after).max() < 1e-5
        for name, at in wrong.items():
            assert np.any(np.abs(np.asarray(apply_vision_rope(before, at, rope)) - after) > bound), name


def test_lfm3_vl_attention_layers_rotate_and_its_convolution_layers_have_no_attention():
    """LFM3-VL's tower: refpos's records follow ``layer_types`` (``conv``: no attention), and each attention layer's
    call is Qwen2-VL's rotation in merge blocks within the float32 apply's bound (row-major outside it)."""
    from transformers.models.lfm3_vl import modeling_lfm3_vl as hf

    import refpos
    from refpos.rope.vision import qwen_patch_positions

    torch.manual_seed(0)
    config = hf.Lfm3VlVisionConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                                   intermediate_size=64, num_hidden_layers=4, patch_size=2, temporal_patch_size=1)
    records = refpos.model_positions(config.to_dict()).layers
    assert [r.kind for r in records] == ["no_attention" if t == "conv" else "vision_rope" for t in config.layer_types]
    model = hf.Lfm3VlVisionModel(config).double().eval()
    grids = [(1, 4, 6)]
    pixels = torch.randn(24, 3 * 2 * 2, dtype=torch.float64)
    calls = _calls(hf, "apply_rotary_pos_emb_vision", lambda: model(pixel_values=pixels,
                                                                    grid_thw=torch.tensor(grids)))
    assert len(calls) == config.layer_types.count("full_attention")
    rope = records[config.layer_types.index("full_attention")].rope
    positions = qwen_patch_positions(grids, spatial_merge_size=config.spatial_merge_size)
    angle = np.abs(vision_angles(positions, rope)).max()
    for q, k, q_out, k_out in calls:
        for before, after in ((q, q_out), (k, k_out)):
            before, after = np.moveaxis(before, 1, 0), np.moveaxis(after, 1, 0)  # (heads, N, D)
            bound = (float32_table_atol(angle) + 6 * U32) * _pair_norm(before, rope)
            assert np.all(np.abs(np.asarray(apply_vision_rope(before, positions, rope)) - after) <= bound)
            row_major = qwen_patch_positions(grids, spatial_merge_size=1)
            assert np.any(np.abs(np.asarray(apply_vision_rope(before, row_major, rope)) - after) > bound)
