"""Mutant: the scaling rule parsed but never applied — plain RoPE frequencies and A = 1 for every scaled
rope_type (docs/diagnosis.md#unscaled_frequencies; e.g. dynamic NTK whose base never grows with L).

Caught by the scaled-config vectors of spec_tests/test_rope_vectors.py.
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "unscaled_frequencies"))
