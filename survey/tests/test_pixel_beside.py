"""Every input fed beside a pixel, audio or feature model's main input is one record of
:data:`survey.pixel_beside.BESIDE`: each says why, and each feeds only a forward that takes what it makes."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

pytest.importorskip("torch", reason="builds torch tensors: pip install torch")

from survey.pixel_beside import BESIDE, Try, beside

SIZES = ("native", "resampled")


def _params(*names: str) -> dict[str, inspect.Parameter]:
    return {name: inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names}


@pytest.mark.parametrize("name", list(BESIDE))
def test_every_record_says_why_and_feeds_nothing_to_a_forward_that_takes_nothing_more(name):
    record = BESIDE[name]
    assert record.why and callable(record.feeds)
    for size in SIZES:
        at = Try(_params("pixel_values"), SimpleNamespace(), "pixel_values", (1, 3, 8, 8), size, None,
                 resample_flag=False)
        assert record.feeds(at, {}) == {}, (name, size)


@pytest.mark.parametrize("name", [n for n in BESIDE if n not in ("masks", "encoder_hidden_states",
                                                                 "interpolate_pos_encoding", "grid_thw")])
def test_a_record_named_for_its_input_feeds_it_to_a_forward_that_requires_it(name):
    """Each record keyed by the input it feeds makes it for a forward that takes it (without a default), at a
    shape and config of that input's kind."""
    import torch

    config = SimpleNamespace(task_seq_len=3, patch_size=4, num_time_features=1, prediction_length=2, act_dim=2,
                             semantic_model_config=SimpleNamespace(feature_projection_input_dim=5),
                             model_type="tvp")  # the one type fed its query text (TEXT_BESIDE)
    main, shape = {"past_time_features": ("past_values", (1, 6)), "returns_to_go": ("states", (1, 4, 3)),
                   "pixel_position_ids": ("pixel_values", (1, 4, 48)),
                   "spatial_shapes": ("pixel_values", (1, 6, 48)),
                   "aspect_ratio_ids": ("pixel_values", (1, 1, 4, 3, 8, 8))}.get(
        name, ("input_values", (1, 640)) if name == "input_features" else ("pixel_values", (1, 3, 8, 8)))
    params = _params(main, name, "future_values")
    grid = (1, 2, 2) if name == "spatial_shapes" else None  # patches fed with their image's (h, w): 2 padding
    fed = BESIDE[name].feeds(Try(params, config, main, shape, "native", torch.float32, grid=grid), {})
    assert name in fed


def test_the_spatial_shapes_are_fed_with_a_mask_of_the_padding_patches():
    """A tower fed patches with its image's ``(h, w)`` (SigLIP 2's) is fed ``[[h, w]]`` and each mask it takes, ones
    on the image's ``h·w`` patches and zeros on the padding after them."""
    params = _params("pixel_values", "pixel_attention_mask", "spatial_shapes")
    fed = beside(Try(params, None, "pixel_values", (1, 7, 12), "resampled", grid=(1, 2, 3)))
    assert fed["spatial_shapes"].tolist() == [[2, 3]]
    assert fed["pixel_attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 0]]


def test_the_switches_and_the_grid_each_need_their_occasion():
    """The resampling switch only at the resampled size of a forward that takes it; the grid only with one; a
    query transformer's encoder output only beside query embeddings; masks only those a forward takes."""
    params = _params("pixel_values", "interpolate_pos_encoding")
    assert beside(Try(params, None, "pixel_values", (1, 3, 8, 8), "native", resample_flag=True)) == {}
    assert beside(Try(params, None, "pixel_values", (1, 3, 8, 8), "resampled", resample_flag=True)) == {
        "interpolate_pos_encoding": True}
    grid = beside(Try(_params("hidden_states", "grid_thw", "merge_sizes"), None, "hidden_states", (16, 12),
                      grid=(1, 4, 4), merge=2))
    assert grid["grid_thw"].tolist() == [[1, 4, 4]] and grid["merge_sizes"].tolist() == [2]
    encoder = SimpleNamespace(encoder_hidden_size=6)
    params = _params("query_embeds", "encoder_hidden_states")
    assert tuple(beside(Try(params, encoder, "query_embeds", (1, 16, 6)))["encoder_hidden_states"].shape) == (1, 8, 6)
    assert beside(Try(params, encoder, "inputs_embeds", (1, 16, 6))) == {}


def test_the_query_text_is_fed_only_to_the_model_types_that_read_it():
    """TVP's forward reads a text beside its frames (:data:`~survey.pixel_beside.TEXT_BESIDE`): fed ids 2 … 5; any
    other model type whose forward takes ``input_ids`` beside pixel values is fed its pixels alone, as before."""
    from survey.pixel_beside import TEXT_BESIDE

    params = _params("pixel_values", "input_ids")
    tvp = beside(Try(params, SimpleNamespace(model_type=TEXT_BESIDE[0]), "pixel_values", (1, 3, 8, 8)))
    assert tvp["input_ids"].tolist() == [[2, 3, 4, 5]]
    assert "input_ids" not in beside(Try(params, SimpleNamespace(model_type="blip"), "pixel_values", (1, 3, 8, 8)))
