"""mm_position_ids against transformers' own ``get_rope_index`` on hand-built layouts (anchors env).

Integer ids: compared exactly. transformers' method is called on a stand-in ``self`` holding only what it
reads (``config.vision_config.spatial_merge_size``, ``tokens_per_second``, ``get_vision_position_ids``).
"""

from __future__ import annotations

import functools
import importlib
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.models.mm_positions import Image, Text, Video, mm_position_ids, rope_delta

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

MODELS = {"qwen2_vl": "Qwen2VLModel", "qwen2_5_vl": "Qwen2_5_VLModel", "qwen3_vl": "Qwen3VLModel",
          "glm4v": "Glm4vModel"}


def _hf_rope_index(family, spans, hf_video_grids, *, merge=2, tokens_per_second=2, seconds=None):
    """transformers' (position_ids (3, T), delta) for the spans (one batch row)."""
    model = getattr(importlib.import_module(f"transformers.models.{family}.modeling_{family}"), MODELS[family])
    vision = SimpleNamespace(spatial_merge_size=merge, tokens_per_second=tokens_per_second)
    fake = SimpleNamespace(config=SimpleNamespace(vision_config=vision))
    fake.get_vision_position_ids = functools.partial(model.get_vision_position_ids, fake)
    types, images = [], []
    for span in spans:
        if isinstance(span, Text):
            types += [0] * span.length
        else:
            kind = 1 if isinstance(span, Image) else 2
            types += [kind] * (int(np.prod(span.grid)) // merge**2)
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


@pytest.mark.parametrize("family", sorted(MODELS))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_images_and_text(family, layout):
    spans, _ = LAYOUTS[layout]
    if all(isinstance(s, Text) for s in spans):
        # HF's get_rope_index is for vision + text; on text alone it is 0 … T-1 on all three rows
        want = np.stack([np.arange(7)] * 3)
    else:
        want, delta = _hf_rope_index(family, spans, [])
        assert rope_delta(mm_position_ids(spans, family=family)) == delta
    np.testing.assert_array_equal(mm_position_ids(spans, family=family), want)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl"])
@pytest.mark.parametrize("seconds", [None, [0.5], [1.0], [2.0], [1.5]])
def test_videos_of_the_qwen2_families(family, seconds):
    spans = [Text(3), Video((4, 4, 6), seconds_per_grid=seconds[0] if seconds else 1.0), Text(2)]
    want, delta = _hf_rope_index(family, spans, [(4, 4, 6)], seconds=seconds)
    got = mm_position_ids(spans, family=family, tokens_per_second=2 if family == "qwen2_5_vl" else None)
    np.testing.assert_array_equal(got, want)
    assert rope_delta(got) == delta


@pytest.mark.parametrize("family", ["qwen3_vl", "glm4v"])
def test_videos_frame_by_frame(family):
    """Timestamp text between the frames (as in these models' prompts): one-frame Video spans."""
    spans = [Text(2), Video((1, 4, 4)), Text(3), Video((1, 4, 4)), Text(3), Video((1, 4, 4)), Text(1)]
    want, delta = _hf_rope_index(family, spans, [(3, 4, 4)])
    got = mm_position_ids(spans, family=family)
    np.testing.assert_array_equal(got, want)
    assert rope_delta(got) == delta
    together = mm_position_ids([Text(2), Video((3, 4, 4)), Text(1)], family=family)
    frames = mm_position_ids([Text(2), Video((1, 4, 4)), Video((1, 4, 4)), Video((1, 4, 4)), Text(1)], family=family)
    np.testing.assert_array_equal(together, frames)
