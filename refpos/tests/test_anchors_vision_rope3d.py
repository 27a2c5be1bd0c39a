"""3-D vision RoPE (refpos.rope.vision3d) against transformers' own code (anchors env), and the 2-D towers of
Qwen3.5, ERNIE-4.5-VL and the Omni thinkers, which are the ``qwen2_vl`` form of refpos.rope.vision.

* MiniMax-M3-VL: positions exact against ``vision_utils.get_vision_position_ids(include_temporal=True)``;
  the module's ``recomposition_frequencies`` on float64 angles gives refpos's tables bit for bit; its
  float32 forward within atol = (3·max φ + 4)·2⁻²⁴ (float32 ω and product relative to the angle, then 4 ulps
  for cos/sin); ``apply_rotary_pos_emb_vision`` on float64 inputs with refpos's tables: exact.
* V-JEPA 2: positions exact against ``VJEPA2RopeAttention.get_position_ids``; ``apply_rotary_embeddings`` runs
  in the input's dtype, float64 here, computing ω as ``1 / 10000**(i/n)`` where refpos takes ``10000**(-i/n)``
  (each within an ulp or two): atol = (4·max φ·2⁻⁵³ + 2⁻⁵²)·2·max|x| (the angle's relative error times the angle,
  then cos/sin rounding, for the two terms of each output).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from refpos.rope.vision import VisionRope, apply_vision_rope, qwen_patch_positions, vision_cos_sin
from refpos.rope.vision3d import (
    VisionRope3D,
    apply_vision3d_rope,
    thw_patch_positions,
    vision3d_cos_sin,
    vision3d_frequencies,
    vjepa2_patch_positions,
)
from refpos.tests.ports import float32_table_atol

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

GRIDS = [(1, 4, 6), (3, 6, 2), (2, 2, 2)]



@pytest.mark.parametrize(("hidden", "heads"), [(1280, 16), (1152, 16), (768, 12)])
def test_minimax_m3_vl_vision_tower(hidden, heads):
    from transformers.models.minimax_m3_vl.configuration_minimax_m3_vl import MiniMaxM3VLVisionConfig
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import (
        MiniMaxM3VLVisionRotaryEmbedding,
        apply_rotary_pos_emb_vision,
    )
    from transformers.vision_utils import get_vision_position_ids

    config = MiniMaxM3VLVisionConfig(hidden_size=hidden, num_attention_heads=heads)
    rotary = MiniMaxM3VLVisionRotaryEmbedding(config)
    rope = VisionRope3D("minimax_m3_vl", hidden // heads, theta=config.rope_parameters["rope_theta"])
    positions = thw_patch_positions(GRIDS, 2)
    np.testing.assert_array_equal(positions, get_vision_position_ids(torch.tensor(GRIDS), 2,
                                                                     include_temporal=True).numpy())
    _, omega = vision3d_frequencies(rope)
    n = rope.axis_dim // 2
    np.testing.assert_allclose(omega[:n], rotary.inv_freq.double().numpy(), rtol=1e-6, atol=0)  # float32 pow
    per_axis = positions[..., None].astype(np.float64) * omega[:n]  # (N, 3, n): every axis at every ω
    hf_angles = rotary.recomposition_frequencies(torch.from_numpy(per_axis)).numpy()  # (N, 3d)
    cos, sin = vision3d_cos_sin(positions, rope)
    np.testing.assert_array_equal(cos, np.cos(hf_angles))
    np.testing.assert_array_equal(sin, np.sin(hf_angles))
    hf_cos, hf_sin = rotary(torch.zeros(1, dtype=torch.float32), torch.from_numpy(positions))
    atol = float32_table_atol(np.abs(hf_angles).max())
    np.testing.assert_allclose(hf_cos.double().numpy(), cos, rtol=0, atol=atol)
    np.testing.assert_allclose(hf_sin.double().numpy(), sin, rtol=0, atol=atol)
    x = np.random.default_rng(0).standard_normal((positions.shape[0], 3, rope.head_dim))  # (N, heads, D) as HF
    hf_x, _ = apply_rotary_pos_emb_vision(torch.from_numpy(x), torch.from_numpy(x), torch.from_numpy(cos),
                                          torch.from_numpy(sin))
    ours = np.moveaxis(apply_vision3d_rope(np.moveaxis(x, 1, 0), positions, rope), 0, 1)
    np.testing.assert_array_equal(ours, hf_x.numpy())
    assert rope.rotary_dim < rope.head_dim or rope.head_dim % 6 == 0  # the tail passes through
    np.testing.assert_array_equal(ours[..., rope.rotary_dim:], x[..., rope.rotary_dim:])


@pytest.mark.parametrize(("hidden", "heads"), [(1024, 16), (384, 12), (1280, 16)])
def test_vjepa2(hidden, heads):
    from transformers.models.vjepa2.configuration_vjepa2 import VJEPA2Config
    from transformers.models.vjepa2.modeling_vjepa2 import VJEPA2RopeAttention

    config = VJEPA2Config(crop_size=64, patch_size=16, frames_per_clip=8, tubelet_size=2)
    attention = VJEPA2RopeAttention(config, hidden, heads)
    rope = VisionRope3D("vjepa2", hidden // heads)
    grid = config.crop_size // config.patch_size
    tokens = (config.frames_per_clip // config.tubelet_size) * grid**2
    hidden_states = torch.zeros(1, tokens, hidden, dtype=torch.float64)
    kept = torch.tensor([0, 3, 5, 17, 18, 40, 63])  # a mask keeps these tokens
    for ids in (np.arange(tokens), kept.numpy()):
        masks = None if len(ids) == tokens else kept[None]
        hf_ids = attention.get_position_ids(hidden_states, masks=masks)  # (frame, height, width)
        positions = vjepa2_patch_positions(ids, grid)
        hf = np.stack([np.broadcast_to(np.asarray(p), (1, heads, len(ids)))[0, 0] for p in hf_ids], axis=-1)
        np.testing.assert_array_equal(positions, hf)
        x = np.random.default_rng(len(ids)).standard_normal((1, heads, len(ids), rope.head_dim))
        hf_x = attention.apply_rotary_embeddings(torch.from_numpy(x), hf_ids).numpy()
        ours = apply_vision3d_rope(x, positions, rope)
        angle = float(positions.max()) * 1.0  # ω_0 = 1: the largest angle
        atol = (4 * angle * 2.0**-53 + 2.0**-52) * 2 * float(np.abs(x).max())
        np.testing.assert_allclose(ours, hf_x, rtol=0, atol=atol)
        np.testing.assert_array_equal(ours[..., rope.rotary_dim:], x[..., rope.rotary_dim:])
    # not a rotation: the norm of a rotated pair changes away from position 0
    pair = np.zeros((1, rope.head_dim))
    pair[0, 2:4] = [1.0, 0.0]
    moved = apply_vision3d_rope(pair, np.array([[5, 0, 0]]), rope)
    assert abs(np.linalg.norm(moved[0, 2:4]) - 1.0) > 1e-3


@pytest.mark.parametrize(("module", "config_cls", "rotary_cls"), [
    ("qwen3_5", "Qwen3_5VisionConfig", "Qwen3_5VisionRotaryEmbedding"),
    ("qwen3_5_moe", "Qwen3_5MoeVisionConfig", "Qwen3_5MoeVisionRotaryEmbedding"),
    ("ernie4_5_vl_moe", "Ernie4_5_VLMoeVisionConfig", "Ernie4_5_VLMoeVisionRotaryEmbedding"),
    ("qwen2_5_omni", "Qwen2_5OmniVisionEncoderConfig", "Qwen2_5OmniVisionRotaryEmbedding"),
    ("qwen3_omni_moe", "Qwen3OmniMoeVisionEncoderConfig", "Qwen3OmniMoeVisionRotaryEmbedding"),
])
def test_two_dimensional_towers_of_the_new_families(module, config_cls, rotary_cls):
    """These towers rotate (h, w) only (the frame is not rotated): the qwen2_vl form, exactly."""
    configuration = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    config = getattr(configuration, config_cls)()
    rotary = getattr(modeling, rotary_cls)(config)
    head_dim = config.hidden_size // (getattr(config, "num_heads", None) or config.num_attention_heads)
    rope = VisionRope("qwen2_vl", head_dim, theta=config.rope_parameters["rope_theta"])
    positions = qwen_patch_positions(GRIDS, 2)
    quarter = head_dim // 4
    omega = rope.theta ** (-4.0 * np.arange(quarter) / head_dim)
    np.testing.assert_allclose(omega, rotary.inv_freq.double().numpy(), rtol=1e-6, atol=0)  # float32 pow: a few ulps
    per_axis = positions[..., None].astype(np.float64) * omega  # (N, 2, D/4)
    hf_angles = rotary.recomposition_frequencies(torch.from_numpy(per_axis)).numpy()
    cos, sin = vision_cos_sin(positions, rope)
    np.testing.assert_array_equal(cos, np.cos(hf_angles))
    np.testing.assert_array_equal(sin, np.sin(hf_angles))
    x = np.random.default_rng(4).standard_normal((positions.shape[0], head_dim))
    rotate_half = np.concatenate([-x[:, head_dim // 2:], x[:, :head_dim // 2]], axis=-1)
    np.testing.assert_allclose(apply_vision_rope(x, positions, rope), x * cos + rotate_half * sin,
                               rtol=0, atol=4 * 2.0**-52 * float(np.abs(x).max()))


@pytest.mark.parametrize("model_type", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe",
                                        "qwen3_5", "qwen3_5_moe", "ernie4_5_vl_moe", "qwen2_5_omni",
                                        "qwen3_omni_moe", "minimax_m3_vl", "vjepa2"])
def test_model_positions_towers_match_transformers(model_type):
    """The tower records model_positions appends, on transformers' own default config of the model: every tower's
    layers, head size and ω are those of the rotary module its source names, built from the same config (ω in
    float32: rtol 1e-6). (Some of these default configs give text geometry transformers' own text model cannot
    run, GLM-4.1V's sections over all 64 pairs; the towers are read alone.)"""
    from transformers import AutoConfig

    from refpos.models.facts import STACKS
    from refpos.models.families import family_of
    from refpos.models.kinds import KINDS, Stack
    from refpos.models.parts import parts_of
    from refpos.models.view import ConfigView

    hf = AutoConfig.for_model(model_type)
    top = ConfigView(hf.to_dict())
    sections = [(part.name, part.key, family_of(part.model_type), part.view) for part in parts_of(top)]
    if not sections:  # a vision model of its own (V-JEPA 2): its stacks are its towers
        row = family_of(model_type)
        sections = [(name, "", row, top) for name in STACKS[row.stacks]]
    towers, layers_of = [], {}
    for name, path, row, view in sections:
        if row is None or "vision_rope" not in row.encodings:
            continue
        stack = row.stack(name if name in STACKS[row.stacks] else STACKS[row.stacks][0])
        layers_of[name] = KINDS["vision_rope"].build(Stack(view, name, "single", row, stack.facts_of("vision_rope")))
        towers.append((name, path, row))
    assert towers, f"{model_type}: no vision tower resolved"
    for name, path, row in towers:
        layers = layers_of[name]
        section = hf
        for key in filter(None, path.split(".")):
            section = getattr(section, key)
        module, _, names = row.source.partition(": ")
        modeling = importlib.import_module("transformers.models." + module.replace("/", ".")[: -len(".py")])
        form = layers[0].rope.kind
        if form == "vjepa2":
            width, heads = (section.hidden_size, section.num_attention_heads) if name == "encoder" else (
                section.pred_hidden_size, section.pred_num_attention_heads)
            attention = modeling.VJEPA2RopeAttention(section, width, heads)
            assert len(layers) == (section.num_hidden_layers if name == "encoder"
                                   else section.pred_num_hidden_layers)
            assert {layer.rope.axis_dim for layer in layers} == {attention.d_dim}
            assert layers[0].rope.head_dim == attention.attention_head_size
            continue
        rotary = getattr(modeling, names.split(",")[0])(section)
        assert len(layers) == getattr(section, "depth", None) or len(layers) == section.num_hidden_layers
        rope = layers[0].rope
        omega = (vision3d_frequencies(rope)[1][: rope.axis_dim // 2] if form == "minimax_m3_vl"
                 else rope.theta ** (-4.0 * np.arange(rope.head_dim // 4) / rope.head_dim))
        np.testing.assert_allclose(omega, rotary.inv_freq.double().numpy(), rtol=1e-6, atol=0)
