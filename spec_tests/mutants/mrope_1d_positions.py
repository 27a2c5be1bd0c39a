"""Mutant: M-RoPE with 1-D positions for image tokens — every pair reads the temporal row, as if the
positions were plain RoPE's (docs/mrope.md#mistakes: ``φ_j = p_t·ω_j`` for every ``j``).

Exact on text (t = h = w); wrong on every image patch off its grid's first row and column. Caught where a
pair is pinned to its axis: moving h or w must change their pairs (spec_tests/test_mrope.py).
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_core = module("refpos.rope.core")
_mrope = module("refpos.rope.mrope")


def _temporal_only(positions, inv_freq, sections, *, interleaved):
    xp = _mrope.array_namespace(inv_freq)
    return xp.astype(positions[0, ...], xp.float64)[..., None] * inv_freq  # (..., T, m): p_t for all pairs


globals().update(inherit_patched(__name__, "mrope_1d_positions",
                                 (_core, "mrope_angles", _temporal_only),  # apply_rope_complex
                                 (_mrope, "mrope_angles", _temporal_only)))  # the tables of every other path
