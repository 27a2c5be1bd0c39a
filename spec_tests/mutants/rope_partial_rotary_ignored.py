"""Mutant: partial rotary ignored — every channel of the head rotated with θ^(−2j/D) where a config rotates
d < D of them; the tail placement read as the head (docs/diagnosis.md#partial_rotary_placement; Phi-2 rotated
over all 80 channels)."""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "partial_rotary_placement"))
