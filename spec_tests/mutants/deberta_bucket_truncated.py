"""Mutant: DeBERTa's log bucket with its log part truncated (T5's rule) instead of rounded up
(docs/deberta.md#deberta_bucket_rounding): every far bucket one closer to zero, ``b(mid + 1) = mid``.

Caught by the bucket formula and the bucket table of spec_tests/test_deberta.py, and by the logits through the
index.
"""

from __future__ import annotations

import numpy as np

from refpos.backend import array_namespace, to_numpy
from refpos.check.tables.deberta import truncated_deberta_buckets
from spec_tests.mutants._base import inherit_patched, module

_deberta = module("refpos.encodings.deberta")
_reference = _deberta.deberta_log_buckets


def _truncated(relative, position_buckets, max_relative_positions):
    xp = array_namespace(_reference(relative, position_buckets, max_relative_positions))  # the argument checks
    delta = np.asarray(to_numpy(relative), dtype=np.int64)
    return xp.asarray(truncated_deberta_buckets(delta, position_buckets, max_relative_positions))


globals().update(inherit_patched(__name__, "deberta_bucket_rounding", (_deberta, "deberta_log_buckets", _truncated)))


def deberta_log_buckets(relative, position_buckets, max_relative_positions):
    return np.asarray(to_numpy(_truncated(np.asarray(relative), position_buckets, max_relative_positions)))
