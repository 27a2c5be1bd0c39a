"""The sizes and shapes :mod:`survey.pixel_sizes` reads from a config, and the pixel-side repairs of
:mod:`survey.pixel_repairs`: each applies only where its config states every field it reads, and each is tried only
after the shapes :mod:`survey.pixel_inputs` tried before, so a model that ran on those runs on them still."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from survey import pixel_inputs, pixel_sizes
from survey.pixel_sizes import anchor_count, query_sizes


def test_a_detector_is_fed_the_smallest_image_holding_its_queries_in_anchors():
    rt_detr = SimpleNamespace(num_queries=300, feat_strides=[8, 16, 32], num_feature_levels=3)
    sizes = query_sizes(rt_detr)
    assert sizes == {"native": (128, 128), "resampled": (128, 192)}
    assert anchor_count(128, 128, [8, 16, 32], 3) == 16 * 16 + 8 * 8 + 4 * 4 >= 300
    assert anchor_count(96, 96, [8, 16, 32], 3) < 300  # one coarsest cell less: too few anchors
    # an extra level past the strides: a stride-2 map of the last
    assert anchor_count(128, 128, [8, 16, 32], 4) == 336 + 2 * 2


def test_a_detector_on_a_windowed_backbone_holds_whole_windows_of_patches():
    rf_detr = SimpleNamespace(num_queries=300, num_feature_levels=1,
                              backbone_config=SimpleNamespace(patch_size=14, num_windows=4))
    lw_detr = SimpleNamespace(num_queries=300, projector_scale_factors=[1.0],
                              backbone_config=SimpleNamespace(patch_size=16, num_windows=16, num_windows_side=4))
    assert query_sizes(rf_detr) == {"native": (280, 280), "resampled": (280, 392)}  # 20 × 20 patches, 5 a window
    assert query_sizes(lw_detr) == {"native": (320, 320), "resampled": (320, 448)}


@pytest.mark.parametrize("config", [
    SimpleNamespace(num_queries=100),  # DETR: learned queries, no anchors
    SimpleNamespace(num_queries=300, backbone_config=SimpleNamespace(patch_size=4)),  # a Swin backbone: no windows
    SimpleNamespace(feat_strides=[8, 16, 32]),
])
def test_no_size_where_the_config_does_not_state_both_queries_and_anchor_maps(config):
    assert query_sizes(config) is None
    assert pixel_sizes.stated_sizes(config) is None


def test_a_prompt_stacked_above_the_image_halves_its_height_only_for_such_a_model():
    assert pixel_sizes.prompt_halved(SimpleNamespace(model_type="seggpt"), (896, 448)) == (448, 448)
    assert pixel_sizes.prompt_halved(SimpleNamespace(model_type="vit"), (896, 448)) == (896, 448)
    seggpt = SimpleNamespace(model_type="seggpt", image_size=[896, 448], patch_size=16, num_channels=3)
    assert pixel_inputs.candidates("pixel_values", seggpt)["native"][0] == (1, 3, 448, 448)


def test_extra_feature_widths_come_after_every_width_tried_before():
    fun_asr = SimpleNamespace(model_type="fun_asr_nano_encoder", num_mel_bins=80, num_stacked_frames=7)
    shapes = pixel_inputs.candidates("input_features", fun_asr)["native"]
    assert shapes[:3] == [(1, 80, 64), (1, 64, 80), (80, 64)]  # as before
    assert shapes[-2:] == [(1, 560, 64), (1, 64, 560)]
    assert pixel_inputs.frames_first(fun_asr, (1, 64, 560)) and not pixel_inputs.frames_first(fun_asr, (1, 64, 80))
    gemma = SimpleNamespace(model_type="gemma4_audio")
    assert pixel_sizes.extra_feature_widths(gemma, [80]) == [128]
    asr = SimpleNamespace(model_type="x", asr_config=SimpleNamespace(num_mel_bins=128))
    assert pixel_sizes.extra_feature_widths(asr, [80]) == [128]
    assert pixel_sizes.extra_feature_widths(SimpleNamespace(model_type="whisper"), [80]) == []


def test_raw_audio_follows_the_embeddings_of_a_convolutional_encoder_named_hidden_states():
    vibevoice = SimpleNamespace(channels=1, downsampling_ratios=[2, 2, 4, 5, 5, 8], hidden_size=64)
    sizes = pixel_inputs.candidates("hidden_states", vibevoice)
    assert sizes["native"][-1] == (1, 1, 6400) and sizes["resampled"][-1] == (1, 1, 9600)
    assert sizes["native"][0] == (1, 16, 64)  # the embeddings first, as before
    assert pixel_sizes.waveform_shapes(SimpleNamespace(hidden_size=64)) == {"native": [], "resampled": []}


def test_anchor_count_refuses_an_empty_image():
    with pytest.raises(ValueError, match="height, width, strides"):
        anchor_count(0, 64, [8], 1)


def test_a_size_grows_by_whole_mask_units_where_the_config_states_them():
    """Hiera unrolls its tokens into mask units: the resampling step is masked_unit_size · patch_stride pixels; a
    config without both (or with a malformed one) keeps its patch."""
    hiera = SimpleNamespace(masked_unit_size=[8, 8], patch_stride=[4, 4])
    assert pixel_sizes.unit_step(hiera, (16, 16)) == (32, 32)
    assert pixel_sizes.unit_step(SimpleNamespace(masked_unit_size=[8, 8]), (16, 16)) == (16, 16)
    assert pixel_sizes.unit_step(SimpleNamespace(masked_unit_size=[8], patch_stride=[4, 4]), (16, 16)) == (16, 16)
    assert pixel_sizes.unit_step(SimpleNamespace(), None) is None
