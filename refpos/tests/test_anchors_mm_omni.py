"""TMRoPE ids (refpos.models.mm_omni) against the Omni thinkers' own ``get_rope_index`` (anchors env).

transformers' method reads token ids: the layouts are written as token sequences with the families' marker
ids (a start marker ends the text before an image, video or audio; an end marker starts the text after it),
and the method is called on a stand-in ``self`` holding what it reads (token ids, ``spatial_merge_size``,
``position_id_per_seconds``, ``seconds_per_chunk``, ``audio_config.n_window`` and its helper methods). Integer
ids: compared exactly. Qwen3-Omni returns float32 ids, fractional where a video's time per temporal patch is
(``seconds_per_grid × position_id_per_seconds``, e.g. 0.5 × 25): refpos refuses those layouts, and the test
checks that it does exactly where transformers' ids are fractional.
"""

from __future__ import annotations

import functools
import importlib
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.models.mm_omni import audio_token_count, chunk_bounds
from refpos.models.mm_positions import Audio, Image, Text, Video, mm_position_ids, rope_delta, token_count

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

MODULES = {"qwen2_5_omni": ("qwen2_5_omni", "Qwen2_5OmniPreTrainedModelForConditionalGeneration"),
           "qwen3_omni_moe": ("qwen3_omni_moe", "Qwen3OmniMoePreTrainedModelForConditionalGeneration")}
#: token ids of the stand-in vocabulary
IDS = {"text": 1, "image": 11, "video": 12, "audio": 13, "vision_start": 21, "vision_end": 22, "audio_start": 23,
       "audio_end": 24}
N_WINDOW = 50


def _frames_for(family: str, tokens: int) -> int:
    """The fewest mel frames whose audio token count is ``tokens`` (refpos's count; anchored below)."""
    frames = 1
    while audio_token_count(frames, family=family, n_window=N_WINDOW) < tokens:
        frames += 1
    assert audio_token_count(frames, family=family, n_window=N_WINDOW) == tokens
    return frames


