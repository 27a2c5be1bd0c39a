"""A layer's cross-attention claims (survey.cross) against a tiny Dia model that transformers runs: refpos's answer
(no positions) exact, and the wrong answer that the cross-attention rotates graded a mismatch."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def dia():
    """The survey's tiny Dia model (transformers' dia/modeling_dia.py: each DiaDecoderLayer runs a rotating
    self_attention, then cross_attention over the encoder's states), observed as the survey observes it, and its
    decoder config as refpos reads it."""
    from survey.run import observe

    config, found = observe("dia")
    return found, {**config["decoder_config"], "model_type": "dia_decoder"}


def _cross(verdict):
    return [r for r in verdict.layers if "cross-attention" in r.cause]


def test_cross_attention_exact_and_a_rotated_one_wrong(dia):
    from survey.adaptor import resolve
    from survey.compare import compare
    from survey.mutants import mutants

    probe, config = dia
    resolution, layers = resolve(config), config["num_hidden_layers"]
    assert resolution.refused is None
    assert [c.index for c in resolution.layers if c.site == "cross"] == list(range(layers))
    results = _cross(compare(resolution, probe))
    assert [r.status for r in results] == ["exact"] * layers and max(r.error for r in results) == 0.0
    wrong = dict(mutants(resolution))["cross-attention rotated"]
    assert {r.status for r in _cross(compare(wrong, probe))} == {"mismatch"}


def test_a_claimed_cross_attention_the_layer_lacks_is_wrong(dia):
    from survey.adaptor import resolve
    from survey.compare import compare

    probe, config = dia
    resolution = resolve(config)
    layers = config["num_hidden_layers"]
    extra = dataclasses.replace(resolution.layers[-1], index=layers)  # one layer past the stack's last
    results = compare(dataclasses.replace(resolution, layers=(*resolution.layers, extra)), probe).layers
    assert [r.status for r in results if r.index == layers] == ["mismatch"]
