"""mm_position_ids: the (3, T) M-RoPE ids of text, images and videos (integers: exact comparisons)."""

from __future__ import annotations

import numpy as np
import pytest

from refpos.models.mm_positions import MM_FAMILIES, Image, Text, Video, mm_position_ids, rope_delta, token_count


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
    ([(1, 2, 2)], {"family": "qwen2_vl"}, TypeError, r"spans\[0\] must be Text, Image or Video"),
])
def test_bad_layouts_are_named(spans, kwargs, error, message):
    with pytest.raises(error, match=message):
        mm_position_ids(spans, **kwargs)


def test_bad_spans_are_named():
    with pytest.raises(ValueError, match=r"Image\.grid h must be >= 1"):
        Image((1, -2, 4))
    with pytest.raises(ValueError, match=r"Video\.grid t must be >= 1"):
        Video((0, 2, 2))
    with pytest.raises(TypeError, match=r"Image\.grid must be \(t, h, w\)"):
        Image((4, 4))
    with pytest.raises(ValueError, match=r"Text\.length must be >= 1"):
        Text(0)
    with pytest.raises(ValueError, match=r"Video\.seconds_per_grid must be >= 0"):
        Video((1, 2, 2), seconds_per_grid=-1.0)
    with pytest.raises(ValueError, match=r"shape \(3, T\)"):
        rope_delta(np.zeros((2, 4), dtype=np.int64))
