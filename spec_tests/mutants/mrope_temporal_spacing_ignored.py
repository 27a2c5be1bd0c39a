"""Mutant: the temporal spacing of Qwen2.5-VL videos ignored — temporal ids 0, 1, 2, … instead of
``⌊i·tokens_per_second·seconds_per_grid⌋`` (docs/mrope.md#mistakes).

Images and the other families are unchanged. Caught by the position-id tests of spec_tests/test_mrope.py.
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_ids = module("refpos.models.mm_positions")
_temporal_times = _ids._temporal_times

globals().update(inherit_patched(__name__, "mrope_temporal_spacing_ignored",
                                 (_ids, "_temporal_times", lambda n_t, spacing: _temporal_times(n_t, 1.0))))
