"""The shaw_key comparison (survey.pixel_kinds.shaw_key) on small speech encoders run by the survey: Granite
Speech's conformer (blocks of 6 frames handed to scaled_dot_product_attention, its query projection without a bias
given one for the run) and wav2vec2-BERT (relative_key, an asymmetric clip): refpos's answer exact with every wrong
answer the inputs can show caught; a wrong record (the other sign, another block, another clip) and a changed
observation are wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _observed(model_type: str, config: object, model: object):
    import refpos
    from survey.pixels import observe_pixels

    run = observe_pixels(model, config)
    records = refpos.model_positions(config.to_dict() | {"model_type": model_type}).stack("audio")
    return records, run


@pytest.fixture(scope="module")
def granite():
    from transformers.models.granite_speech.configuration_granite_speech import GraniteSpeechEncoderConfig
    from transformers.models.granite_speech.modeling_granite_speech import GraniteSpeechCTCEncoder

    config = GraniteSpeechEncoderConfig(input_dim=8, num_layers=2, hidden_dim=16, num_heads=2, dim_head=8,
                                        context_size=6, max_pos_emb=10, output_dim=5)
    torch.manual_seed(0)
    return _observed("granite_speech_encoder", config, GraniteSpeechCTCEncoder(config))


@pytest.fixture(scope="module")
def w2v_bert():
    from transformers.models.wav2vec2_bert.configuration_wav2vec2_bert import Wav2Vec2BertConfig
    from transformers.models.wav2vec2_bert.modeling_wav2vec2_bert import Wav2Vec2BertModel

    config = Wav2Vec2BertConfig(hidden_size=16, num_attention_heads=2, num_hidden_layers=2, intermediate_size=32,
                                feature_projection_input_dim=8, left_max_position_embeddings=12,
                                right_max_position_embeddings=5, output_hidden_size=16)
    torch.manual_seed(0)
    return _observed("wav2vec2-bert", config, Wav2Vec2BertModel(config))


def _judge(record, run):
    from survey.pixel_kinds import COMPARISONS

    return COMPARISONS["shaw_key"].judge(record, run, run.sites)


@pytest.mark.parametrize(("name", "least"), [("granite", 6), ("w2v_bert", 3)])
def test_refpos_is_exact_and_every_wrong_answer_is_caught(request, name, least):
    records, run = request.getfixturevalue(name)
    for record in records:
        outcome = _judge(record, run)
        assert outcome.status == "exact", outcome.cause
        assert outcome.tried >= least and outcome.survived == []
        assert outcome.error < 1e-12  # a float64 run


def test_granite_s_blocks_were_recorded_with_the_last_one_partial(granite):
    _, run = granite
    site = next(s for s in run.sites if s.path.endswith("rel_pos_emb"))
    logits = site.captures["native"].logits  # 16 frames: blocks of 6, 6 and 4, two heads each
    assert logits.shape == (6, 6, 6) and np.all(logits[-2:, :4, 4:] < -1e30) and np.all(logits[-2:, :4, :4] > -1e30)


@pytest.mark.parametrize("changed", [{"sign": "key_minus_query"}, {"block": 5}, {"block": 7}, {"block": None},
                                     {"offset": 11, "rows": 23}])
def test_a_wrong_granite_record_is_wrong(granite, changed):
    records, run = granite
    assert _judge(dataclasses.replace(records[0], **changed), run).status == "wrong"


@pytest.mark.parametrize("changed", [{"sign": "query_minus_key"}, {"left": 11, "offset": 11, "rows": 17},
                                     {"right": 4, "rows": 17}])
def test_a_wrong_wav2vec2_bert_record_is_wrong(w2v_bert, changed):
    records, run = w2v_bert
    assert _judge(dataclasses.replace(records[0], **changed), run).status == "wrong"


def test_a_changed_observation_is_wrong(w2v_bert):
    records, run = w2v_bert
    site = next(s for s in run.sites if s.path.endswith("distance_embedding"))
    capture = site.captures["native"]
    saved = capture.logits.copy()
    try:
        capture.logits[0, 3, 2] += 1e-6
        outcome = _judge(records[0], run)
        assert outcome.status == "wrong" and "differs" in outcome.cause
    finally:
        capture.logits = saved
