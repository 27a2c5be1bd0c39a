"""The audio comparisons on hand-made runs (no torch): Data2Vec-audio's stacked convolutions and SEW's strided one
graded exact on what refpos computes and wrong on a deliberately wrong claim."""

from __future__ import annotations

import dataclasses

import numpy as np

import refpos
from survey.pixel_kinds import COMPARISONS
from survey.pixels import Capture, PixelRun, Site

RNG = np.random.default_rng(37)


def records(config):
    return list(refpos.model_positions(config).layers)


def _conv_run(params, x, e, module_class):
    site = Site("encoder.pos_conv_embed", "encoder", True, {k: v.astype(np.float32) for k, v in params.items()},
                captures={"native": Capture(module_in=x, module_out=e)})
    return PixelRun(module_class, "input_values", {"native": [1, 400]}, [site], attention=["Attention"],
                    dtype="float64")


def test_stacked_convolutions_are_exact_and_a_wrong_claim_is_not():
    from refpos.encodings.conv_position_mistakes import ConvPositionInputs

    config = {"model_type": "data2vec-audio", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
              "num_conv_pos_embeddings": 3, "conv_pos_kernel_size": 5, "num_conv_pos_embedding_groups": 2}
    record = records(config)[0]
    assert (record.form, record.layers) == ("stacked", 3)
    weights = [RNG.standard_normal((8, 4, 5)).astype(np.float32).astype(np.float64) for _ in range(3)]
    biases = [(0.1 * RNG.standard_normal(8)).astype(np.float32).astype(np.float64) for _ in range(3)]
    x = RNG.standard_normal((1, 12, 8))
    e = ConvPositionInputs("stacked", x, tuple(weights), tuple(biases), 2, "gelu", eps=1e-5).embedding()
    params = {f"encoder.pos_conv_embed.layers.{i}.conv.{n}": p for i in range(3)
              for n, p in (("weight", weights[i]), ("bias", biases[i]))}
    observed = _conv_run(params, x, e, "Data2VecAudioModel")
    outcome = COMPARISONS["conv_position"].judge(record, observed, observed.sites)
    assert outcome.status == "exact" and outcome.tried >= 3 and outcome.survived == [], outcome
    for wrong in ({"layers": 2}, {"activation": "relu"}, {"groups": 1}, {"form": "plain"}):
        claim = dataclasses.replace(record, **wrong)
        assert COMPARISONS["conv_position"].judge(claim, observed, observed.sites).status == "wrong", wrong


def test_a_strided_convolution_is_exact_and_a_wrong_stride_is_not():
    from refpos.encodings.conv_position_mistakes import ConvPositionInputs

    config = {"model_type": "sew", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
              "num_conv_pos_embeddings": 4, "num_conv_pos_embedding_groups": 2, "squeeze_factor": 2}
    record = records(config)[0]
    assert (record.form, record.stride) == ("weight_norm", 2)
    v = RNG.standard_normal((8, 4, 4)).astype(np.float32).astype(np.float64)
    g = RNG.uniform(0.5, 1.5, 4).astype(np.float32).astype(np.float64)
    bias = (0.1 * RNG.standard_normal(8)).astype(np.float32).astype(np.float64)
    x = RNG.standard_normal((1, 13, 8))
    e = ConvPositionInputs("weight_norm", x, (v,), (bias,), 2, "gelu", stride=2, weight_g=g).embedding()
    params = {"encoder.pos_conv_embed.conv.bias": bias, "encoder.pos_conv_embed.conv.parametrizations.weight."
              "original0": g.reshape(1, 1, -1), "encoder.pos_conv_embed.conv.parametrizations.weight.original1": v}
    # SEW's module takes and returns (B, C, T)
    observed = _conv_run(params, np.swapaxes(x, 1, 2), np.swapaxes(e, 1, 2), "SEWModel")
    outcome = COMPARISONS["conv_position"].judge(record, observed, observed.sites)
    assert outcome.status == "exact" and "stride_ignored" not in outcome.survived and outcome.tried >= 6, outcome
    for wrong in ({"stride": 1}, {"stride": 3}, {"activation": "gelu_new"}, {"groups": 1}):
        claim = dataclasses.replace(record, **wrong)
        assert COMPARISONS["conv_position"].judge(claim, observed, observed.sites).status == "wrong", wrong