def _tokens(spans: list) -> list[int]:
    """The token sequence of the spans, markers at the ends of the text spans next to a media span."""
    out: list[int] = []
    for index, span in enumerate(spans):
        if isinstance(span, Text):
            run = [IDS["text"]] * span.length
            before = spans[index - 1] if index else None
            after = spans[index + 1] if index + 1 < len(spans) else None
            if isinstance(before, (Image, Video, Audio)):
                run[0] = IDS["audio_end" if isinstance(before, Audio) else "vision_end"]
            if isinstance(after, (Image, Video, Audio)) and not (isinstance(after, Video) and after.audio_tokens):
                run[-1] = IDS["audio_start" if isinstance(after, Audio) else "vision_start"]
            out += run
        elif isinstance(span, Audio):
            out += [IDS["audio"]] * span.tokens
        elif isinstance(span, Image):
            out += [IDS["image"]] * (int(np.prod(span.grid)) // 4)
        elif span.audio_tokens is None:
            out += [IDS["video"]] * (int(np.prod(span.grid)) // 4)
        else:  # markers, then the two streams (transformers counts the tokens of each and reads no order)
            cells = int(np.prod(span.grid)) // 4
            out += [IDS["vision_start"], IDS["audio_start"], *[IDS["video"]] * cells,
                    *[IDS["audio"]] * span.audio_tokens, IDS["audio_end"], IDS["vision_end"]]
    return out


def _hf(family: str, spans: list, *, per_second: float, per_chunk: float = 2.0) -> tuple[np.ndarray, int]:
    module, cls = MODULES[family]
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    model = getattr(modeling, cls)
    config = SimpleNamespace(**{f"{k}_token_id": v for k, v in IDS.items()}, position_id_per_seconds=per_second,
                             seconds_per_chunk=per_chunk, audio_config=SimpleNamespace(n_window=N_WINDOW))
    fake = SimpleNamespace(config=config, spatial_merge_size=2)
    fake.get_llm_pos_ids_for_vision = functools.partial(model.get_llm_pos_ids_for_vision, fake)
    fake.get_chunked_index = functools.partial(model.get_chunked_index, fake)
    tokens = torch.tensor([_tokens(spans)])
    images = [s.grid for s in spans if isinstance(s, Image)]
    videos = [s for s in spans if isinstance(s, Video)]
    audio = [s.tokens if isinstance(s, Audio) else s.audio_tokens for s in spans
             if isinstance(s, Audio) or (isinstance(s, Video) and s.audio_tokens)]
    ids, delta = model.get_rope_index(
        fake, tokens, image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor([v.grid for v in videos]) if videos else None,
        attention_mask=torch.ones_like(tokens), use_audio_in_video=any(v.audio_tokens for v in videos),
        audio_seqlens=torch.tensor([_frames_for(family, n) for n in audio]) if audio else None,
        second_per_grids=torch.tensor([v.seconds_per_grid for v in videos]) if videos else None)
    return ids[:, 0].double().numpy(), float(delta.reshape(-1)[0])


def _compare(family: str, spans: list, per_second: float, per_chunk: float) -> None:
    """refpos's ids equal transformers'; where transformers' are fractional (Qwen3-Omni), refpos refuses."""
    want, delta = _hf(family, spans, per_second=per_second, per_chunk=per_chunk)
    settings = _settings(family, per_second, per_chunk)
    if not np.array_equal(want, np.round(want)):
        assert family == "qwen3_omni_moe"
        with pytest.raises(ValueError, match="fractional times"):
            mm_position_ids(spans, family=family, **settings)
        return
    got = mm_position_ids(spans, family=family, **settings)
    np.testing.assert_array_equal(got, want)
    assert rope_delta(got) == delta and got.shape[1] == token_count(spans)


def _settings(family: str, per_second: float, per_chunk: float) -> dict:
    out = {"position_id_per_seconds": per_second}
    if family == "qwen2_5_omni":
        out["seconds_per_chunk"] = per_chunk
    return out


LAYOUTS = {
    "image": [Text(3), Image((1, 4, 6)), Text(2)],
    "image and audio": [Text(2), Image((1, 6, 4)), Text(3), Audio(7), Text(2)],
    "audio then image": [Text(1), Audio(5), Text(2), Image((1, 2, 2)), Text(4)],
    "video": [Text(2), Video((3, 4, 4), seconds_per_grid=2.0), Text(3)],
    "video then image": [Text(2), Video((4, 2, 4), seconds_per_grid=0.5), Text(2), Image((1, 4, 4)), Text(1)],
}
AUDIO_IN_VIDEO = {
    "short audio": [Text(3), Video((4, 4, 4), seconds_per_grid=1.0, audio_tokens=9), Text(2)],
    "long audio": [Text(2), Video((3, 4, 6), seconds_per_grid=2.0, audio_tokens=80), Text(3)],
    "audio past the video": [Text(1), Video((2, 2, 2), seconds_per_grid=0.5, audio_tokens=40), Text(2),
                             Image((1, 4, 4)), Text(1)],
    "wide frames": [Text(2), Video((2, 8, 16), seconds_per_grid=1.0, audio_tokens=6), Text(1)],
    "two": [Text(2), Video((2, 4, 4), seconds_per_grid=1.0, audio_tokens=5), Text(2),
            Video((3, 2, 2), seconds_per_grid=2.0, audio_tokens=30), Text(1)],
}


@pytest.mark.parametrize("family", sorted(MODULES))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("per_second", [25, 13, 2])
def test_text_images_videos_and_audio(family, layout, per_second):
    _compare(family, LAYOUTS[layout], per_second, 2.0)


@pytest.mark.parametrize("family", sorted(MODULES))
@pytest.mark.parametrize("layout", sorted(AUDIO_IN_VIDEO))
@pytest.mark.parametrize(("per_second", "per_chunk"), [(25, 2.0), (13, 2.0), (4, 1.0), (2, 0.5)])
def test_video_with_its_audio_track(family, layout, per_second, per_chunk):
    """TMRoPE: the two streams interleaved by time (chunks, or token by token); markers as each family places them."""
    _compare(family, AUDIO_IN_VIDEO[layout], per_second, per_chunk)


@pytest.mark.parametrize("per_chunk", [1, 2, 3, 50])
def test_chunk_bounds_are_transformers_get_chunked_index(per_chunk):
    from transformers.models.qwen2_5_omni.modeling_qwen2_5_omni import (
        Qwen2_5OmniPreTrainedModelForConditionalGeneration as Model,
    )

    rng = np.random.default_rng(per_chunk)
    for _ in range(20):
        times = np.cumsum(rng.integers(0, 4 * per_chunk, size=rng.integers(1, 30)))
        times -= times[0]
        want = Model.get_chunked_index(None, torch.from_numpy(times + 7), per_chunk, 7)
        assert chunk_bounds(times, per_chunk) == [(int(a), int(b)) for a, b in want]


def test_audio_token_counts_are_the_encoders():
    from transformers.models.qwen2_5_omni.modeling_qwen2_5_omni import Qwen2_5OmniAudioEncoder
    from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import _get_feat_extract_output_lengths

    frames = torch.arange(1, 3001)
    _, qwen2_5 = Qwen2_5OmniAudioEncoder._get_feat_extract_output_lengths(None, frames)
    for n_window in (50, 100):
        qwen3 = _get_feat_extract_output_lengths(frames, n_window)
        assert [audio_token_count(f, family="qwen3_omni_moe", n_window=n_window) for f in range(1, 3001)] == \
            qwen3.tolist()
    assert [audio_token_count(f, family="qwen2_5_omni") for f in range(1, 3001)] == qwen2_5.tolist()
