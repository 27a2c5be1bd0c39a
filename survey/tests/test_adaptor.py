"""The adaptor counts refpos's refusals: Refused and Unknown records, and keys reported as not modelled other
than masks and scales (no torch needed)."""

from __future__ import annotations

from types import SimpleNamespace

import refpos
from survey import adaptor

LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}


def test_a_plain_answer_is_no_refusal_and_a_window_is_a_note():
    answer = adaptor.resolve({**LLAMA, "sliding_window": 4, "use_sliding_window": True})
    assert answer.refused is None and answer.error is None and [c.kind for c in answer.layers] == ["rope"] * 2


def test_unknown_model_types_and_not_modelled_keys_are_refusals(monkeypatch):
    assert "is not in the family table" in adaptor.resolve({**LLAMA, "model_type": "no_such"}).refused
    real = refpos.model_positions

    def with_key(config):
        answer = real(config)
        return SimpleNamespace(layers=answer.layers, model_type=answer.model_type, parts=answer.parts,
                               not_modelled={"attn_logit_softcapping": "a cap", "text_config.rope_foo": "a rule"})
    monkeypatch.setattr(refpos, "model_positions", with_key)
    answer = adaptor.resolve(LLAMA)
    assert answer.refused == "text_config.rope_foo: a rule" and answer.notes == ("attn_logit_softcapping: a cap",)


def test_a_vision_tower_stack_is_noted_not_compared():
    """Token ids never reach a vision tower: its records are named in a note, the decoder's are claims."""
    config = {"model_type": "qwen2_vl", "vision_config": {"depth": 2, "embed_dim": 32, "num_heads": 2},
              "text_config": {"model_type": "qwen2_vl_text", "num_hidden_layers": 2, "hidden_size": 64,
                              "num_attention_heads": 4, "rope_parameters": {"rope_type": "default",
                                                                            "rope_theta": 10000.0,
                                                                            "mrope_section": [2, 3, 3]}}}
    assert "vision" in refpos.model_positions(config).stacks
    answer = adaptor.resolve(config)
    assert answer.error is None and {c.stack for c in answer.layers} == {"decoder"}
    assert answer.notes[0].startswith("vision stack: 2 layers")


GEMMA = {"model_type": "gemma", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
         "num_key_value_heads": 1, "head_dim": 8}


def test_a_second_rope_stack_of_the_sequence_is_refused_by_name():
    """π0.5's action expert rotates by positions that continue after the prefix's (the mask's running count, else
    the slot): a stack the survey does not run, named in a refusal, never a note beside an exact row."""
    config = {"model_type": "pi05", "chunk_size": 3, "max_action_dim": 4, "dit_config": GEMMA,
              "vlm_config": {"model_type": "paligemma", "text_config": {**GEMMA, "vocab_size": 64}}}
    assert "dit" in refpos.model_positions(config).stacks
    answer = adaptor.resolve(config)
    assert answer.refused is not None and answer.refused.startswith("dit stack: 2 RoPE layers")
    assert "mask_cumsum, else cache_position" in answer.refused
    assert {c.stack for c in answer.layers} == {"decoder"}
