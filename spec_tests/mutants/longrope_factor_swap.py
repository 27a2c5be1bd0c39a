"""Mutant: LongRoPE's other factor set — the long factors where the length asks the short ones and the
reverse (docs/diagnosis.md#longrope_factor_swap)."""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "longrope_factor_swap"))
