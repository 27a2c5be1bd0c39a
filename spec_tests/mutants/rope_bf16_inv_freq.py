"""Mutant: inv_freq rounded to bfloat16 — the buffer downcast by ``model.to(bfloat16)``
(docs/diagnosis.md#bf16_angles): O(1) phase errors by p ≈ 1000."""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "bf16_angles"))
