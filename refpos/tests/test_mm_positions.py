"""mm_position_ids: the (3, T) M-RoPE ids of text, images and videos (integers: exact comparisons)."""

from __future__ import annotations

import numpy as np
import pytest

from refpos.backend import to_numpy
from refpos.models.mm_omni import audio_token_count, chunk_bounds
from refpos.models.mm_positions import (
    MM_FAMILIES,
    MM_RULES,
    Audio,
    Image,
    Text,
    Video,
    id_family_of,
    mm_position_ids,
    rope_delta,
    token_count,
)

OMNI = {"qwen2_5_omni": {"position_id_per_seconds": 25, "seconds_per_chunk": 2},
        "qwen3_omni_moe": {"position_id_per_seconds": 25}}


def test_image_grid_by_hand():
    ids = mm_position_ids([Text(1), Image((1, 4, 4)), Text(1)], family="qwen2_vl")
    # a 2 × 2 grid at start 1: t = 1; h = 1, 1, 2, 2; w = 1, 2, 1, 2; then start 1 + 2 = 3
    np.testing.assert_array_equal(ids, [[0, 1, 1, 1, 1, 3], [0, 1, 1, 2, 2, 3], [0, 1, 2, 1, 2, 3]])
    assert rope_delta(ids) == 4 - 6


@pytest.mark.parametrize("family", MM_FAMILIES)
def test_text_alone_is_one_dimensional(family):
    np.testing.assert_array_equal(mm_position_ids([Text(5)], family=family), np.stack([np.arange(5)] * 3))


def test_temporal_spacing_of_qwen2_5_vl():
    spans = [Video((3, 2, 2), seconds_per_grid=1.5)]
    spaced = mm_position_ids(spans, family="qwen2_5_vl", tokens_per_second=2)
    np.testing.assert_array_equal(spaced[0, ...], [0, 3, 6])  # ⌊i · 2 · 1.5⌋
    np.testing.assert_array_equal(mm_position_ids(spans, family="qwen2_vl")[0, ...], [0, 1, 2])
    assert spaced.shape == (3, token_count(spans))


def test_frame_by_frame_families_restart_time_per_frame():
    ids = mm_position_ids([Video((2, 2, 4))], family="qwen3_vl")
    # two one-frame grids of 1 × 2 cells: the second starts after max(1, 2) = 2
    np.testing.assert_array_equal(ids, [[0, 0, 2, 2], [0, 0, 2, 2], [0, 1, 2, 3]])


@pytest.mark.parametrize(("spans", "kwargs", "error", "message"), [
    ([Text(2)], {"family": "llava"}, ValueError, "family must be one of"),
    ([Text(2)], {"family": "qwen2_vl", "tokens_per_second": 2}, ValueError, "'qwen2_5_vl' only"),
    ([Video((2, 2, 2))], {"family": "qwen2_5_vl"}, ValueError, "needs tokens_per_second"),
    ([Image((1, 3, 4))], {"family": "qwen2_vl"}, ValueError, "not a multiple of spatial_merge_size=2"),
    ([], {"family": "qwen2_vl"}, TypeError, "non-empty list"),
    ([(1, 2, 2)], {"family": "qwen2_vl"}, TypeError, r"spans\[0\] must be Text, Image, Video or Audio"),
    ([Text(1), Audio(3), Text(1)], {"family": "qwen3_vl"}, ValueError, "has no audio input"),
    ([Video((2, 2, 2), audio_tokens=3)], {"family": "qwen2_5_vl", "tokens_per_second": 2}, ValueError,
     "for the Omni families"),
    ([Text(1), Video((2, 2, 2)), Text(1)], {"family": "qwen2_5_omni"}, ValueError, "needs position_id_per_seconds"),
    ([Video((2, 2, 2), audio_tokens=3)], {"family": "qwen2_5_omni", "position_id_per_seconds": 25}, ValueError,
     "needs seconds_per_chunk"),
    ([Text(1)], {"family": "qwen3_omni_moe", "seconds_per_chunk": 2}, ValueError,
     "seconds_per_chunk is read by family 'qwen2_5_omni' only"),
    ([Image((1, 2, 2)), Text(1)], {"family": "qwen3_omni_moe"}, ValueError, r"needs text before it \(its start"),
    ([Text(1), Audio(2)], {"family": "qwen2_5_omni"}, ValueError, r"needs text after it \(its end marker\)"),
    ([Text(1), Video((3, 2, 2), seconds_per_grid=0.5), Text(1)],
     {"family": "qwen3_omni_moe", "position_id_per_seconds": 25}, ValueError, r"fractional times \[12\.5\]"),
    ([Text(1), Video((2, 2, 2)), Text(1)], {"family": "ernie4_5_vl_moe"}, ValueError, "needs temporal_merge_size"),
    ([Video((3, 2, 2))], {"family": "ernie4_5_vl_moe", "temporal_merge_size": 2}, ValueError,
     "grid t = 3 is not a multiple of temporal_merge_size=2"),
    ([Video((2, 2, 2), audio_tokens=3)], {"family": "qwen2_5_omni", "position_id_per_seconds": 0.1,
                                          "seconds_per_chunk": 2}, ValueError, "time units per chunk"),
])
def test_bad_layouts_are_named(spans, kwargs, error, message):
    with pytest.raises(error, match=message):
        mm_position_ids(spans, **kwargs)


