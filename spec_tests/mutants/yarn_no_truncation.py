"""Mutant: YaRN without truncation — the correction range keeps its float bounds even when ``truncate``
is true (the default), i.e. no floor/ceil (docs/extrapolation.md#yarn, docs/extrapolation.md#where-the-anchors-differ;
docs/extrapolation.md#yarn).

Caught by the spec_tests/test_rope_vectors.py YaRN vectors (Qwen2.5 recipe: bounds (23, 40), ω'_63, ratios).
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "yarn_truncation"))
