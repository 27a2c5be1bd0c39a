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



def test_an_interleaved_rope_claim_is_not_judged_by_the_tables_alone():
    """A rotary module lays its table out [θ | θ] whatever pairs its apply function rotates (PE-Audio's pairs
    (2i, 2i + 1) from the first half): with no apply function's call recorded, a claim of adjacent pairs is not
    reached by name, never graded on a table whose channel order is not the one applied."""
    record = records(LLAMA)[0]
    interleaved = dataclasses.replace(record, rope=dataclasses.replace(record.rope, layout="interleaved"))
    outcome = COMPARISONS["rope"].judge(interleaved, rotary_run(record.rope), [])
    assert outcome.status == "not reached" and "apply function" in outcome.cause, outcome


def with_calls(run, rope):
    """``run`` with its apply function's calls recorded: a query and a key before, and after ``rope``'s rotation
    of them at the positions the rotary module was fed (float32), as :func:`survey.pixel_capture.one_head` keeps
    them (tokens, head size)."""
    from survey.probe import Applied

    rng = np.random.default_rng(5)
    applied = {}
    for size, capture in run.rotary[0].captures.items():
        positions = capture.module_in[0].astype(np.int64)
        before = [rng.standard_normal((positions.size, rope.head_dim)) for _ in range(2)]
        after = [np.asarray(refpos.apply_rope(x.astype(np.float32), positions, rope)).astype(np.float64)
                 for x in before]
        applied[size] = [Applied("modeling_pe_audio.apply_rotary_pos_emb", before, after, None)]
    return dataclasses.replace(run, applied=applied)


def test_the_rotation_is_compared_as_a_map_where_the_apply_function_ran():
    """PE-Audio's apply function pairs adjacent channels of a [θ | θ] table: its module's tables are a half
    layout's, and only the map at the apply function shows the pairs. There the interleaved claim is exact with
    every wrong answer told apart (the half layout among them), and the half claim, which the tables pass, is
    graded wrong."""
    half = records(LLAMA)[0]
    interleaved = dataclasses.replace(half, rope=dataclasses.replace(half.rope, layout="interleaved"))
    run = with_calls(rotary_run(half.rope), interleaved.rope)
    outcome = COMPARISONS["rope"].judge(interleaved, run, [])
    assert outcome.status == "exact" and outcome.survived == [] and outcome.tried >= 5, outcome
    assert COMPARISONS["rope"].judge(half, run, []).status == "wrong"
    assert COMPARISONS["rope"].judge(half, rotary_run(half.rope), []).status == "exact"  # the tables alone pass it
    faster = dataclasses.replace(interleaved, rope=dataclasses.replace(interleaved.rope, theta=5e5))
    assert COMPARISONS["rope"].judge(faster, run, []).status == "wrong"


def test_a_call_of_another_token_count_is_not_compared():
    """A recorded call whose token axis is not the positions' (a head axis kept instead) is not compared: the
    interleaved claim is then not reached, not graded on rows that are not tokens."""
    half = records(LLAMA)[0]
    interleaved = dataclasses.replace(half, rope=dataclasses.replace(half.rope, layout="interleaved"))
    run = with_calls(rotary_run(half.rope), interleaved.rope)
    heads = {size: [dataclasses.replace(call, before=[x[:2] for x in call.before],
                                        after=[x[:2] for x in call.after]) for call in calls]
             for size, calls in run.applied.items()}
    outcome = COMPARISONS["rope"].judge(interleaved, dataclasses.replace(run, applied=heads), [])
    assert outcome.status == "not reached" and "no apply function's call was recorded" in outcome.cause, outcome
    assert COMPARISONS["rope"].judge(interleaved, run, []).status == "exact"  # the same calls, token rows kept


def test_the_token_axis_of_a_recorded_call():
    """:func:`survey.pixel_capture.one_head` keeps the axis of the tables' token count: PE-Audio's query
    ``(1, 4 heads, 3 tokens, d)`` keeps the 3 tokens (the longest axis is the heads'); with as many heads as
    tokens, a text apply function's ``(B, H, N, D)`` keeps the last (PE-Audio's), a vision one's ``(B, N, H, D)``
    the first (Kimi-K2.5's); with no count, the longest axis."""
    from survey.pixel_capture import one_head

    x = np.arange(1 * 4 * 3 * 2).reshape(1, 4, 3, 2)
    assert np.array_equal(one_head(x, 3), x[0, 0])
    assert np.array_equal(one_head(x), x[0, :, 0])
    tie = np.arange(1 * 4 * 4 * 2).reshape(1, 4, 4, 2)
    assert np.array_equal(one_head(tie, 4), tie[0, 0])
    assert np.array_equal(one_head(tie, 4, heads_first=False), tie[0, :, 0])
    flat = np.arange(5 * 2 * 2).reshape(5, 2, 2)  # (N, H, D)
    assert np.array_equal(one_head(flat, 5), flat[:, 0])


