"""Positions the survey sees where a model computes them outside the usual places, each exact where refpos is right
and a mismatch on a deliberately wrong claim:

* RoFormer rotates its query and key inline with a static method, by a sinusoid table it reads from an embedding:
  the rotation is compared at that method, and the table is the rotation's, not an encoding at the input;
* MPNet computes its bucketed bias once in the encoder, before its layers, and reads a learned table at
  ``p + 2``: both are compared (the bias as the table-owning layer's, the table as the stack's input);
* BigBird-Pegasus multiplies its encoder's query and key inline while its decoder calls the eager function: the
  encoder's layers are layers, and the block-sparse path the model switched away from is named;
* GIT's image encoder, where it runs beside the text stack, is not taken for the text stack.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

from survey import adaptor
from survey.claims import Resolution
from survey.compare import compare
from survey.observed import observed_kinds


def results(resolution: Resolution, probe) -> list:
    return compare(resolution, probe).layers


def test_roformer_rotation_is_compared_at_its_apply_method(observed):
    config, probe = observed("roformer")
    resolution = adaptor.resolve(config)
    found = results(resolution, probe)
    assert observed_kinds(probe) == ["rope"]
    assert found and {r.status for r in found} == {"exact"}, [r.cause for r in found if r.status != "exact"]
    assert all("rotary apply function" in r.cause for r in found)
    for layout in ("half", "deinterleaved"):
        wrong = [c if c.kind != "rope" else dataclasses.replace(c, rope=dataclasses.replace(c.rope, layout=layout))
                 for c in resolution.layers]
        assert "mismatch" in {r.status for r in results(Resolution(tuple(wrong)), probe)}, layout
    wrong = [dataclasses.replace(c, rope=dataclasses.replace(c.rope, theta=c.rope.theta * 1.001))
             for c in resolution.layers]
    assert "mismatch" in {r.status for r in results(Resolution(tuple(wrong)), probe)}


def test_mpnet_bias_of_the_stack_and_its_input_table(observed):
    config, probe = observed("mpnet")
    resolution = adaptor.resolve(config)
    assert [c.kind for c in resolution.layers if c.index < 0] == ["learned"]
    found = results(resolution, probe)
    assert {r.status for r in found} == {"exact"}, [r.cause for r in found if r.status != "exact"]
    table = next(c for c in resolution.layers if c.index < 0)
    off = dataclasses.replace(table, params={**table.params, "offset": table.params["offset"] + 1})
    wrong = Resolution(tuple(off if c is table else c for c in resolution.layers))
    assert any("p + 2" in r.cause for r in results(wrong, probe) if r.status == "mismatch")
    fewer = [dataclasses.replace(c, params={**c.params, "buckets": lambda q, k, f=c.params["buckets"]:
                                            np.minimum(np.asarray(f(q, k)), 30)}) if c.kind == "t5" else c
             for c in resolution.layers]
    assert "mismatch" in {r.status for r in results(Resolution(tuple(fewer)), probe)}
    assert "mismatch" in {r.status for r in results(Resolution(tuple(c for c in resolution.layers if c.index >= 0)),
                                                    probe)}  # the table left out


def test_bigbird_pegasus_encoder_attends_inline(observed):
    config, probe = observed("bigbird_pegasus")
    resolution = adaptor.resolve(config)
    found = results(resolution, probe)
    assert {r.status for r in found} == {"exact"}, [r.cause for r in found if r.status != "exact"]
    encoder = [r for r in found if r.stack == "encoder" and "inline" in r.cause]
    assert len(encoder) == len(resolution.stack("encoder"))
    assert all("block_sparse path is not compared" in r.cause for r in encoder)
    shifted = [c if c.stack != "encoder" else dataclasses.replace(c, params={**c.params, "offset": 1})
               for c in resolution.layers]
    assert "mismatch" in {r.status for r in results(Resolution(tuple(shifted)), probe)}


def test_a_tower_that_ran_is_not_taken_for_the_text_stack(observed):
    """GIT's text stack has 6 layers, its image encoder 8: with both seen, the text claims are matched to the
    text stack and the tower is named as what refpos's compared answer does not cover."""
    config, probe = observed("git")
    tower = {f"image_encoder.vision_model.encoder.layers.{i}.self_attn": "GitVisionAttention" for i in range(8)}
    both = dataclasses.replace(probe, module_types={**tower, **probe.module_types})
    found = results(adaptor.resolve(config), both)
    wrong = [r.cause for r in found if r.status == "mismatch"]
    assert wrong and all("image_encoder" in cause for cause in wrong), wrong
    assert {r.status for r in results(adaptor.resolve(config), probe)} == {"exact"}


def test_the_query_and_key_of_an_apply_function_are_found_by_name():
    torch = pytest.importorskip("torch", reason="the survey's runs need torch")
    from survey.probe import rotated

    def apply_rotary_position_embeddings(sinusoidal_pos, query_layer, key_layer, value_layer=None):
        return query_layer, key_layer

    table, q, k = torch.zeros(3, 4), torch.ones(1, 3, 4), torch.full((1, 3, 4), 2.0)
    (found_q, found_k), others = rotated(apply_rotary_position_embeddings, (table, q, k), {})
    assert found_q is q and found_k is k and others[0] is table

    def apply_rotary_emb(x, freqs):
        return x

    assert rotated(apply_rotary_emb, (q, table), {})[0][0] is q  # no query or key by name: the first tensors


def test_a_switched_attention_type_is_named():
    from survey.probe import switched

    before = {"encoder": "block_sparse", "encoder.layers.0": "block_sparse", "decoder": "original_full"}
    after = {"encoder": "original_full", "encoder.layers.0": "original_full", "decoder": "original_full"}
    notes = switched(before, after)
    assert len(notes) == 1 and notes[0].startswith("encoder switched attention_type block_sparse to original_full")
    assert switched(before, before) == []