def test_bad_spans_are_named():
    with pytest.raises(ValueError, match=r"Image\.grid h must be an integer from 1 to"):
        Image((1, -2, 4))
    with pytest.raises(ValueError, match=r"Video\.grid t must be an integer from 1 to"):
        Video((0, 2, 2))
    with pytest.raises(TypeError, match=r"Image\.grid must be \(t, h, w\)"):
        Image((4, 4))
    with pytest.raises(ValueError, match=r"Text\.length must be an integer from 1 to"):
        Text(0)
    with pytest.raises(ValueError, match=r"Video\.seconds_per_grid must be >= 0"):
        Video((1, 2, 2), seconds_per_grid=-1.0)
    with pytest.raises(ValueError, match=r"shape \(3, T\)"):
        rope_delta(np.zeros((2, 4), dtype=np.int64))


def test_every_family_has_a_rule_citing_transformers():
    for family, rule in MM_RULES.items():
        assert rule.family == family and family in MM_FAMILIES
        assert rule.source.startswith(f"{family}/modeling_{family}.py: ") and rule.source.endswith("get_rope_index")
    assert id_family_of("qwen3_5_moe_text") == "qwen3_5" and id_family_of("qwen3_omni_moe_thinker") == "qwen3_omni_moe"
    assert id_family_of("llava") is None and id_family_of(None) is None


def test_ernie_video_cells_merge_in_time():
    # a video of 4 temporal patches is 2 temporal cells, one apart; a 2 × 2 image is not merged in time
    ids = mm_position_ids([Text(1), Video((4, 2, 2)), Image((1, 2, 2))], family="ernie4_5_vl_moe",
                          temporal_merge_size=2)
    np.testing.assert_array_equal(ids, [[0, 1, 2, 2], [0, 1, 1, 2], [0, 1, 1, 2]])


def test_omni_pieces_start_after_the_largest_id_before_them():
    """TMRoPE: a video's time runs far past its height and width; the text after it continues from there."""
    spans = [Text(2), Video((3, 2, 2), seconds_per_grid=2.0), Text(2)]
    for family, settings in OMNI.items():
        ids = mm_position_ids(spans, family=family, **settings)
        # times 0, 50, 100 (2 s × 25 per second) from s = 2; then text from 2 + 100 + 1
        np.testing.assert_array_equal(ids, [[0, 1, 2, 52, 102, 103, 104]] + [[0, 1, 2, 2, 2, 103, 104]] * 2)
    side = to_numpy(mm_position_ids(spans, family="qwen2_vl"))  # a running start: 2 + max(1, 1) = 3
    np.testing.assert_array_equal(side[0], [0, 1, 2, 3, 4, 3, 4])


def test_audio_is_counted_like_text():
    spans = [Text(2), Audio(4), Text(1)]
    for family, settings in OMNI.items():
        np.testing.assert_array_equal(mm_position_ids(spans, family=family, **settings), np.stack([np.arange(7)] * 3))
    assert token_count(spans) == 7


