"""Mutant: T5 relative position with the sign flipped — ``query − memory`` instead of ``memory − query``
(docs/relative.md#t5, docs/diagnosis.md: the bidirectional bias is the transpose of the reference; causal: every past
key
in bucket 0).

Caught by the bucket tables of docs/relative.md#t5 and the bias sign convention.
"""

from __future__ import annotations

import numpy as np

from spec_tests.mutants._base import inherit_patched, module

_t5 = module("refpos.encodings.t5")
_reference_bucket = _t5.t5_bucket


def _flipped(rel, **kwargs):
    return _reference_bucket(-rel, **kwargs)


globals().update(inherit_patched(__name__, "t5_sign_flip",
                                 (_t5, "t5_bucket", _flipped)))
_reference_adapter_bucket = globals()["t5_bucket"]


def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    return _reference_adapter_bucket(-np.asarray(relative_position), bidirectional=bidirectional,
                                     num_buckets=num_buckets, max_distance=max_distance)
