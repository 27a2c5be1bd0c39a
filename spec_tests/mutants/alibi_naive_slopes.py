"""Mutant: naive closed-form ALiBi slopes ``2^(-8h/n)`` for every head count (docs/alibi.md#where-the-anchors-differ,
docs/diagnosis.md;
ml-explore/mlx#343) — right for powers of two, wrong otherwise (n = 12: first slope 2^(-2/3) = 0.630
instead of 0.5).

The exact closed form of the recurrence (``2^(-8(h+1)/c)`` per power-of-two group) is *not* a mistake:
it differs from the recurrence by at most 38 ulps up to n = 112, inside the float64 tolerance.
Caught by the slope values for n = 3, 6, 12 (docs/alibi.md#the-math).
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_alibi = module("refpos.encodings.alibi")


def _naive_slopes(n_heads):
    return [2.0 ** (-8.0 * h / n_heads) for h in range(1, n_heads + 1)]


globals().update(inherit_patched(__name__, "alibi_closed_form_slopes",
                                 (_alibi, "_slopes_list", _naive_slopes)))