WHISPER = {"model_type": "whisper", "d_model": 8, "encoder_layers": 2, "decoder_layers": 2,
           "encoder_attention_heads": 2, "decoder_attention_heads": 2, "max_source_positions": 16,
           "max_target_positions": 12, "num_mel_bins": 8}


def whisper_run(built, read_from=0):
    """Whisper's two tables: the encoder's frozen sinusoid (built as ``built``, then drawn) read whole, and the
    decoder's learned table read at rows ``read_from …`` for four decoder ids; each an embedding fed integer ids."""
    encoder_table, decoder_table = (RNG.standard_normal(shape).astype(np.float32) for shape in ((16, 8), (12, 8)))
    encoder = Site("encoder.embed_positions", "encoder", True, {"encoder.embed_positions.weight": encoder_table},
                   {"encoder.embed_positions.weight": built},
                   {"native": Capture(module_out=encoder_table.astype(np.float32))})
    decoder = Site("decoder.embed_positions", "decoder", True, {"decoder.embed_positions.weight": decoder_table},
                   captures={"native": Capture(module_out=decoder_table[None, read_from:read_from + 4])})
    return PixelRun("WhisperModel", "input_features", {"native": [1, 8, 32]}, [encoder, decoder],
                    attention=["WhisperAttention"], dtype="float64")


def test_whisper_s_sinusoid_and_learned_table_are_exact_and_wrong_ones_are_not():
    from survey import pixel_compare

    records = list(refpos.model_positions(WHISPER).layers)
    assert [r.kind for r in records] == ["sinusoidal", "sinusoidal", "learned", "learned"]
    table = np.asarray(records[0].sinusoid(np.arange(16)), dtype=np.float32)
    outcomes = pixel_compare.judge_records(records, whisper_run(table))
    assert [o.status for o in outcomes] == ["exact"] * 5, outcomes
    assert outcomes[0].tried >= 3 and all(not o.survived for o in outcomes)
    swapped = np.concatenate([table[:, 4:], table[:, :4]], axis=1)  # cos before sin
    for observed in (whisper_run(swapped), whisper_run(table, read_from=1)):
        assert "wrong" in [o.status for o in pixel_compare.judge_records(records, observed)]
    for wrong in ({"spacing": "paper"}, {"offset": 1}, {"layout": "interleaved"}):
        claim = dataclasses.replace(records[0], **wrong)
        assert COMPARISONS["sinusoidal"].judge(claim, whisper_run(table), []).status == "wrong", wrong


def test_a_sinusoid_stored_without_its_amplitude_is_compared_times_it():
    config = {"model_type": "canary_decoder", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
              "max_position_embeddings": 16}
    (record,) = [r for r in refpos.model_positions(config).layers if r.kind == "sinusoid1d"]
    assert record.variant == "canary"
    scaled = np.asarray(record.reference(positions=np.arange(16)), dtype=np.float64)
    unscaled = scaled * np.sqrt(8)
    site = Site("decoder.pos_emb", "decoder", True, {"decoder.pos_emb.positional_embedding": unscaled},
                captures={"native": Capture(module_out=unscaled[:4] / np.sqrt(8))})  # the forward's division
    observed = PixelRun("CanaryModel", "input_features", {"native": [1, 8, 32]}, [site], attention=["A"],
                        dtype="float64")
    outcome = COMPARISONS["sinusoid1d"].judge(record, observed, observed.sites)
    assert outcome.status == "exact" and not outcome.survived, outcome
    site.captures["native"] = Capture(module_out=unscaled[:4])  # the amplitude not applied
    assert COMPARISONS["sinusoid1d"].judge(record, observed, observed.sites).status == "wrong"


def test_the_input_shapes_of_time_series_codecs_and_encoder_sub_configs():
    from types import SimpleNamespace

    from survey.pixel_inputs import candidates

    series = candidates("past_values", SimpleNamespace(context_length=32, num_input_channels=3))
    assert series == {"native": [(1, 32), (1, 32, 3)], "resampled": [(1, 16), (1, 16, 3)]}
    assert candidates("past_values", SimpleNamespace(context_length=16384))["native"][0] == (1, 512)
    assert candidates("latents", SimpleNamespace(hidden_size=24)) == {"native": [(1, 24, 8)],
                                                                      "resampled": [(1, 24, 12)]}
    asr = SimpleNamespace(encoder_config=SimpleNamespace(num_mel_bins=128))
    assert candidates("input_features", asr)["native"][0] == (1, 128, 64)
