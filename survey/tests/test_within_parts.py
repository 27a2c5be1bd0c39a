"""A part without a model class (a prompt encoder, a mask decoder) is built from its own config inside its
composite, run there, and refpos's answer for the part's config alone is judged against the part's own sites
(:mod:`survey.within_parts`): exact with its wrong answers told apart, and a wrong claim graded wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.models.records import NoAttention, NoPositions
from survey import store, within_parts
from survey.pixels import Capture, PixelRun, PositionCall, Site
from survey.run import judge_quietly

PARTS = ("edgetam_mask_decoder", "edgetam_prompt_encoder")


@pytest.mark.parametrize("name", PARTS)
def test_a_part_is_judged_on_its_own_sites_and_its_wrong_answers_told_apart(observation, name):
    seen = observation(name)
    part = seen.stacks[within_parts.PART]
    assert seen.config["model_type"] == name and part.composite == "edgetam"
    assert part.module == name.removeprefix("edgetam_")
    own = [site.path for site in part.own_run().sites]
    assert len(own) == 1 and all("vision_encoder" not in path for path in own)
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert row.mutants >= 7 and row.survived == [] and row.max_error < 1e-13
    assert row.observed[0] == "run within edgetam"


def test_the_decoder_is_handed_the_composites_grid_features_and_the_prompt_encoder_is_not(observation):
    decoder = observation("edgetam_mask_decoder").stacks[within_parts.PART]
    encoder = observation("edgetam_prompt_encoder").stacks[within_parts.PART]
    assert decoder.handed == ["shared_image_embedding.positional_embedding"] and encoder.handed == []
    assert decoder.attention and not encoder.attention


def _judged_with(monkeypatch, seen, change):
    """The row judged with refpos's records for the part's config replaced by ``change(records)``."""
    answer_of = refpos.model_positions

    def wrong(config, *args, **kwargs):
        answer = answer_of(config, *args, **kwargs)
        return dataclasses.replace(answer, layers=tuple(change(list(answer.layers))))
    monkeypatch.setattr(refpos, "model_positions", wrong)
    return judge_quietly(seen)


@pytest.mark.parametrize(("claim", "change"), [
    ("G of another width", lambda records: [dataclasses.replace(r, m=r.m // 2) for r in records]),
    ("the prompts' features, not the grid's", lambda records: [dataclasses.replace(r, variant="sam_prompts")
                                                               for r in records]),
    ("no positions", lambda records: [NoPositions(r.stack, r.index, None) for r in records]),
    ("no attention", lambda records: [NoAttention(r.stack, r.index, None, mixer="conv") for r in records]),
])
def test_a_wrong_claim_for_the_decoder_is_graded_wrong(observation, monkeypatch, claim, change):
    row = _judged_with(monkeypatch, observation("edgetam_mask_decoder"), change)
    assert row.status == "wrong", (claim, row.status, row.cause)


def test_a_prompt_encoder_claimed_to_attend_without_positions_is_graded_wrong(observation, monkeypatch):
    def attends(records):
        return [NoPositions(r.stack, r.index, None) if r.kind == "no_attention" else r for r in records]
    row = _judged_with(monkeypatch, observation("edgetam_prompt_encoder"), attends)
    assert row.status != "exact", row.cause


def test_a_stored_part_is_judged_as_observed(observation, tmp_path):
    seen = observation("edgetam_prompt_encoder")
    path = tmp_path / "part.npz"
    store.save(seen, path)
    again = store.load(path)
    assert isinstance(again.stacks[within_parts.PART], within_parts.PartRun)
    first, second = judge_quietly(seen), judge_quietly(again)
    assert (first.status, first.max_error, first.mutants) == (second.status, second.max_error, second.mutants)


def _run(fed_output: np.ndarray) -> PixelRun:
    call = PositionCall("shared_image_embedding", np.zeros((2, 2, 2)), fed_output)
    own = Site("prompt_encoder.shared_embedding.g", "prompt_encoder.shared_embedding", False,
               captures={"native": Capture(calls=[PositionCall("prompt_encoder.shared_embedding", np.zeros(2),
                                                               np.ones(2))])})
    grid = Site("shared_image_embedding.g", "shared_image_embedding", False, captures={"native": Capture(calls=[call])})
    return PixelRun("Composite", "pixel_values", sites=[grid, own])


def test_a_composite_site_is_the_parts_only_where_its_output_reaches_the_part_unchanged():
    output = np.arange(8.0).reshape(2, 2, 2)
    run = _run(output)
    channels_first = output.transpose(2, 0, 1)[None]
    assert within_parts.handed(run, [np.zeros(3), channels_first], "mask_decoder") == ["shared_image_embedding.g"]
    assert within_parts.handed(run, [channels_first + 1e-12], "mask_decoder") == []
    part = within_parts.PartRun("composite", "prompt_encoder_config", "prompt_encoder", "Part", run)
    assert [site.path for site in part.own_run().sites] == ["prompt_encoder.shared_embedding.g"]
