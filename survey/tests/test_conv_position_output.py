"""A convolutional position module is compared by what it returns: the embedding alone (wav2vec 2.0, whose encoder
adds it to the frames) or the frames plus the embedding (OmniASR's ``OmniASRPositionalConvEmbedding``), told
apart by its output with its parameters zeroed; either way refpos's ``x + e`` is exact and a wrong claim is not."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from survey.pixel_kinds import compare_conv_position
from survey.pixels import Capture, PixelRun, Site

RNG = np.random.default_rng(7)
CONFIG = {"model_type": "wav2vec2", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
          "num_conv_pos_embeddings": 4, "num_conv_pos_embedding_groups": 2}


def plain_record():
    record = next(r for r in refpos.model_positions(CONFIG).layers if r.kind == "conv_position")
    return dataclasses.replace(record, form="plain")


def omniasr_run(record, x, kernel, bias, adds_input: bool, zeroed: bool = True):
    from refpos.encodings.conv_position_mistakes import ConvPositionInputs

    e = ConvPositionInputs("plain", x, (kernel,), (bias,), record.groups, record.activation).reference() - x
    out = x + e if adds_input else e
    at_zero = (x if adds_input else np.zeros_like(x)) if zeroed else None
    site = Site("audio_tower.encode_positions", "audio_tower", True, {
        "audio_tower.encode_positions.conv.weight": kernel, "audio_tower.encode_positions.conv.bias": bias},
        captures={"native": Capture(module_in=x.astype(np.float32), module_out=out.astype(np.float32),
                                    module_zeroed=None if at_zero is None else at_zero.astype(np.float32))})
    return PixelRun("OmniASRCTCModel", "input_values", {"native": [1, 400]}, [site], attention=["OmniASRAttention"])


@pytest.mark.parametrize("adds_input", [True, False], ids=["returns x + e", "returns e"])
def test_what_the_module_returns_is_accounted_for(adds_input):
    record = plain_record()
    kernel, bias = RNG.standard_normal((8, 4, 4)), 0.1 * RNG.standard_normal(8)
    observed = omniasr_run(record, RNG.standard_normal((1, 12, 8)), kernel, bias, adds_input)
    outcome = compare_conv_position(record, observed, observed.sites)
    assert outcome.status == "exact" and outcome.tried >= 4 and outcome.survived == [], outcome
    for wrong in ({"kernel": 3}, {"activation": "gelu_new"}, {"activation": "relu"}):
        outcome = compare_conv_position(dataclasses.replace(record, **wrong), observed, observed.sites)
        assert outcome.status == "wrong", wrong


def test_without_the_zeroed_output_the_module_is_read_as_the_embedding():
    """An observation stored without the zeroed run is read as before (the module returns the embedding): a module
    that returns x + e then differs by x, named, never passed."""
    record = plain_record()
    kernel, bias = RNG.standard_normal((8, 4, 4)), 0.1 * RNG.standard_normal(8)
    observed = omniasr_run(record, RNG.standard_normal((1, 12, 8)), kernel, bias, True, zeroed=False)
    assert compare_conv_position(record, observed, observed.sites).status == "wrong"
