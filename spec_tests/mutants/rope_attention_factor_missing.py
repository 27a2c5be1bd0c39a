"""Mutant: the RoPE attention factor A dropped — A = 1 for YaRN and LongRoPE (docs/anchors.md#hf-config-resolution,
docs/extrapolation.md#yarn, docs/diagnosis.md:
rotated q and k are the reference divided by A; logits × 1/A²).

Caught by the A values of spec_tests/test_rope_vectors.py (Qwen2.5 YaRN 1.138629…, Phi-3.5 LongRoPE 1.190238…).
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "missing_attention_factor"))
