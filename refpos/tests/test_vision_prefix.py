"""DINOv3's and MLCD's vision RoPE (refpos.rope.vision forms ``dinov3`` and ``mlcd``), without torch: the formulas
written out again here from docs/mrope.md#vision-encoders-2-d-axial-rope, the tokens before the patches, bad input
refused naming the parameter, and model_positions of the towers (the anchors against transformers are
test_anchors_vision_rope_prefix.py).

DINOv3: patch ``i`` of ``n`` at ``c = (2i + 1)/n − 1``; pair ``j < D/4`` turns by ``c_h·2π·θ^(−4j/D)``, pair
``j ≥ D/4`` by ``c_w·2π·θ^(−4(j − D/4)/D)``, half layout; class and register tokens unrotated. MLCD: the same pairs
on 0-based row-major indices without the 2π; its class token's pair ``j`` turns by the given angle ``α_j``.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    dinov3_patch_positions,
    pixtral_patch_positions,
    vision_angles,
)

RNG = np.random.default_rng(53)


def rotate_half_layout(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Pairs ``(j, j + D/2)`` of ``x`` ``(N, D)`` turned by ``angles`` ``(N, D/2)``."""
    half = x.shape[-1] // 2
    u, v = x[:, :half], x[:, half:]
    return np.concatenate([u * np.cos(angles) - v * np.sin(angles), v * np.cos(angles) + u * np.sin(angles)], -1)


def written_out(coords: np.ndarray, d: int, theta: float, two_pi: bool) -> np.ndarray:
    """``(N, D/2)`` angles from the module docstring's formula."""
    quarter = d // 4
    omega = theta ** (-4.0 * np.arange(quarter) / d) * (2 * np.pi if two_pi else 1.0)
    return np.concatenate([coords[:, :1] * omega, coords[:, 1:] * omega], axis=-1)


def test_dinov3_centres():
    np.testing.assert_array_equal(dinov3_patch_positions(1, 4)[:, 1], [-0.75, -0.25, 0.25, 0.75])
    positions = dinov3_patch_positions(3, 2, prefix=2)
    np.testing.assert_array_equal(positions[:2], 0.0)
    np.testing.assert_allclose(positions[2:, 0], np.repeat([-2 / 3, 0.0, 2 / 3], 2), atol=1e-15)
    assert np.abs(positions).max() < 1.0 and positions.dtype == np.float64


@pytest.mark.parametrize(("h", "w", "prefix"), [(2, 3, 1), (4, 4, 5), (1, 7, 0)])
def test_dinov3_rotation_is_the_written_out_formula_and_the_prefix_is_untouched(h, w, prefix):
    rope = VisionRope("dinov3", 16, theta=100.0)
    positions = dinov3_patch_positions(h, w, prefix=prefix)
    x = RNG.standard_normal((prefix + h * w, 16))
    y = apply_vision_rope(x, positions, rope)
    np.testing.assert_array_equal(y[:prefix], x[:prefix])
    np.testing.assert_allclose(y, rotate_half_layout(x, written_out(positions, 16, 100.0, True)), atol=1e-14)
    assert np.abs(vision_angles(positions, rope)).max() <= 2 * np.pi


def test_dinov3_wrong_answers_differ():
    """The mistakes the anchors also grade: indices instead of centres, prefix rotated, axes swapped, no 2π."""
    rope = VisionRope("dinov3", 16, theta=100.0)
    positions = dinov3_patch_positions(3, 5, prefix=1)
    x = RNG.standard_normal((16, 16))
    right = apply_vision_rope(x, positions, rope)
    indices = np.concatenate([[[0.0, 0.0]], pixtral_patch_positions(3, 5).astype(np.float64)])
    for wrong in (indices, positions[:, ::-1].copy(), positions / (2 * np.pi),
                  np.concatenate([[[-1.0, -1.0]], positions[1:]])):
        assert np.abs(apply_vision_rope(x, wrong, rope) - right).max() > 1e-3


def test_mlcd_class_token_turns_by_its_given_angles():
    rope = VisionRope("mlcd", 16)
    patches = pixtral_patch_positions(2, 3)
    alpha = RNG.normal(0.0, 1.0, (1, 8))
    x = RNG.standard_normal((2, 7, 16))  # (heads, 1 + N, D)
    y = apply_vision_rope(x, patches, rope, prefix_angles=alpha)
    angles = np.concatenate([alpha, written_out(patches.astype(np.float64), 16, 10000.0, False)])
    for head in range(2):
        np.testing.assert_allclose(y[head], rotate_half_layout(x[head], angles), atol=1e-14)
    np.testing.assert_array_equal(apply_vision_rope(x[0, 1:], patches, rope),
                                  apply_vision_rope(x[0, 1:], patches, VisionRope("qwen2_vl", 16)))


