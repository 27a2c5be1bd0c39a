"""Mutant: RoPE positions off by one — the rotation at position p uses p + 1
(docs/conventions.md#shapes-and-positions, docs/diagnosis.md:
``impl(x, p) = ref(x, p + 1)`` exactly; logits of q and k shifted together are unchanged).

Caught where a rotation is pinned to its position: ``R_0 = A·I``, the spec_tests/test_rope_vectors.py cos/sin and
apply vectors.
"""

from __future__ import annotations

import numpy as np

from spec_tests.mutants._base import inherit

globals().update(inherit(__name__, "position_offset"))
_reference = dict(globals())


def _plus_one(positions):
    return np.asarray(positions) + 1


def rope_cos_sin(positions, rope, seq_len=None):
    return _reference["rope_cos_sin"](_plus_one(positions), rope, seq_len=seq_len)


def apply_rope(x, positions, rope, seq_len=None):
    return _reference["apply_rope"](x, _plus_one(positions), rope, seq_len=seq_len)


def apply_rope_complex(x, positions, rope, seq_len=None):
    return _reference["apply_rope_complex"](x, _plus_one(positions), rope, seq_len=seq_len)


def rope_rotation_matrix(position, rope, seq_len=None):
    return _reference["rope_rotation_matrix"](int(position) + 1, rope, seq_len=seq_len)


def rope_attention_logits(q, k, q_positions, k_positions, rope, seq_len=None):
    return _reference["rope_attention_logits"](q, k, _plus_one(q_positions), _plus_one(k_positions), rope,
                                               seq_len=seq_len)
