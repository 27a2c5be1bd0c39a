"""Mutant: the frequency scaling applied twice — ω'²/ω for every scaled rope_type
(docs/diagnosis.md#double_scaled_frequencies; positions divided by s and inv_freq divided by s)."""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "double_scaled_frequencies"))
