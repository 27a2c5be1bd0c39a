"""Mutant: xPos with the key *multiplied* by ``ζ^{(n−c)/γ}`` like the query instead of divided
(docs/other-encodings.md#xpos): the score then carries ``ζ^{(m+n−2c)/γ}``, which depends on the absolute positions,
not only on ``m − n``.

Caught by the xPos formula and translation-invariance tests.
"""

from __future__ import annotations

import numpy as np

from spec_tests.mutants._base import inherit

globals().update(inherit(__name__, "xpos_key_scale_sign"))
_reference = dict(globals())


def xpos(q, k, q_positions, k_positions, base=10000.0, scale_base=512.0):
    q_rot, k_rot = _reference["xpos"](q, k, q_positions, k_positions, base=base, scale_base=scale_base)
    d = np.shape(k)[-1]
    zeta = np.repeat((np.arange(0, d, 2) + 0.4 * d) / (1.4 * d), 2)  # (d,): one ζ per interleaved pair
    exponent = (np.asarray(k_positions, dtype=np.float64) - len(k_positions) // 2) / scale_base  # (T,)
    return q_rot, k_rot * zeta ** (2.0 * exponent[:, None])  # ζ^(-e) · ζ^(2e) = ζ^(+e)
