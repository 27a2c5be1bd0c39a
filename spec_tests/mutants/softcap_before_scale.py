"""Mutant: the logit softcap applied before the scale (docs/conventions.md#scale-order, steps 3 and 5):
``scale·c·tanh(q·kᵀ/c)`` instead of ``c·tanh(scale·q·kᵀ/c)``, so the logits are capped at ``scale·c``
(Gemma-2, c = 50, d = 256: 3.1 instead of 50).

Since ``scale·c·tanh(q·kᵀ/c) = c'·tanh(scale·q·kᵀ/c')`` with ``c' = scale·c``, the mistake is the
reference with its cap multiplied by the scale. Without a softcap nothing changes; caught by the softcap
test of spec_tests/test_attention.py.
"""

from __future__ import annotations

import numpy as np

from spec_tests.mutants._base import inherit

globals().update(inherit(__name__, "softcap_before_scale"))
_reference = dict(globals())


def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None):
    s = np.shape(q)[-1] ** -0.5 if scale is None else scale
    return _reference["attention"](q, k, v, bias=bias, mask=mask, scale=scale, causal=causal,
                                   softcap=None if softcap is None else softcap * s)
