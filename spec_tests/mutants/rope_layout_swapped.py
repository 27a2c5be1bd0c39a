"""Mutant: RoPE layout swapped — half-split (NeoX) pairs where interleaved (GPT-J) pairs are asked, and
back (docs/conventions.md#pair-layouts, docs/diagnosis.md: ``impl(x, p) = Pᵀ·ref(P·x, p)``; exact at p = 0).

Norms, relative invariance and composition still hold: only tests that pin the layout (spec_tests/test_rope_vectors.py
vectors, the Meta ↔ HF permutation) can see it.
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "layout_swap"))