def test_bad_input_names_the_parameter():
    rope = VisionRope("mlcd", 16)
    x = np.ones((3, 16))
    with pytest.raises(ValueError, match="prefix_angles"):
        apply_vision_rope(x, [[0, 0], [0, 1]], rope, prefix_angles=np.zeros((1, 4)))
    with pytest.raises(TypeError, match="prefix_angles"):
        apply_vision_rope(x, [[0, 0], [0, 1]], rope, prefix_angles=np.zeros((1, 8), dtype=np.int64))
    with pytest.raises(ValueError, match="prefix_angles"):
        apply_vision_rope(x, [[0, 0], [0, 1]], rope, prefix_angles=np.full((1, 8), np.nan))
    with pytest.raises(ValueError, match="x's N axis"):
        apply_vision_rope(x, [[0, 0], [0, 1]], rope)  # the class token's angles not given
    dinov3 = VisionRope("dinov3", 16)
    with pytest.raises(TypeError, match="positions"):
        apply_vision_rope(x, np.zeros((3, 2), dtype=np.int64), dinov3)  # indices, not coordinates
    with pytest.raises(ValueError, match="positions"):
        apply_vision_rope(x, np.full((3, 2), np.inf), dinov3)
    for name, args in (("height", (0, 2)), ("width", (2, -1)), ("prefix", (2, 2, -1))):
        with pytest.raises(ValueError, match=name):
            dinov3_patch_positions(*args)
    with pytest.raises(ValueError, match="kind"):
        VisionRope("dinov2", 16)


DINOV3 = {"model_type": "dinov3_vit", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
          "rope_theta": 100.0, "num_register_tokens": 4, "pos_embed_shift": None, "pos_embed_jitter": None,
          "pos_embed_rescale": 2.0, "patch_size": 16, "image_size": 224}
MLCD = {"model_type": "mlcd_vision_model", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 3,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "axial"}, "image_size": 336, "patch_size": 14}


def test_model_positions_of_dinov3_reads_its_training_keys_and_counts_its_registers():
    positions = refpos.model_positions({**DINOV3, "pos_embed_shift": 0.1, "pos_embed_jitter": 1.2})
    layers = [layer.describe() for layer in positions.layers]
    assert len(layers) == 2 and positions.complete
    assert {k: layers[0][k] for k in ("form", "head_dim", "theta", "prefix", "prefix_angles")} == {
        "form": "dinov3", "head_dim": 16, "theta": 100.0, "prefix": 5, "prefix_angles": "unrotated"}


def test_model_positions_of_sapiens2_is_dinov3_s_rotation_beside_its_refused_head():
    """Sapiens2's rotary module is DINOv3's (patch centres, class and registers unrotated, the augmentations in
    training only); its task head, which Sapiens2Model does not build, stays refused by name."""
    positions = refpos.model_positions({**DINOV3, "model_type": "sapiens2", "head_config": {"model_type":
                                                                                             "sapiens2_head"}})
    vision = [layer.describe() for layer in positions.layers if layer.stack == "vision"]
    assert len(vision) == 2 and {(d["form"], d["prefix"]) for d in vision} == {("dinov3", 5)}
    assert not positions.complete and "sapiens2_head" in positions.not_modelled["head_config.model_type"]


def test_model_positions_of_chmv2_resolves_its_dinov3_backbone():
    positions = refpos.model_positions({"model_type": "chmv2", "backbone_config": DINOV3})
    assert {layer.describe()["form"] for layer in positions.layers} == {"dinov3"}


@pytest.mark.parametrize("model_type", ["mlcd_vision_model", "mlcd"])
def test_model_positions_of_mlcd_names_the_class_token_weight(model_type):
    positions = refpos.model_positions({**MLCD, "model_type": model_type})
    layer = positions.layers[0].describe()
    assert len(positions.layers) == 3 and positions.complete
    assert (layer["form"], layer["head_dim"], layer["prefix"], layer["prefix_angles"]) == ("mlcd", 16, 1,
                                                                                          "class_pos_emb")


def test_mlcd_with_another_rope_type_is_refused_by_the_key():
    with pytest.raises(ValueError, match=r"rope_parameters\.rope_type"):
        refpos.model_positions({**MLCD, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}})
