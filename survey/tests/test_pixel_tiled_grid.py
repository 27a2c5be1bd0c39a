"""The tiled_grid comparison (survey.pixel_kinds.tiled_grid) on a small Llama 3.2 Vision tower run by the survey:
fed its tiles with an aspect-ratio id and a mask of real tiles (survey.pixel_beside), refpos's answer exact with
every wrong answer caught; a changed observation and the wrong module names are not passed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _run():
    from transformers.models.mllama.configuration_mllama import MllamaVisionConfig
    from transformers.models.mllama.modeling_mllama import MllamaVisionModel

    from survey.pixels import observe_pixels

    config = MllamaVisionConfig(hidden_size=8, attention_heads=2, num_hidden_layers=1, num_global_layers=1,
                                intermediate_size=16, image_size=28, patch_size=14, intermediate_layers_indices=[0],
                                vision_output_dim=16)
    torch.manual_seed(0)
    return config, observe_pixels(MllamaVisionModel(config), config)


@pytest.fixture(scope="module")
def observed():
    import refpos

    config, run = _run()
    record = refpos.model_positions(config.to_dict() | {"model_type": "mllama_vision_model"}).stack(
        "vision.input")[0]
    return record, run


def test_the_tower_is_fed_its_tiles_and_aspect_ratio_id(observed):
    _, run = observed
    assert run.shapes["native"] == [1, 1, 4, 3, 28, 28]
    assert run.prompts["native"]["aspect_ratio_ids"].tolist() == [[8.0]]  # the last of the 8 default ratios


def test_refpos_is_exact_and_every_wrong_answer_is_caught(observed):
    from survey.pixel_kinds import COMPARISONS

    record, run = observed
    outcome = COMPARISONS["tiled_grid"].judge(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 12 and outcome.survived == []
    assert outcome.error < 1e-12  # a float64 run


def test_a_changed_observation_is_wrong(observed):
    from survey.pixel_kinds import COMPARISONS

    record, run = observed
    post = next(s for s in run.sites if s.path.endswith(record.post))
    capture = post.captures["native"]
    changed = dataclasses.replace(capture, module_out=capture.module_out + 1e-6 * np.abs(capture.module_out).max())
    sites = [dataclasses.replace(s, captures={"native": changed}) if s is post else s for s in run.sites]
    assert COMPARISONS["tiled_grid"].judge(record, run, sites).status == "wrong"


def test_a_record_naming_other_modules_finds_no_sites(observed):
    from survey.pixel_kinds import COMPARISONS

    record, run = observed
    outcome = COMPARISONS["tiled_grid"].judge(dataclasses.replace(record, pre="no_such_module"), run, run.sites)
    assert outcome.status != "exact" and "no_such_module" in outcome.cause


def test_a_record_of_another_table_size_is_wrong(observed):
    from survey.pixel_kinds import COMPARISONS

    record, run = observed
    assert COMPARISONS["tiled_grid"].judge(dataclasses.replace(record, ids=5), run, run.sites).status == "wrong"


def test_the_ids_and_mask_are_fed_only_beside_tiles():
    import inspect

    from survey.pixel_beside import Try, beside

    def forward(pixel_values, aspect_ratio_ids, aspect_ratio_mask):
        return None

    params = inspect.signature(forward).parameters
    fed = beside(Try(params, object(), "pixel_values", (1, 1, 4, 3, 28, 28)))
    assert fed["aspect_ratio_ids"].tolist() == [[1]] and fed["aspect_ratio_mask"].shape == (1, 1, 4)
    assert "aspect_ratio_ids" not in beside(Try(params, object(), "pixel_values", (1, 3, 28, 28)))
