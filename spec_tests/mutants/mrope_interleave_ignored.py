"""Mutant: interleaved vs contiguous — Qwen3-VL's round-robin assignment (``mrope_interleaved``) replaced
by Qwen2-VL's contiguous bands (docs/mrope.md#mistakes).

The sections' pair counts are right, only which frequencies each axis reads is wrong; exact on text.
Caught by the pinned assignment of spec_tests/test_mrope.py.
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_mrope = module("refpos.rope.mrope")
_pair_axes = _mrope.pair_axes

globals().update(inherit_patched(__name__, "mrope_assignment",
                                 (_mrope, "pair_axes", lambda sections, interleaved: _pair_axes(sections, False))))
