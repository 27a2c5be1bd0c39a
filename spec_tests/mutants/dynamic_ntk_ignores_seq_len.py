"""Mutant: dynamic NTK ignoring the sequence length — θ' computed as if L ≤ L_max, i.e. plain RoPE at
every length (docs/extrapolation.md#dynamic-ntk; docs/extrapolation.md#dynamic-ntk, spec_tests/test_rope_vectors.py).

Caught by the spec_tests/test_rope_vectors.py table (L = 8192: θ' = 30527.74, ω_1 = 0.85099…).
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_scaling = module("refpos.rope.scaling")
_reference_dynamic_theta = _scaling.dynamic_theta



def _length_blind_theta(rope, seq_len):
    return _reference_dynamic_theta(rope, None)  # the mistake: L never enters


globals().update(inherit_patched(__name__, "unscaled_frequencies",
                                 (_scaling, "dynamic_theta", _length_blind_theta)))
