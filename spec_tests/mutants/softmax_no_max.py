"""Mutant: softmax without subtracting the row maximum (docs/conventions.md#dtype-rules;
docs/conventions.md#scale-order).

``exp(s) / Σ exp(s)`` equals the stable form in exact arithmetic but overflows: in float64 ``exp(710)``
is ``inf``, so a row with a logit ≥ 710 becomes ``inf/inf = NaN``. The attention core uses the same
broken softmax. Caught by: a huge-logit softmax test (logits 1e3).
"""

from __future__ import annotations

import importlib
import math

from refpos.backend import array_namespace
from spec_tests.mutants._base import inherit, patched

# refpos.attention is also the name of a function in refpos/__init__: fetch the module itself
attention_module = importlib.import_module("refpos.core.attention")

globals().update(inherit(__name__, "softmax_no_max"))


def _unstable_softmax(logits, *, axis=-1, mask=None, fully_masked="zeros", overwrite=False):
    xp = array_namespace(logits)
    if mask is not None:
        logits = xp.where(mask, logits, -math.inf)
    e = xp.exp(logits)  # the mistake: no  - max(logits)
    z = xp.sum(e, axis=axis, keepdims=True)
    if fully_masked == "zeros":
        return xp.where(z > 0, e / xp.where(z > 0, z, xp.ones_like(z)), xp.zeros_like(e))
    return e / z


def softmax(logits, mask=None, fully_masked="zeros"):
    import numpy as np

    from refpos.testing.adapter import _in, _out

    with np.errstate(over="ignore", invalid="ignore"):
        return _out(_unstable_softmax(_in(logits), mask=_in(mask), fully_masked=fully_masked))


def attention(*args, **kwargs):
    import numpy as np

    from refpos.testing import adapter

    with patched(attention_module, "softmax", _unstable_softmax), np.errstate(over="ignore", invalid="ignore"):
        return adapter.attention(*args, **kwargs)
