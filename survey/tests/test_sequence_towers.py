"""A composite's second sequence stack run on token ids and compared as its language model is
(survey/sequence_towers.py): Voxtral Realtime's audio encoder, fed embeddings at the probe's position ids, is
compared and exact with its wrong answers told apart, and its refusal as an unrun stack is gone; the same run judged
against a wrong claim (another base) is wrong and makes the row wrong; a stack that did not run, or whose positions
only the whole composite forms, keeps its refusal, naming why."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

from survey import sequence_towers
from survey.adaptor import UNRUN

NAME, PATH, STACK = "voxtral_realtime", "audio_config", "audio"


def test_the_stack_is_run_on_embeddings_and_compared(observation):
    from survey.run import judge_quietly

    seen = observation(NAME)
    ran = seen.sequences[PATH]
    assert ran.run is not None and ran.fed == "inputs_embeds" and ran.run.position_ids_taken, ran.why
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert row.towers[PATH + sequence_towers.KEY] == "compared and exact", row.towers
    verdict = sequence_towers.judge_sequence(seen.config, STACK, PATH, ran)
    assert verdict.status == "exact" and verdict.tried >= 5 and not verdict.survived, verdict
    assert not any(UNRUN in note for note in row.notes), row.notes


@pytest.mark.parametrize("change", [{"rope_theta": 2.0}, {"head_dim": 0.5}])
def test_a_wrong_claim_on_the_stack_is_graded_wrong(observation, monkeypatch, change):
    """refpos asked about another base (or head width) than the stack ran with: its claim is wrong on the run."""
    from survey.run import judge_quietly

    seen = observation(NAME)
    ran = seen.sequences[PATH]
    config = dict(ran.config)
    for key, factor in change.items():
        rope = dict(config.get("rope_parameters") or {})
        if key in rope:
            rope[key] = rope[key] * factor
            config["rope_parameters"] = rope
        else:
            config[key] = type(config[key])(config[key] * factor)
    wrong = dataclasses.replace(ran, config=config)
    verdict = sequence_towers.judge_sequence(seen.config, STACK, PATH, wrong)
    assert verdict.status == "wrong", verdict.note
    monkeypatch.setattr(seen, "sequences", {PATH: wrong})
    row = judge_quietly(seen)
    assert row.status == "wrong" and row.cause.startswith(f"{STACK} stack ({PATH}, "), row.cause


def test_a_stack_that_did_not_run_keeps_its_refusal(observation, monkeypatch):
    from survey.run import judge_quietly

    seen = observation(NAME)
    monkeypatch.setattr(seen, "sequences", {PATH: sequence_towers.SequenceRun(PATH, why="it took no position ids")})
    row = judge_quietly(seen)
    assert row.status == "refused", row.cause
    assert f"{STACK} stack: " in row.cause and "not compared: not run on token ids (it took no position ids)" in \
        row.cause and UNRUN not in row.cause, row.cause
    assert row.towers[PATH + sequence_towers.KEY] == "not run"


def test_positions_only_the_composite_forms_are_not_compared(observation, monkeypatch):
    """A stack whose layers read what the whole composite forms (π0.5's running count of the mask over the prefix)
    is not compared on a run of the stack alone: here the stack's own source made foreign."""
    from survey.run import judge_quietly

    seen = observation(NAME)
    monkeypatch.setattr(sequence_towers, "STANDALONE", ("cache_position",))
    row = judge_quietly(seen)
    assert row.status == "refused" and "which the composite forms over the whole sequence" in row.cause, row.cause
    assert row.towers[PATH + sequence_towers.KEY] == "not compared"


def test_a_stack_inside_a_model_fed_audio_is_run_on_its_own_module(observation):
    """CSM's codec (Mimi) forms its positions itself from audio; its encoder's and decoder's transformers each take
    position ids and hold their own rotary module: each is run on embeddings and compared, and the row is exact."""
    from survey.run import judge_quietly

    seen = observation("csm")
    runs = {key: ran for key, ran in seen.sequences.items() if key.startswith("codec_config/")}
    assert len(runs) == 2 and all(ran.run is not None and ran.fed == "hidden_states" for ran in runs.values()), runs
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert all(row.towers[key + sequence_towers.KEY] == "compared and exact" for key in runs), row.towers


def test_a_stack_that_takes_no_position_ids_is_compared_by_its_tower(observation):
    """GLM-ASR's audio encoder takes no position ids (each frame turns by its index): it cannot run on token ids,
    and its tower's run on its own input compared its rotation exactly, so its refusal is dropped and the row is
    exact. Where the tower's verdict is not exact, or a wrong answer survived it, the refusal stays."""
    from survey.run import judge_quietly
    from survey.towers import TowerVerdict

    seen = observation("glmasr")
    (ran,) = [run for key, run in seen.sequences.items() if key.startswith("audio_config")]
    assert ran.run is None and sequence_towers.NO_POSITION_IDS in ran.why
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert any("compared on its own input by its tower's run" in note for note in row.notes)
    exact = TowerVerdict("audio", "exact", "", 1e-6, 48, path="audio_config")
    assert sequence_towers.by_tower("audio", "audio_config", [ran], [exact])[0].status == "exact"
    for unlike in (dataclasses.replace(exact, status="wrong"), dataclasses.replace(exact, survived=("layout",)),
                   dataclasses.replace(exact, tried=0), dataclasses.replace(exact, path="vision_config")):
        assert sequence_towers.by_tower("audio", "audio_config", [ran], [unlike]) == []
    assert sequence_towers.by_tower("audio", "audio_config", [dataclasses.replace(ran, why="no class")], [exact]) == []
