"""Mutant: the RoPE attention factor applied twice — cos and sin carry A² while ``rope_frequencies``
reports A (a port multiplying HF's final ``attention_factor`` by its own mscale; docs/extrapolation.md#yarn,
docs/diagnosis.md).

Caught by ``‖R_p x‖ = A‖x‖`` with the reported A, and by the spec_tests/test_rope_vectors.py apply/logit numbers for
YaRN.
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_core = module("refpos.rope.core")
_reference_pair_cos_sin = _core.pair_cos_sin


def _squared(positions, inv_freq, factor):
    return _reference_pair_cos_sin(positions, inv_freq, factor * factor)


globals().update(inherit_patched(__name__, "squared_attention_factor",
                                 (_core, "pair_cos_sin", _squared)))
