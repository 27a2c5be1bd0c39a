"""Mutant: GQA head mapping ``h % Hkv`` instead of ``h // n_rep`` (docs/diagnosis.md;
docs/conventions.md#gqa-head-mapping):
query head h reads the wrong key/value head whenever the two maps differ (8 q heads, 2 kv heads: heads
1, 3, 4, 6 wrong).

MHA (``Hkv = H``) and MQA (``Hkv = 1``) are unaffected; caught by the head-mapping test.
"""

from __future__ import annotations

import numpy as np

from spec_tests.mutants._base import inherit

globals().update(inherit(__name__, "gqa_head_mapping"))
_reference = dict(globals())


def _tiled(x, n_heads):
    x = np.asarray(x)
    return np.tile(x, (1,) * (x.ndim - 3) + (n_heads // x.shape[-3], 1, 1))  # (..., H, T, d): head h -> h % Hkv


def attention(q, k, v, *args, **kwargs):
    h = np.shape(q)[-3]
    return _reference["attention"](q, _tiled(k, h), _tiled(v, h), *args, **kwargs)


def chunked_attention(q, k, v, *args, **kwargs):
    h = np.shape(q)[-3]
    return _reference["chunked_attention"](q, _tiled(k, h), _tiled(v, h), *args, **kwargs)
