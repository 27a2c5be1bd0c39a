"""transformers' audio, feature and time-series models run and judged (survey/pixels.py): Data2Vec-audio's stacked
convolutions, Parakeet's relative sinusoid, LASR's RoPE on mel features and TimesFM 2.5's on a time series exact,
and a deliberately wrong claim on the same observation graded wrong (another layer count, sinusoid variant, base)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

import refpos
from survey import pixel_compare
from survey.pixels import STACK

#: model type -> (the kind compared, a wrong change of its record)
CASES = {"data2vec-audio": ("conv_position", {"layers": 2}),
         "parakeet_encoder": ("sinusoid1d", {"variant": "gemma3n_audio"}),
         "lasr_ctc": ("rope", "theta"),
         "timesfm2_5": ("rope", "theta")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_audio_or_series_model_is_exact_and_a_wrong_claim_is_not(observation, name):
    from survey.run import judge_quietly

    seen = observation(name)
    assert STACK in seen.stacks, seen.row.cause
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert row.mutants >= 3 and not row.survived
    kind, change = CASES[name]
    records = list(refpos.model_positions(seen.config).layers)
    wrong = []
    for record in records:
        if record.kind != kind:
            wrong.append(record)
        elif change == "theta":
            wrong.append(dataclasses.replace(record, rope=dataclasses.replace(record.rope,
                                                                              theta=record.rope.theta * 2)))
        else:
            wrong.append(dataclasses.replace(record, **change))
    outcomes = pixel_compare.judge_records(wrong, seen.stacks[STACK])
    assert "wrong" in [o.status for o in outcomes], outcomes
