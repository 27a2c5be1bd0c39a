"""DETR's sine map on the queries and keys of its encoder and on its decoder's cross-attention keys, its decoder's
learned object queries on the decoder's queries, observed on the projections' inputs
(:mod:`survey.pixel_kinds.sincos2d_query_key`): exact with every wrong answer told apart, a wrong claim wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from survey.pixel_kinds.sincos2d_query_key import _gains, _grid
from survey.run import judge_quietly


@pytest.mark.parametrize("name", ["detr", "table-transformer"])
def test_the_map_on_queries_and_keys_and_the_object_queries_are_exact(observation, name):
    seen = observation(name)
    run = seen.stacks["pixels"]
    assert set(run.query_key) == {"native", "resampled"}
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert row.survived == [] and row.mutants >= 100  # a temperature ten times the config's among them
    # DETR builds its map in the run's float64; Table Transformer in float32 whatever it runs in
    assert row.max_error < (1e-14 if name == "detr" else 1e-6)


def _judged_with(monkeypatch, seen, change):
    answer_of = refpos.model_positions

    def wrong(config, *args, **kwargs):
        answer = answer_of(config, *args, **kwargs)
        return dataclasses.replace(answer, layers=tuple(change(r) for r in answer.layers))
    monkeypatch.setattr(refpos, "model_positions", wrong)
    return judge_quietly(seen)


def _sine(change):
    return lambda r: change(r) if r.kind == "sincos2d" else r


@pytest.mark.parametrize(("claim", "change"), [
    ("Deformable DETR's counts less a half", lambda r: dataclasses.replace(r, variant="deformable_detr")),
    ("half the channels", lambda r: dataclasses.replace(r, features=r.features // 2)),
    ("the encoder's map on the decoder's queries and keys",
     lambda r: dataclasses.replace(r, at="query_key", queries=None, query_rows=None) if r.stack == "decoder" else r),
    ("50 object queries", lambda r: dataclasses.replace(r, query_rows=50) if r.stack == "decoder" else r),
])
def test_a_wrong_claim_is_graded_wrong(observation, monkeypatch, claim, change):
    row = _judged_with(monkeypatch, observation("detr"), _sine(change))
    assert row.status == "wrong", (claim, row.status, row.cause)


def test_the_gains_are_each_projections_input_less_the_states_it_projects():
    tokens, memory = np.arange(6.0).reshape(1, 3, 2), np.ones((1, 4, 2))
    call = {"hidden_states": tokens, "key_value_states": memory, "q_proj.input": tokens + 2.0,
            "k_proj.input": memory + 3.0, "v_proj.input": memory}
    gains = _gains(call)
    assert np.all(gains["q"][0] == 2.0) and np.all(gains["k"][0] == 3.0) and np.all(gains["v"][0] == 0.0)
    assert gains["k"][0].shape == (4, 2)


def test_the_feature_map_is_the_factor_pair_nearest_the_images_aspect():
    assert _grid(6, [1, 3, 64, 96]) == (2, 3) and _grid(9, [1, 3, 96, 96]) == (3, 3)
    assert _grid(2, [1, 3, 64, 64]) is None  # 1 x 2 and 2 x 1 as near a square image


def test_a_layer_adding_nothing_keeps_no_states_and_a_map_claimed_there_is_wrong():
    from refpos.models import model_positions
    from survey.pixel_kinds.sincos2d_query_key import compare_query_key
    from survey.pixel_query_key import UNCHANGED, adds
    from survey.pixels import PixelRun

    states = np.ones((1, 4, 2))
    assert not adds({"hidden_states": states, "q_proj.input": states, "k_proj.input": states,
                     "v_proj.input": states})
    assert adds({"hidden_states": states, "q_proj.input": states + 1, "k_proj.input": states, "v_proj.input": states})
    detr = {"model_type": "detr", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
            "decoder_attention_heads": 2, "d_model": 16}
    record = model_positions(detr).stack("encoder")[0]
    run = PixelRun("DetrModel", "pixel_values", shapes={"native": [1, 3, 64, 64]},
                   query_key={"native": {"encoder.layers.0.self_attn": {UNCHANGED: np.zeros(0)}}})
    assert compare_query_key(record, run).status == "wrong"
    run.query_key = {"native": {"encoder.layers.0.mlp": {}}}
    assert compare_query_key(record, run).status == "not reached"
