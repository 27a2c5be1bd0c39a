"""Model types fed their own way (survey.keyed_runs): SpeechT5Model run on hidden states past its table's clip, the
logits of every encoder attention fed the one table its encoder gathers recorded on that table's site, and the
shaw_key comparison of each encoder layer exact with every wrong answer the inputs can show caught; a wrong record
(the other sign, the clip one further above, another table) is wrong. Phi-4's audio encoder run on frames that are
40 and 60 after its subsampling, its table made a site and the additive mask each attention is fed recorded: each
layer's bias and window exact, a wrong record (the other sign, no window, another chunk) wrong."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

CLIP = 6


@pytest.fixture(scope="module")
def speecht5():
    from transformers import SpeechT5Config, SpeechT5Model

    import refpos
    from survey.pixels import observe_pixels

    config = SpeechT5Config(hidden_size=16, encoder_attention_heads=2, decoder_attention_heads=2, encoder_layers=2,
                            decoder_layers=1, encoder_ffn_dim=32, decoder_ffn_dim=32,
                            encoder_max_relative_position=CLIP)
    torch.manual_seed(0)
    run = observe_pixels(SpeechT5Model(config), config)
    return refpos.model_positions(config.to_dict()), run


def _judge(record, run):
    from survey.pixel_kinds import COMPARISONS

    return COMPARISONS["shaw_key"].judge(record, run, run.sites)


def test_the_frames_pass_the_clip_and_every_encoder_layer_s_logits_are_recorded(speecht5):
    from survey.keyed_runs import PAST_CLIP

    _, run = speecht5
    assert run.shapes == {"native": [1, CLIP + PAST_CLIP[0], 16], "resampled": [1, CLIP + PAST_CLIP[1], 16]}
    (site,) = run.sites
    assert site.path == "encoder.wrapped_encoder.embed_positions"
    for size, capture in site.captures.items():
        frames = run.shapes[size][1]
        assert [call.module for call in capture.calls] == [f"encoder.wrapped_encoder.layers.{i}.attention"
                                                           for i in range(2)]
        assert all(call.output.shape == (2, frames, frames) for call in capture.calls)


def test_refpos_is_exact_on_every_encoder_layer_and_every_wrong_answer_is_caught(speecht5):
    answer, run = speecht5
    for record in answer.stack("encoder"):
        outcome = _judge(record, run)
        assert outcome.status == "exact", outcome.cause
        assert outcome.tried >= 3 and outcome.survived == []
        assert outcome.error < 1e-12  # a float64 run


@pytest.mark.parametrize("changed", [{"sign": "key_minus_query"}, {"left": CLIP - 1, "right": CLIP},
                                     {"right": CLIP, "rows": 2 * CLIP + 1}, {"rows": 2 * CLIP + 1}])
def test_a_wrong_record_is_wrong(speecht5, changed):
    answer, run = speecht5
    assert _judge(dataclasses.replace(answer.stack("encoder")[1], **changed), run).status == "wrong"


def test_the_model_as_a_whole_is_exact(speecht5):
    from survey.pixel_compare import judge_records, summary

    answer, run = speecht5
    judged = summary(judge_records(list(answer.layers), run))
    assert judged.failed is None and judged.survived == ()


@pytest.fixture(scope="module")
def phi4():
    from transformers.models.phi4_multimodal.configuration_phi4_multimodal import Phi4MultimodalAudioConfig
    from transformers.models.phi4_multimodal.modeling_phi4_multimodal import Phi4MultimodalAudioModel

    import refpos
    from survey.pixels import observe_pixels

    config = Phi4MultimodalAudioConfig(hidden_size=16, intermediate_size=16, num_blocks=2, num_attention_heads=2,
                                       chunk_size=16, left_chunk=1, input_size=8, bias_max_distance=30,
                                       nemo_conv_channels=8, ext_pw_out_channel=16, depthwise_separable_out_channel=16)
    torch.manual_seed(0)
    run = observe_pixels(Phi4MultimodalAudioModel(config), config)
    return refpos.model_positions(config.to_dict()).stack("audio"), run


def test_phi4_s_table_is_a_site_and_each_attention_s_mask_is_recorded(phi4):
    _, run = phi4
    (site,) = run.sites
    assert site.path == "relative_attention_bias_layer" and site.params[f"{site.path}.bias_values.weight"].shape == (
        60, 2)
    for size, frames in (("native", 40), ("resampled", 60)):
        calls = site.captures[size].calls
        assert [c.module for c in calls] == ["encoders.0.self_attn", "encoders.1.self_attn"]
        assert all(c.output.shape == (1, 2, frames, frames) for c in calls)


def test_phi4_s_bias_and_window_are_exact_and_every_wrong_answer_is_caught(phi4):
    records, run = phi4
    for record in records:
        outcome = _judge(record, run)
        assert outcome.status == "exact", outcome.cause
        # the sign, the clip narrower, the offset, the window dropped, chunks shorter and longer, ℓ ± 1
        assert outcome.tried >= 7 and outcome.survived == []


@pytest.mark.parametrize("changed", [{"sign": "query_minus_key"}, {"window": None}, {"window": (15, 1)},
                                     {"window": (16, 0)}, {"left": 29, "right": 28, "offset": 29, "rows": 58}])
def test_a_wrong_phi4_record_is_wrong(phi4, changed):
    records, run = phi4
    assert _judge(dataclasses.replace(records[0], **changed), run).status == "wrong"
