"""Mutant: M-RoPE sections in the wrong order — ``mrope_section`` read as (w, h, t) pair counts
(docs/mrope.md#mistakes): with Qwen2-VL's [16, 24, 24], time gets 24 pairs and width 16.

Exact on text; for unequal sections the pairs of t and w move to other frequencies. Caught by the pinned
assignment of spec_tests/test_mrope.py.
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "mrope_section_order"))
