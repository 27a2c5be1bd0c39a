"""A family row's ``architectures``: a config naming a model class that adds positions refpos does not model is
refused under ``architectures``; the row's own network is answered otherwise (SpeechT5's prenets)."""

import pytest

from refpos import model_positions
from refpos.models.families import read_row

SPEECHT5 = {"model_type": "speecht5", "hidden_size": 16, "encoder_layers": 2, "decoder_layers": 2,
            "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_max_relative_position": 8,
            "max_speech_positions": 64, "max_text_positions": 32, "num_conv_pos_embeddings": 8,
            "num_conv_pos_embedding_groups": 2}


def test_the_network_alone_is_answered():
    for architectures in (None, [], ["SpeechT5Model"]):
        answer = model_positions({**SPEECHT5, "architectures": architectures})
        assert "architectures" not in answer.not_modelled
        assert {layer.kind for layer in answer.stack("encoder")} == {"shaw_key"}


@pytest.mark.parametrize("task", ["SpeechT5ForSpeechToText", "SpeechT5ForTextToSpeech", "SpeechT5ForSpeechToSpeech"])
def test_a_task_model_with_prenets_is_refused_by_name(task):
    answer = model_positions({**SPEECHT5, "architectures": [task]})
    assert task in answer.not_modelled["architectures"] and "prenet" in answer.not_modelled["architectures"]
    assert {layer.kind for layer in answer.layers} == {"refused"}


def test_the_column_is_checked():
    row = {"source": "x/modeling_x.py: f", "encoding": "none"}
    with pytest.raises(ValueError, match="architectures"):
        read_row("x", {**row, "architectures": ["SpeechT5ForTextToSpeech"]})
    with pytest.raises(ValueError, match="architectures"):
        read_row("x", {**row, "architectures": {"Bad Name": "adds a table"}})
