"""Mutant: M-RoPE sections in the wrong order — ``mrope_section`` read as (w, h, t) pair counts
(docs/mrope.md#mistakes): with Qwen2-VL's [16, 24, 24], time gets 24 pairs and width 16.

Exact on text; for unequal sections the pairs of t and w move to other frequencies. Caught by the pinned
assignment of spec_tests/test_mrope.py.
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_mrope = module("refpos.rope.mrope")
_pair_axes = _mrope.pair_axes


def _reversed(sections, interleaved):
    s_t, s_h, s_w = sections
    return _pair_axes((s_w, s_h, s_t), False) if not interleaved else _pair_axes(sections, interleaved)


globals().update(inherit_patched(__name__, "mrope_section_order",
                                 (_mrope, "pair_axes", _reversed)))
