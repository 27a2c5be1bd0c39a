"""``apply_vision_rope_frames`` (a class token before each frame, turned by given angles), the ``gemma4`` form's
per-axis spans and ``sam3_patch_positions``: one frame is ``apply_vision_rope`` with ``prefix_angles``; frames are
independent of each other's order; bad inputs raise naming the parameter."""

from __future__ import annotations

import numpy as np
import pytest

from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    apply_vision_rope_frames,
    qwen_patch_positions,
    sam3_patch_positions,
    vision_cos_sin,
    vision_split_pairs,
)

RNG = np.random.default_rng(5)
ROPE = VisionRope("qwen2_vl", 16)
ANGLES = RNG.normal(size=(1, 8))


def test_one_frame_is_apply_vision_rope_with_prefix_angles():
    positions = qwen_patch_positions([(1, 4, 4)])
    x = RNG.standard_normal((17, 16))
    np.testing.assert_array_equal(apply_vision_rope_frames(x, positions, ROPE, [16], prefix_angles=ANGLES),
                                  apply_vision_rope(x, positions, ROPE, prefix_angles=ANGLES))


def test_each_frame_turns_its_own_class_token_and_patches():
    grids = [(1, 2, 4), (2, 2, 2)]
    positions = qwen_patch_positions(grids)
    frames = [8, 4, 4]
    x = RNG.standard_normal((3 + 16, 16))
    out = np.asarray(apply_vision_rope_frames(x, positions, ROPE, frames, prefix_angles=ANGLES))
    starts = [0, 9, 14]
    for start, at, n in zip(starts, [0, 8, 12], frames, strict=True):
        one = apply_vision_rope(x[start:start + 1 + n], positions[at:at + n], ROPE, prefix_angles=ANGLES)
        np.testing.assert_array_equal(out[start:start + 1 + n], one)


@pytest.mark.parametrize(("frames", "angles", "message"), [
    ([8, 4], ANGLES, "frames"), ([8, 0, 8], ANGLES, "frames"), ([16], ANGLES[0], "prefix_angles"),
])
def test_bad_frames_raise_naming_the_parameter(frames, angles, message):
    positions = qwen_patch_positions([(1, 4, 4)])
    with pytest.raises(ValueError, match=message):
        apply_vision_rope_frames(np.zeros((17, 16)), positions, ROPE, frames, prefix_angles=angles)


def test_gemma4_pairs_sit_in_one_half_layout_span_per_axis():
    """Pair j < D/4 is channels (j, j + D/4) and reads the column; pair D/4 + j is (D/2 + j, 3D/4 + j), the row."""
    rope = VisionRope("gemma4", 16, theta=100.0)
    u, v = vision_split_pairs(np.arange(16), rope)
    assert list(u) == [0, 1, 2, 3, 8, 9, 10, 11] and list(v) == [4, 5, 6, 7, 12, 13, 14, 15]
    cos, _ = vision_cos_sin(np.array([[0, 3]]), rope)  # row 0, column 3: the first span turns, the second not
    assert np.all(cos[0, 8:] == 1.0) and not np.all(cos[0, :8] == 1.0)
    np.testing.assert_array_equal(cos[0, :4], cos[0, 4:8])  # the column's angles twice


def test_sam3_positions_are_row_major_and_scaled():
    np.testing.assert_array_equal(sam3_patch_positions(2, 3), [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]])
    np.testing.assert_allclose(sam3_patch_positions(3, 3, 24 / 72)[-1], [2 / 3, 2 / 3])
    with pytest.raises(ValueError, match="scale"):
        sam3_patch_positions(2, 2, 0.0)
    with pytest.raises(ValueError, match="rows"):
        sam3_patch_positions(0, 2)


def test_a_tower_with_convolution_layers_follows_its_layer_types():
    import refpos

    config = {"model_type": "lfm3_vl_vision", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4}
    with pytest.raises(ValueError, match="layer_types"):
        refpos.model_positions(config)
    config["layer_types"] = ["conv", "conv", "full_attention", "conv"]
    assert refpos.model_positions(config).summary() == "vision layers 0-3: conv ×3 (0, 1, 3), vision_rope(qwen2_vl) ×1"
