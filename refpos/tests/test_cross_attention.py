"""A decoder layer's cross-attention without positions (refpos.models.cross): the family row's column, the
``decoder.cross`` records it gives beside the rotating self-attention, and bad rows refused by name. What
transformers' code does is anchored in test_anchors_cross_attention.py."""

from __future__ import annotations

import pytest

import refpos
from refpos.models.cross import CrossAttention, CrossFacts, read_cross
from refpos.models.families import family_of, read_row

DIA_DECODER = {"model_type": "dia_decoder", "num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 64, "rope_theta": 10000.0}
BLT = {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 64,
       "rope_theta": 10000.0}


def test_dia_decoder_lists_a_rotating_self_attention_and_a_cross_attention_per_layer():
    positions = refpos.model_positions(DIA_DECODER)
    assert positions.complete and positions.stacks == ("decoder", "decoder.cross")
    assert [layer.kind for layer in positions.stack("decoder")] == ["rope"] * 3
    cross = positions.stack("decoder.cross")
    assert [(layer.index, layer.kind) for layer in cross] == [(0, "none"), (1, "none"), (2, "none")]
    assert all(isinstance(layer, CrossAttention) and layer.reads == () and layer.query_scale is None
               for layer in cross)
    assert cross[0].describe()["keys"] == "encoder" and cross[0].describe()["cross"] is True
    assert positions.summary().splitlines() == ["decoder layers 0-2: rope ×3",
                                                "decoder cross-attention layers 0-2: none ×3"]
    assert set(positions.needs()) == {"decoder"}  # the cross-attention reads no input for positions


@pytest.mark.parametrize(("model_type", "every", "expected"), [
    ("blt_local_decoder", None, [0, 1, 2, 3]),   # the config class's default: every layer
    ("blt_local_decoder", False, [0]),           # before layer 0 alone
    ("blt_local_decoder", True, [0, 1, 2, 3]),
    ("blt_local_encoder", None, [3]),            # the config class's default: after the last layer alone
    ("blt_local_encoder", True, [0, 1, 2, 3]),
])
def test_blt_cross_attention_layers_follow_cross_attn_all_layers(model_type, every, expected):
    config = {"model_type": model_type, **BLT, **({} if every is None else {"cross_attn_all_layers": every})}
    positions = refpos.model_positions(config)
    assert positions.complete, positions.not_modelled
    assert [layer.index for layer in positions.stack("decoder.cross")] == expected
    assert "own patch" in positions.notes[0] or "own bytes" in positions.notes[0]


def test_idefics_states_its_cross_attention_and_stays_refused_for_its_rotation_reads():
    """Idefics's gated cross-attention sits before every cross_layer_interval-th layer; its rotation reads the
    mask's running count when given a mask without position ids, which refpos does not model: refused by name."""
    facts = family_of("idefics").cross_attention
    assert facts.layers({"cross_layer_interval": 2}, 5) == [0, 2, 4] and facts.layers({}, 2) == [0, 1]
    positions = refpos.model_positions({"model_type": "idefics", **BLT, "cross_layer_interval": 2})
    assert not positions.complete and "running count" in positions.not_modelled["model_type"]
    assert {layer.kind for layer in positions.stack("decoder")} == {"refused"}


def test_moonshine_streaming_stays_refused_for_its_keys_position_table():
    """MoonshineStreamingDecoder.forward adds pos_emb (a learned table read at each frame's index) to the encoder's
    states before every cross-attention: a position in the keys, which refpos does not model."""
    assert family_of("moonshine_streaming").cross_attention is None
    assert "pos_emb" in family_of("moonshine_streaming").unmodelled


def test_a_wrong_answer_is_told_apart():
    """The records say which layers cross-attend: a row stating only the first layer would list [0] and not
    the three the code runs (the check fails on that wrong answer)."""
    wrong = CrossFacts(keys="encoder", all_key="cross_attn_all_layers", all_default=False)
    assert wrong.layers({}, 3) == [0] != CrossFacts(keys="encoder").layers({}, 3)


@pytest.mark.parametrize("table", [
    {"queries": "tokens"},                                   # keys missing
    {"keys": "encoder", "colour": "red"},                    # a key outside the column
    {"keys": ""},
    {"keys": "encoder", "alone": "middle"},
    {"keys": "encoder", "every_default": 0},
    {"keys": "encoder", "all_default": "yes"},
    {"keys": "encoder", "every_key": "n", "all_key": "m"},   # two rules at once
])
def test_bad_cross_attention_columns_are_refused_by_name(table):
    with pytest.raises(ValueError, match="cross_attention"):
        read_cross("row", table)


def test_bad_config_values_are_refused_by_name():
    with pytest.raises(ValueError, match="cross_layer_interval"):
        CrossFacts(keys="images", every_key="cross_layer_interval").layers({"cross_layer_interval": 0}, 4)
    with pytest.raises(TypeError, match="cross_attn_all_layers"):
        CrossFacts(keys="patches", all_key="cross_attn_all_layers").layers({"cross_attn_all_layers": 1}, 4)


def test_a_row_with_cross_attention_needs_a_decoder_stack():
    with pytest.raises(ValueError, match="cross_attention"):
        read_row("x", {"source": "x/modeling_x.py: f", "stacks": "encoder", "encoding": "none",
                       "cross_attention": {"keys": "encoder"}})
    row = read_row("x", {"source": "x/modeling_x.py: f", "layout": "half", "cross_attention": {"keys": "encoder"}})
    assert row.cross_attention == CrossFacts(keys="encoder")
