"""A composite's towers run on their own inputs and judged as its stacks (survey/towers.py): CLIP's and LLaVA's
vision tower (a CLIP vision model built from the composite's ``vision_config``) and Qwen2-Audio's audio encoder are
compared and exact, with the wrong answers of their kind told apart; the same run judged against a wrong tower
config (another image size or patch size, so another grid) is wrong, and a composite whose tower is wrong is a
wrong row."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

import refpos
from survey import towers
from survey.adaptor import NOT_RUN


@pytest.mark.parametrize(("name", "path", "stack"), [("clip", "vision_config", "vision"),
                                                     ("llava", "vision_config", "vision"),
                                                     ("qwen2_audio", "audio_config", "audio")])
def test_a_composites_tower_is_run_and_compared(observation, name, path, stack):
    from survey.run import judge_quietly

    seen = observation(name)
    assert path in seen.towers and seen.towers[path].run is not None, seen.towers
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    compared = [note for note in row.notes if note.startswith(f"{stack} stack ({path}, ")]
    assert compared and "compared, exact" in compared[0], row.notes
    assert row.towers[path] == "compared and exact", row.towers
    assert not any(note.startswith(f"{stack}") and note.endswith(NOT_RUN) for note in row.notes), row.notes
    verdict = towers.judge_towers(seen.config, seen.towers, refpos.model_positions(seen.config).parts)[0]
    assert verdict.tried >= 2 and not verdict.survived


@pytest.mark.parametrize("key", ["image_size", "patch_size"])
def test_a_tower_judged_against_another_grid_is_wrong(observation, key):
    seen = observation("llava")
    tower = seen.towers["vision_config"]
    wrong = dataclasses.replace(tower, config=tower.config | {key: 2 * tower.config[key]})
    verdict = towers.judge_tower(seen.config, "vision", wrong)
    assert verdict.status == "wrong", verdict.note


def test_a_wrong_tower_makes_the_row_wrong(observation, monkeypatch):
    from survey.run import judge_quietly

    seen = observation("llava")
    tower = seen.towers["vision_config"]
    wrong = dataclasses.replace(tower, config=tower.config | {"image_size": 2 * tower.config["image_size"]})
    monkeypatch.setattr(seen, "towers", {"vision_config": wrong})
    row = judge_quietly(seen)
    assert row.status == "wrong" and row.cause.startswith("vision stack (vision_config, "), row.cause
    assert row.towers == {"vision_config": "wrong"}


def test_a_tower_that_did_not_run_is_said_so(observation):
    seen = observation("llava")
    unrun = towers.Tower("vision_config", why="no geometry built")
    verdict = towers.judge_tower(seen.config, "vision", unrun)
    assert verdict.status == "not reached" and "its tower was not run (no geometry built)" in verdict.note
    assert verdict.outcome == "not run" and verdict.path == "vision_config"


def test_in_place_replaces_a_nested_sub_config_and_leaves_the_original():
    config = {"a": {"b": {"x": 1}, "c": 2}}
    out = towers.in_place(config, "a.b", {"x": 3})
    assert out == {"a": {"b": {"x": 3}, "c": 2}} and config == {"a": {"b": {"x": 1}, "c": 2}}


def test_a_tower_image_past_the_patch_bound_is_run_smaller_and_said_so():
    from types import SimpleNamespace

    big = SimpleNamespace(image_size=1540, patch_size=14)
    bounded, what = towers.within_patches(big)
    assert bounded.image_size == 64 * 14 and big.image_size == 1540
    assert what == f"image_size 1540 run as {64 * 14}: at most {towers.MAX_PATCHES} patches"
    for kept in (SimpleNamespace(image_size=1024, patch_size=16), SimpleNamespace(image_size=(1540, 1540),
                                                                                   patch_size=14)):
        assert towers.within_patches(kept) == (kept, "")


def test_a_survey_failure_observing_towers_is_a_note_and_the_language_run_stands(monkeypatch):
    from survey import run

    def broken(config0, max_parameters):
        raise RuntimeError("a bug of the survey")

    monkeypatch.setattr(towers, "observe_towers", broken)
    row = run.Row("llava", "not reached")
    assert run.observe_towers(object(), row) == {}
    assert row.notes == ["towers not observed: survey failed: RuntimeError: a bug of the survey"]


def test_observe_towers_again_rewrites_only_a_stored_language_run(observation, monkeypatch, tmp_path):
    """``observe --towers``: a stored composite's towers are replaced and its language model's run kept; a model
    type run on pixels as a whole (no language run) is not written back; a type with nothing stored is skipped."""
    from survey import run, store, stored

    for name in ("llava", "vit"):
        store.save(observation(name), store.path_of(tmp_path, name))
    vit_bytes = store.path_of(tmp_path, "vit").read_bytes()
    marker = towers.Tower("vision_config", why="observed again")
    monkeypatch.setattr(run, "observe_towers", lambda config0, row: {"vision_config": marker})
    stored.observe_types(["llava", "vit", "clip"], tmp_path, towers=True, echo=False)
    again = store.load(store.path_of(tmp_path, "llava"))
    assert again.towers["vision_config"].why == "observed again"
    assert again.run is not None and again.row.model_type == "llava"
    assert store.path_of(tmp_path, "vit").read_bytes() == vit_bytes
    assert not store.path_of(tmp_path, "clip").exists()
