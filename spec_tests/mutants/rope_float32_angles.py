"""Mutant: float32 angles under a float64 claim — positions and ω cast to float32, ``p·ω``, cos and sin in
float32, while ``INFO["dtype"]`` still says float64 (docs/conventions.md#dtype-rules,
docs/diagnosis.md#float32_angles: error 0 at p = 0, growing like ``~0.5·p·2⁻²³``).

Correct float32 code is fine *when declared*; under a float64 claim the float64 tolerance rejects it
from position ≈ 1e3 on: caught by cos/sin at large positions (spec_tests/test_rope_vectors.py, p = 100000).
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_core = module("refpos.rope.core")


def _float32_pair_cos_sin(positions, inv_freq, factor):
    xp = _core.array_namespace(inv_freq)
    angles = xp.astype(positions, xp.float32)[..., None] * xp.astype(inv_freq, xp.float32)  # (..., T, m)
    cos = xp.astype(factor * xp.cos(angles), xp.float64)
    sin = xp.astype(factor * xp.sin(angles), xp.float64)
    return cos, sin


globals().update(inherit_patched(__name__, "float32_angles",
                                 (_core, "pair_cos_sin", _float32_pair_cos_sin)))
