"""Mutant: RoPE positions off by one — the rotation at position p uses p + 1
(docs/conventions.md#shapes-and-positions, docs/diagnosis.md:
``impl(x, p) = ref(x, p + 1)`` exactly; logits of q and k shifted together are unchanged).

Caught where a rotation is pinned to its position: ``R_0 = A·I``, the spec_tests/test_rope_vectors.py cos/sin and
apply vectors.
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "position_offset"))
