"""The rotary calls a pixel run keeps (``survey.pixel_capture.rotations``, torch): the first call of each function and
query shape — SAM 3's ViT keeps its first windowed layer's and its first global layer's, Gemma 4's tower the call of
``apply_multidimensional_rope`` and not the inner ones it hands its tensors by keyword."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
pytest.importorskip("transformers", reason="transformers is not installed")


def test_sam3_keeps_a_windowed_and_a_global_call():
    from transformers import Sam3ViTConfig
    from transformers.models.sam3 import modeling_sam3 as hf

    from survey.pixel_capture import rotations

    config = Sam3ViTConfig(hidden_size=32, num_attention_heads=2, intermediate_size=32, num_hidden_layers=4,
                           image_size=32, patch_size=4, window_size=4, global_attn_indexes=[1, 3],
                           pretrain_image_size=16)
    model = hf.Sam3ViTModel(config).eval()
    calls = rotations(model, {"pixel_values": torch.randn(1, 3, 32, 32)})
    assert [c.name.rsplit(".", 1)[-1] for c in calls] == ["apply_rotary_pos_emb_2d"] * 2
    assert [c.before[0].shape for c in calls] == [(16, 16), (64, 16)]  # a window of 4 × 4, the 8 × 8 grid


def test_gemma4_keeps_the_outer_call_with_its_query():
    from transformers import Gemma4VisionConfig
    from transformers.models.gemma4 import modeling_gemma4 as hf

    from survey.pixel_capture import rotations

    config = Gemma4VisionConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                                intermediate_size=64, num_hidden_layers=2, patch_size=4, pooling_kernel_size=3,
                                position_embedding_size=32)
    model = hf.Gemma4VisionModel(config).eval()
    cols, rows = np.meshgrid(np.arange(6), np.arange(3), indexing="xy")
    ids = torch.from_numpy(np.stack([cols.ravel(), rows.ravel()], axis=-1))[None]
    calls = rotations(model, {"pixel_values": torch.randn(1, 18, 48), "pixel_position_ids": ids})
    assert [c.name.rsplit(".", 1)[-1] for c in calls] == ["apply_multidimensional_rope"]
    assert calls[0].before[0].shape == (18, 16) and calls[0].after[0].shape == (18, 16)


def test_vjepa2_keeps_each_axis_block_of_its_encoder_and_predictor():
    """V-JEPA 2 turns a layer's three blocks of one shape at the frame's, the row's and the column's positions (given
    by keyword): the run keeps the three of its encoder's first layer and of its predictor's, each with the digest of
    its own positions; the later layers' calls, at the same positions, are not kept."""
    from transformers import VJEPA2Config
    from transformers.models.vjepa2 import modeling_vjepa2 as hf

    from survey.pixel_capture import rotations

    config = VJEPA2Config(hidden_size=48, num_attention_heads=2, num_hidden_layers=2, mlp_ratio=1.0, crop_size=32,
                          patch_size=16, frames_per_clip=4, tubelet_size=2, pred_hidden_size=48,
                          pred_num_attention_heads=2, pred_num_hidden_layers=2, pred_num_mask_tokens=1)
    model = hf.VJEPA2Model(config).eval()
    calls = rotations(model, {"pixel_values_videos": torch.randn(1, 4, 3, 32, 32)})
    assert [c.name.rsplit(".", 1)[-1] for c in calls] == ["rotate_queries_or_keys"] * 6
    assert [c.before[0].shape for c in calls] == [(8, 8)] * 3 + [(16, 8)] * 3  # 2 tubelets of 2 × 2; context + targets
    assert len({c.tables[0] for c in calls}) == 6
