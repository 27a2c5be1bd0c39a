"""mm_position_ids against transformers' own ``get_rope_index`` on hand-built layouts (anchors env): the
families with a running start (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4.1V, Qwen3.5, ERNIE-4.5-VL and their MoE
variants, PaddleOCR-VL, GLM-OCR; the Omni families: test_anchors_mm_omni.py).

Integer ids: compared exactly. transformers' method is called on a stand-in ``self`` holding only what it
reads (``config.vision_config.spatial_merge_size``, ``tokens_per_second``, ``get_vision_position_ids``).
"""

from __future__ import annotations

import functools
import importlib
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.models.mm_positions import Image, Text, Video, id_family_of, mm_position_ids, rope_delta, token_count

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

#: module name -> (model class, the mm_position_ids family whose ids it computes)
MODELS = {"qwen2_vl": ("Qwen2VLModel", "qwen2_vl"), "qwen2_5_vl": ("Qwen2_5_VLModel", "qwen2_5_vl"),
          "qwen3_vl": ("Qwen3VLModel", "qwen3_vl"), "qwen3_vl_moe": ("Qwen3VLMoeModel", "qwen3_vl"),
          "glm4v": ("Glm4vModel", "glm4v"), "glm4v_moe": ("Glm4vMoeModel", "glm4v"),
          "qwen3_5": ("Qwen3_5Model", "qwen3_5"), "qwen3_5_moe": ("Qwen3_5MoeModel", "qwen3_5"),
          "ernie4_5_vl_moe": ("Ernie4_5_VLMoeModel", "ernie4_5_vl_moe"),
          "paddleocr_vl": ("PaddleOCRVLModel", "paddleocr_vl"), "glm_ocr": ("GlmOcrModel", "glm_ocr")}
TEMPORAL_MERGE = 2  # ERNIE-4.5-VL's vision_config.temporal_merge_size


def _ids(module, spans, **kwargs):
    """refpos's ids for the family of a transformers module (ERNIE: its temporal merge)."""
    family = MODELS[module][1]
    assert id_family_of(module) == family
    if family == "ernie4_5_vl_moe" and any(isinstance(s, Video) for s in spans):
        kwargs["temporal_merge_size"] = TEMPORAL_MERGE
    return mm_position_ids(spans, family=family, **kwargs)


def _hf_rope_index(module, spans, hf_video_grids, *, merge=2, tokens_per_second=2, seconds=None):
    """transformers' (position_ids (3, T), delta) for the spans (one batch row)."""
    model = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), MODELS[module][0])
    vision = SimpleNamespace(spatial_merge_size=merge, tokens_per_second=tokens_per_second,
                             temporal_merge_size=TEMPORAL_MERGE)
    fake = SimpleNamespace(config=SimpleNamespace(vision_config=vision))
    fake.get_vision_position_ids = functools.partial(model.get_vision_position_ids, fake)
    temporal = TEMPORAL_MERGE if module == "ernie4_5_vl_moe" else 1
    types, images = [], []
    for span in spans:
        if isinstance(span, Text):
            types += [0] * span.length
        else:
            kind = 1 if isinstance(span, Image) else 2
            types += [kind] * (int(np.prod(span.grid)) // merge**2 // (temporal if kind == 2 else 1))
            if kind == 1:
                images.append(span.grid)
    types = torch.tensor([types])
    kwargs = {}
    if seconds is not None:
        kwargs["second_per_grid_ts"] = torch.tensor(seconds, dtype=torch.float32)
    ids, delta = model.get_rope_index(
        fake, torch.zeros_like(types), types,
        image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor(hf_video_grids) if hf_video_grids else None, **kwargs)
    return ids[:, 0].numpy(), int(delta[0, 0])


LAYOUTS = {
    "text": ([Text(7)], []),
    "image": ([Text(3), Image((1, 4, 6)), Text(1)], []),
    "text after an image": ([Text(2), Image((1, 6, 4)), Text(5), Image((1, 2, 2)), Text(3)], []),
    "tall image first": ([Image((1, 8, 2)), Text(4)], []),
}


@pytest.mark.parametrize("module", sorted(MODELS))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_images_and_text(module, layout):
    spans, _ = LAYOUTS[layout]
    if all(isinstance(s, Text) for s in spans):
        # HF's get_rope_index is for vision + text; on text alone it is 0 … T-1 on all three rows
        want = np.stack([np.arange(7)] * 3)
    else:
        want, delta = _hf_rope_index(module, spans, [])
        assert rope_delta(_ids(module, spans)) == delta
    np.testing.assert_array_equal(_ids(module, spans), want)


@pytest.mark.parametrize("module", ["qwen2_vl", "qwen2_5_vl", "paddleocr_vl"])
@pytest.mark.parametrize("seconds", [None, [0.5], [1.0], [2.0], [1.5]])
def test_videos_of_the_qwen2_families(module, seconds):
    spans = [Text(3), Video((4, 4, 6), seconds_per_grid=seconds[0] if seconds else 1.0), Text(2)]
    want, delta = _hf_rope_index(module, spans, [(4, 4, 6)], seconds=seconds)
    got = _ids(module, spans, tokens_per_second=2 if module == "qwen2_5_vl" else None)
    np.testing.assert_array_equal(got, want)
    assert rope_delta(got) == delta


@pytest.mark.parametrize("module", ["qwen3_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe", "qwen3_5", "qwen3_5_moe",
                                    "glm_ocr"])
def test_videos_frame_by_frame(module):
    """Timestamp text between the frames (as in these models' prompts): one-frame Video spans."""
    spans = [Text(2), Video((1, 4, 4)), Text(3), Video((1, 4, 4)), Text(3), Video((1, 4, 4)), Text(1)]
    want, delta = _hf_rope_index(module, spans, [(3, 4, 4)])
    got = _ids(module, spans)
    np.testing.assert_array_equal(got, want)
    assert rope_delta(got) == delta
    together = _ids(module, [Text(2), Video((3, 4, 4)), Text(1)])
    frames = _ids(module, [Text(2), Video((1, 4, 4)), Video((1, 4, 4)), Video((1, 4, 4)), Text(1)])
    np.testing.assert_array_equal(together, frames)


@pytest.mark.parametrize("grid", [(2, 4, 6), (4, 8, 4), (6, 2, 2)])
def test_ernie_merges_temporal_patches_of_videos(grid):
    """ERNIE-4.5-VL: g_t / 2 temporal cells per video, 1 apart; the start advances by max(g_h, g_w)/k."""
    spans = [Text(3), Video(grid), Text(2), Image((1, 4, 4)), Text(1)]
    want, delta = _hf_rope_index("ernie4_5_vl_moe", spans, [grid])
    got = _ids("ernie4_5_vl_moe", spans)
    np.testing.assert_array_equal(got, want)
    assert rope_delta(got) == delta
    assert got.shape[1] == token_count(spans, temporal_merge_size=TEMPORAL_MERGE)
