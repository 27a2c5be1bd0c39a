"""Mutant: M-RoPE with 1-D positions for image tokens — every pair reads the temporal row, as if the
positions were plain RoPE's (docs/mrope.md#mistakes: ``φ_j = p_t·ω_j`` for every ``j``).

Exact on text (t = h = w); wrong on every image patch off its grid's first row and column. Caught where a
pair is pinned to its axis: moving h or w must change their pairs (spec_tests/test_mrope.py).
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "mrope_1d_positions"))