def test_a_video_with_its_audio_track_by_hand():
    """One temporal patch per 2 ids (2 s × 1 id/s), a 1 × 1 cell grid, 3 audio tokens, chunks of 2 ids."""
    spans = [Text(1), Video((2, 2, 2), seconds_per_grid=2.0, audio_tokens=3), Text(1)]
    qwen2_5 = to_numpy(mm_position_ids(spans, family="qwen2_5_omni", position_id_per_seconds=1, seconds_per_chunk=2))
    # markers at 1, 1; video times 2, 4 and audio 2, 3, 4 from s' = 2; chunks [v2] [a2 a3] [v4] [a4];
    # the end markers after the last chunk (audio 4): 5, 5; the text: 6
    assert qwen2_5[0].tolist() == [0, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6]
    qwen3 = to_numpy(mm_position_ids(spans, family="qwen3_omni_moe", position_id_per_seconds=1))
    # markers 1, 2; s' = 3: video 3, 5 and audio 3, 4, 5 merged by time (video first on ties)
    assert qwen3[0].tolist() == [0, 1, 2, 3, 3, 4, 5, 5, 6, 7, 8]
    assert token_count(spans) == 11


def test_chunks_cut_once_per_token():
    # times 0 0 1 | 2 2 | 5: the cut at 5 advances the counter once (to 3), so the next token would cut again
    assert chunk_bounds(np.array([0, 0, 1, 2, 2, 5]), 2) == [(0, 3), (3, 5), (5, 6)]
    assert chunk_bounds(np.array([0, 5, 5, 5]), 2) == [(0, 1), (1, 2), (2, 4)]
    assert chunk_bounds(np.array([0]), 1) == [(0, 1)]


def test_audio_token_counts_by_hand():
    # ⌊(⌊(L−1)/2⌋ + 1 − 2)/2⌋ + 1: a frame or two make no token
    assert [audio_token_count(n, family="qwen2_5_omni") for n in (1, 2, 3, 5, 7, 100)] == [0, 0, 1, 1, 2, 25]
    assert [audio_token_count(n, family="qwen3_omni_moe") for n in (1, 8, 9, 100, 101, 200)] == [1, 1, 2, 13, 14, 26]
    with pytest.raises(ValueError, match="family must be one of"):
        audio_token_count(10, family="qwen2_vl")
    with pytest.raises(ValueError, match="frames must be >= 1"):
        audio_token_count(0, family="qwen2_5_omni")


def test_bad_new_spans_are_named():
    with pytest.raises(ValueError, match=r"Audio\.tokens must be an integer from 1 to"):
        Audio(0)
    with pytest.raises(ValueError, match=r"Video\.audio_tokens must be an integer from 1 to"):
        Video((1, 2, 2), audio_tokens=0)


def test_settings_from_a_config():
    from refpos.models.mm_positions import mm_settings_from_config, setting_path

    omni = {"model_type": "qwen2_5_omni", "thinker_config": {"position_id_per_seconds": 13, "text_config": {},
                                                             "vision_config": {"spatial_merge_size": 2}}}
    assert mm_settings_from_config(omni) == (
        "qwen2_5_omni", {"spatial_merge_size": 2, "position_id_per_seconds": 13, "seconds_per_chunk": 2},
        {"family": "config", "spatial_merge_size": "config", "position_id_per_seconds": "config",
         "seconds_per_chunk": "default"})
    assert setting_path(omni, "spatial_merge_size") == "thinker_config.vision_config.spatial_merge_size"
    assert setting_path(omni, "seconds_per_chunk") == "thinker_config.seconds_per_chunk"
    llava = {"model_type": "llava", "vision_config": {"spatial_merge_size": 4}}
    assert mm_settings_from_config(llava, default_family="qwen2_vl") == (
        "qwen2_vl", {"spatial_merge_size": 4}, {"family": "default", "spatial_merge_size": "config"})
    qwen25 = {"model_type": "qwen2_5_vl", "vision_config": {"tokens_per_second": 2}}
    assert mm_settings_from_config(qwen25)[1] == {"spatial_merge_size": 2, "tokens_per_second": 2}
    ernie = {"model_type": "ernie4_5_vl_moe", "vision_config": {}}
    assert mm_settings_from_config(ernie)[1] == {"spatial_merge_size": 2, "temporal_merge_size": 2}
    nested = {"model_type": "whatever", "text_config": {"model_type": "qwen3_5_moe_text"}}
    assert mm_settings_from_config(nested)[0] == "qwen3_5"
    with pytest.raises(ValueError, match="'llava' has no M-RoPE position rules"):
        mm_settings_from_config({"model_type": "llava"})
    with pytest.raises(TypeError, match="config must be a mapping"):
        mm_settings_from_config([])
