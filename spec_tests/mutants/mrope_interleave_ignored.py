"""Mutant: interleaved vs contiguous — Qwen3-VL's round-robin assignment (``mrope_interleaved``) replaced
by Qwen2-VL's contiguous bands (docs/mrope.md#mistakes).

The sections' pair counts are right, only which frequencies each axis reads is wrong; exact on text.
Caught by the pinned assignment of spec_tests/test_mrope.py.
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "mrope_assignment"))
