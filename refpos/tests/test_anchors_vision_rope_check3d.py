"""``refpos check vision_rope`` on transformers' own float32 runs (anchors env): the 3-D forms and learned class
angles, refpos's own calls ``apply_vision3d_rope`` and ``apply_vision_rope_prefixed``.

* MiniMax-M3-VL: ``MiniMaxM3VLVisionRotaryEmbedding`` computes its cos/sin tables in float32;
  ``apply_rotary_pos_emb_vision`` of a float32 query with them is a correct float32 port: the check passes it
  (its error a sizeable part of the bound, at frames, rows and columns up to several hundred). The same code
  given positions with the frame zeroed, or (h, w, t) for (t, h, w), is named ``frame_ignored`` / ``frame_last``.
* V-JEPA 2: ``VJEPA2RopeAttention.apply_rotary_embeddings`` runs in the query's dtype; float32: passes. With the
  frame and the row exchanged in its position ids: ``frame_row_swapped``.
* MLCD: the whole tower run in float32, the query before and after the first call of
  ``apply_rotary_pos_emb_vision``, its class token turned by the model's ``class_pos_emb``: passes as
  ``apply_vision_rope_prefixed``; the class angles zeroed: ``class_angles_dropped``.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.check.kinds import check_kind
from refpos.rope.vision import pixtral_patch_positions
from refpos.rope.vision3d import thw_patch_positions, vjepa2_patch_positions

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors


def _ids(result: dict) -> list[str]:
    return [d["id"] for d in result["diagnosis"]]


@pytest.mark.parametrize(("hidden", "heads", "grids", "scale"), [
    (1280, 16, [(1, 4, 6), (3, 6, 2)], 1),
    (1152, 16, [(2, 4, 4)], 90),  # coordinates to 270: a large angle
])
def test_minimax_m3_vl_float32_passes_and_its_mistakes_are_named(hidden, heads, grids, scale):
    from transformers.models.minimax_m3_vl.configuration_minimax_m3_vl import MiniMaxM3VLVisionConfig
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import (
        MiniMaxM3VLVisionRotaryEmbedding,
        apply_rotary_pos_emb_vision,
    )

    config = MiniMaxM3VLVisionConfig(hidden_size=hidden, num_attention_heads=heads)
    rotary = MiniMaxM3VLVisionRotaryEmbedding(config)
    positions = thw_patch_positions(grids, 2) * scale
    head_dim = hidden // heads
    rope = {"form": "minimax_m3_vl", "head_dim": head_dim, "rope_theta": config.rope_parameters["rope_theta"]}
    x = np.random.default_rng(0).standard_normal((len(positions), head_dim)).astype(np.float32)

    def hf(at: np.ndarray) -> np.ndarray:
        cos, sin = rotary(torch.zeros(1, dtype=torch.float32), torch.from_numpy(np.ascontiguousarray(at)))
        q = torch.from_numpy(x)[:, None, :]  # (N, heads = 1, D)
        out, _ = apply_rotary_pos_emb_vision(q, q, cos, sin)
        return out[:, 0, :].numpy()

    call = {"x": x.astype(np.float64), "positions": positions, "rope": rope}
    result = check_kind("vision_rope", "apply_vision3d_rope", call, hf(positions))
    assert result["ok"] and result["dtype"] == "float32" and result["max_ratio"] > 1e-3, result["max_ratio"]
    frameless = positions.copy()
    frameless[:, 0] = 0
    assert _ids(check_kind("vision_rope", "apply_vision3d_rope", call, hf(frameless))) == [
        "vision_rope_frame_ignored"]
    assert _ids(check_kind("vision_rope", "apply_vision3d_rope", call, hf(positions[:, [1, 2, 0]]))) == [
        "vision_rope_frame_last"]


@pytest.mark.parametrize(("hidden", "heads"), [(1024, 16), (384, 12)])
def test_vjepa2_float32_passes_and_a_swapped_frame_is_named(hidden, heads):
    from transformers.models.vjepa2.configuration_vjepa2 import VJEPA2Config
    from transformers.models.vjepa2.modeling_vjepa2 import VJEPA2RopeAttention

    config = VJEPA2Config(crop_size=64, patch_size=16, frames_per_clip=8, tubelet_size=2)
    attention = VJEPA2RopeAttention(config, hidden, heads)
    grid = config.crop_size // config.patch_size
    tokens = (config.frames_per_clip // config.tubelet_size) * grid**2
    hf_ids = attention.get_position_ids(torch.zeros(1, tokens, hidden), masks=None)  # (frame, height, width)
    positions = vjepa2_patch_positions(np.arange(tokens), grid)
    head_dim = hidden // heads
    x = np.random.default_rng(1).standard_normal((1, 1, tokens, head_dim)).astype(np.float32)
    call = {"x": x[0, 0].astype(np.float64), "positions": positions,
            "rope": {"form": "vjepa2", "head_dim": head_dim, "rope_theta": 10000.0}}
    out = attention.apply_rotary_embeddings(torch.from_numpy(x), hf_ids).numpy()[0, 0]
    result = check_kind("vision_rope", "apply_vision3d_rope", call, out)
    assert result["ok"] and result["dtype"] == "float32" and result["max_ratio"] > 1e-3, result["max_ratio"]
    swapped = attention.apply_rotary_embeddings(torch.from_numpy(x), (hf_ids[1], hf_ids[0], hf_ids[2])).numpy()[0, 0]
    assert _ids(check_kind("vision_rope", "apply_vision3d_rope", call, swapped)) == ["vision_rope_frame_row_swapped"]


def test_mlcd_float32_tower_passes_with_its_class_angles():
    from transformers import MLCDVisionConfig, MLCDVisionModel
    from transformers.models.mlcd import modeling_mlcd as hf

    from refpos.tests.test_anchors_vision_rope_prefix import _first_call

    torch.manual_seed(0)
    config = MLCDVisionConfig(hidden_size=64, num_attention_heads=4, intermediate_size=64, num_hidden_layers=1,
                              image_size=28, patch_size=7)
    model = MLCDVisionModel(config).float().eval()
    with torch.no_grad():
        model.class_pos_emb.normal_(0.0, 2.0)
    angles = model.class_pos_emb.detach().double().numpy()  # (1, D/2)
    pixels = torch.randn(1, 3, 21, 35)
    q, _, q_out, _ = _first_call(hf, "apply_rotary_pos_emb_vision", lambda: model(pixel_values=pixels))
    rope = {"form": "mlcd", "head_dim": 16, "rope_theta": config.rope_parameters["rope_theta"]}
    positions = pixtral_patch_positions(3, 5)
    worst = 0.0
    for head in range(q.shape[2]):
        call = {"x": q[0, :, head, :], "positions": positions, "rope": rope, "prefix_angles": angles}
        result = check_kind("vision_rope", "apply_vision_rope_prefixed", call,
                            q_out[0, :, head, :].astype(np.float32))
        assert result["ok"] and result["dtype"] == "float32", result["max_ratio"]
        worst = max(worst, result["max_ratio"])
        unturned = q_out[0, :, head, :].copy()
        unturned[0] = q[0, 0, head, :]  # the class token left as it was
        assert _ids(check_kind("vision_rope", "apply_vision_rope_prefixed", call, unturned)) == [
            "vision_rope_class_angles_dropped"]
    assert worst > 1e-3, worst
