"""A model that takes no position ids, whose rotary tables run B could not replace (ColPali: its first token sits
at position 1), is compared against run D, the same tokens SHIFT places later (survey.rotation.predict_shifted):
turning run D's query back by SHIFT positions gives the call's, for any start of the positions; a wrong base,
direction or layout is over the bound. The slot-plus-one source and its mutant (survey.sources, survey.mutants).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.rope.config import RopeConfig
from survey import mutants
from survey.claims import LayerClaim, Resolution
from survey.probe import Call
from survey.rotation import predict_shifted
from survey.sources import Inputs


def _claim(rope: RopeConfig, reads=None) -> LayerClaim:
    return LayerClaim("decoder", 0, "rope", rope=rope, reads=reads or {"rotation": ("slot_plus_one",)})


@pytest.mark.parametrize("layout", ["half", "interleaved", "deinterleaved"])
@pytest.mark.parametrize("sign", [1, -1])
def test_run_d_turned_back_is_the_call(layout, sign):
    rope = RopeConfig(head_dim=16, theta=500.0, layout=layout, angle_sign=sign, rope_type="yarn", factor=2.0,
                      original_max_position_embeddings=64)
    q0, k0 = np.random.default_rng(1).standard_normal((2, 1, 2, 8, 16))
    p, shift = np.arange(8) + 1, 3
    call = Call("x", None, refpos.to_numpy(refpos.apply_rope(q0, p, rope, seq_len=64)),
                refpos.to_numpy(refpos.apply_rope(k0, p, rope, seq_len=64)), None, {}, None)
    later = Call("x", None, refpos.to_numpy(refpos.apply_rope(q0, p + shift, rope, seq_len=64)),
                 refpos.to_numpy(refpos.apply_rope(k0, p + shift, rope, seq_len=64)), None, {}, None)
    q, k, bound_q, bound_k = predict_shifted(_claim(rope), later, p, shift)
    assert np.all(np.abs(q - call.query) <= bound_q) and np.all(np.abs(k - call.key) <= bound_k)
    for wrong in (dict(theta=550.0), dict(angle_sign=-sign)):
        q, _, bound_q, _ = predict_shifted(_claim(dataclasses.replace(rope, **wrong)), later, p, shift)
        assert np.any(np.abs(q - call.query) > bound_q)


def test_the_slot_plus_one_is_read_and_its_mutant_reads_the_slot():
    inputs = Inputs(None, np.arange(5), None, 5)
    assert inputs.read(("slot_plus_one",)).tolist() == [1, 2, 3, 4, 5]
    assert inputs.read(("position_ids", "slot_plus_one")).tolist() == [1, 2, 3, 4, 5]  # none passed: 1-indexed
    assert inputs.read(("position_ids", "cache_position")).tolist() == [0, 1, 2, 3, 4]
    assert Inputs(np.arange(5) + 9, np.arange(5), None, 5).read(("position_ids", "slot_plus_one")).tolist() == [
        9, 10, 11, 12, 13]
    claim = _claim(RopeConfig(head_dim=8), {"rotation": ("position_ids", "slot_plus_one")})
    named = dict(mutants.mutants(Resolution((claim,))))
    zero = named["rotation reads the slot for the slot plus one"]
    assert zero.layers[0].source("rotation") == ("position_ids", "cache_position")
    assert mutants.differs(Resolution((claim,)), zero)
    llama = Resolution((_claim(RopeConfig(head_dim=8), {"rotation": ("position_ids", "cache_position")}),))
    assert "rotation reads the slot for the slot plus one" not in dict(mutants.mutants(llama))
