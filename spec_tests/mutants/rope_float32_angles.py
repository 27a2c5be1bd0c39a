"""Mutant: float32 angles under a float64 claim — positions and ω cast to float32, ``p·ω``, cos and sin in
float32, while ``INFO["dtype"]`` still says float64 (docs/conventions.md#dtype-rules,
docs/diagnosis.md#float32_angles: error 0 at p = 0, growing like ``~0.5·p·2⁻²³``).

Correct float32 code is fine *when declared*; under a float64 claim the float64 tolerance rejects it
from position ≈ 1e3 on: caught by cos/sin at large positions (spec_tests/test_rope_vectors.py, p = 100000).
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "float32_angles"))
