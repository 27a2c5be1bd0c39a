"""Mutant: the logit softcap applied before the scale (docs/conventions.md#scale-order, steps 3 and 5):
``scale·c·tanh(q·kᵀ/c)`` instead of ``c·tanh(scale·q·kᵀ/c)``, so the logits are capped at ``scale·c``
(Gemma-2, c = 50, d = 256: 3.1 instead of 50).

Without a softcap nothing changes; caught by the softcap test of spec_tests/test_attention.py.
"""

from __future__ import annotations

import math

import numpy as np

from spec_tests.mutants._base import inherit

globals().update(inherit(__name__, "softcap_before_scale"))
_reference = dict(globals())


def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None):
    if softcap is None:
        return _reference["attention"](q, k, v, bias=bias, mask=mask, scale=scale, causal=causal)
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_rep = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, n_rep, axis=-3), np.repeat(v, n_rep, axis=-3)  # (..., H, Tk, ·): head h reads h // n_rep
    c = float(softcap)
    s = (q.shape[-1] ** -0.5 if scale is None else scale) * c * np.tanh(q @ np.swapaxes(k, -1, -2) / c)
    if bias is not None:
        s = s + np.asarray(bias)
    allowed = np.ones(s.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), s.shape)
    if causal:
        t_q, t_k = s.shape[-2:]
        allowed = allowed & (np.arange(t_k)[None, :] <= np.arange(t_q)[:, None] + (t_k - t_q))
    s = np.where(allowed, s, -math.inf)
    return _reference["softmax"](s) @ v
