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


CONFORMER = {"model_type": "wav2vec2-conformer", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
             "num_conv_pos_embeddings": 4, "num_conv_pos_embedding_groups": 2}


def relative_run(table_of, frames=(5, 7)):
    """A Conformer run: the position module fed ``T`` frames outputs ``table_of(T)`` (float32, as the models build
    it); each layer's ``linear_pos`` reads it; each layer holds a bare ``pos_bias_u``."""
    module = Site("encoder.embed_positions", "encoder", True, {"encoder.embed_positions.pe": np.zeros((1, 9, 8))})
    sites = [module]
    for layer in range(2):
        sites += [Site(f"encoder.layers.{layer}.self_attn.pos_bias_u", f"encoder.layers.{layer}.self_attn", False,
                       {f"encoder.layers.{layer}.self_attn.pos_bias_u": np.ones((2, 4))}),
                  Site(f"encoder.layers.{layer}.self_attn.linear_pos", f"encoder.layers.{layer}.self_attn", True,
                       {f"encoder.layers.{layer}.self_attn.linear_pos.weight": np.ones((8, 8))})]
    for size, t in zip(("native", "resampled"), frames, strict=True):
        table = np.asarray(table_of(t), dtype=np.float32)[None]
        module.captures[size] = Capture(module_in=np.zeros((1, t, 8), np.float32), module_out=table)
        for site in sites[1:]:
            site.captures[size] = Capture(module_in=table if site.is_module else None)
    return PixelRun("Wav2Vec2ConformerModel", "input_values", {"native": [1, 400], "resampled": [1, 600]}, sites,
                    attention=["Wav2Vec2ConformerSelfAttention"], dtype="float64")


def _espnet(t, reverse=False, positive=False):
    from refpos.encodings.sinusoid1d_variants import SINUSOID_1D_VARIANTS

    table = np.asarray(SINUSOID_1D_VARIANTS["espnet_relative"].build(8, left=t - 1, right=t - 1), dtype=np.float64)
    if positive:  # the negative distances encoded as positive ones
        table = np.concatenate([table[:t], table[:t - 1][::-1]])
    return table[::-1] if reverse else table


def test_a_relative_sinusoid_is_exact_and_each_catalogued_mistake_is_told_apart():
    from survey import pixel_compare

    records = [r for r in refpos.model_positions(CONFORMER).layers]
    assert [r.at for r in records] == ["relative", "relative"]
    observed = relative_run(_espnet)
    outcomes = pixel_compare.judge_records(records, observed)
    assert [o.status for o in outcomes] == ["exact"] * 3, outcomes  # two layers and the run as a whole
    assert outcomes[0].tried >= 4 and outcomes[0].survived == [] and outcomes[0].error < 1e-6
    assert set(outcomes[0].sites) == {"encoder.embed_positions", "encoder.layers.0.self_attn.pos_bias_u",
                                      "encoder.layers.0.self_attn.linear_pos"}


def test_a_wrong_relative_sinusoid_claim_is_graded_wrong():
    records = [r for r in refpos.model_positions(CONFORMER).layers]
    judge = COMPARISONS["sinusoid1d"].judge
    for table_of in (lambda t: _espnet(t, reverse=True), lambda t: _espnet(t, positive=True),
                     lambda t: _espnet(t).reshape(-1, 4, 2)[..., ::-1].reshape(-1, 8)):  # sin, cos swapped
        observed = relative_run(table_of)
        assert judge(records[0], observed, observed.sites).status == "wrong"
    observed = relative_run(_espnet)
    for wrong in ({"variant": "gemma3n_audio"}, {"dim": 4}, {"settings": (("left", 2), ("right", 2))}):
        assert judge(dataclasses.replace(records[0], **wrong), observed, observed.sites).status == "wrong", wrong


def test_a_position_module_the_forward_never_calls_is_left_out():
    from survey.pixels import unread

    same = np.ones((1, 4, 8), np.float32)
    never = Site("encoder.pos_conv_embed", "encoder", True, {"encoder.pos_conv_embed.conv.bias": np.ones(8)},
                 captures={"native": Capture([same], [same.copy()])})
    assert unread(never)
    moved = dataclasses.replace(never, captures={"native": Capture([same], [same + 1])})
    called = dataclasses.replace(never, captures={"native": Capture([same], [same.copy()], same, same)})
    assert not unread(moved) and not unread(called)


LLAMA = {"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 16,
         "rope_theta": 10000.0, "max_position_embeddings": 64}


def rotary_run(rope, frames=(6, 9)):
    """An audio run whose rotary module fed positions ``0 … T − 1`` returned refpos's own tables (float32)."""
    from survey.pixel_kinds.rope import tables

    site = Site("encoder.rotary_emb", "encoder", True)
    for size, t in zip(("native", "resampled"), frames, strict=True):
        positions = np.arange(t, dtype=np.float64)
        both = tables(rope, positions)[0].astype(np.float32)[:, None]  # (2, B, T, r)
        site.captures[size] = Capture(module_in=positions[None], module_out=both)
    return PixelRun("AudioEncoder", "input_features", {"native": [1, 8, 12], "resampled": [1, 8, 18]}, [],
                    attention=["Attention"], dtype="float64", rotary=[site])


def test_a_rotary_module_s_tables_are_exact_and_each_changed_claim_is_told_apart():
    record = records(LLAMA)[0]
    observed = rotary_run(record.rope)
    outcome = COMPARISONS["rope"].judge(record, observed, [])
    assert outcome.status == "exact" and outcome.tried >= 3 and outcome.survived == [], outcome
    assert outcome.error < 1e-6


def test_a_wrong_rope_claim_is_graded_wrong():
    record = records(LLAMA)[0]
    for wrong in ({"theta": 500000.0}, {"layout": "interleaved"}, {"rotary_dim": 4, "partial_rotary_factor": 0.5}):
        observed = rotary_run(dataclasses.replace(record.rope, **wrong))
        assert COMPARISONS["rope"].judge(record, observed, []).status == "wrong", wrong
    nothing = dataclasses.replace(rotary_run(record.rope), rotary=[])
    assert COMPARISONS["rope"].judge(record, nothing, []).status == "not reached"
