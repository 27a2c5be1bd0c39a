"""Mutant: YaRN without truncation — the correction range keeps its float bounds even when ``truncate``
is true (the default), i.e. no floor/ceil (docs/extrapolation.md#yarn, docs/extrapolation.md#where-the-anchors-differ;
docs/extrapolation.md#yarn).

Caught by the spec_tests/test_rope_vectors.py YaRN vectors (Qwen2.5 recipe: bounds (23, 40), ω'_63, ratios).
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_scaling = module("refpos.rope.scaling")


def _untruncated_range(rope):
    lo, hi = _scaling.yarn_pair_at(rope.beta_fast, rope), _scaling.yarn_pair_at(rope.beta_slow, rope)
    return max(lo, 0), min(hi, rope.rotary_dim - 1)


globals().update(inherit_patched(__name__, "yarn_truncation",
                                 (_scaling, "yarn_correction_range", _untruncated_range)))
