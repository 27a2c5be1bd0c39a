"""Mutant: Shaw relative positions without their sign — the table row of ``|j − i|`` instead of
``j − i`` (docs/relative.md#shaw: Shaw is sign-aware; §1.7.3: sign-blind biases cannot tell a sequence from
its reverse).

Caught by the paper-formula comparison and the sign-awareness test.
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_relative = module("refpos.encodings.shaw")
_reference_index = _relative.shaw_index


def _sign_blind_index(q_positions, k_positions, max_relative_position):
    xp = _relative.array_namespace(q_positions)
    k = max_relative_position
    rel = xp.abs(_relative.relative_positions(q_positions, k_positions))  # the mistake: |j - i|
    return xp.clip(rel, -k, k) + k


globals().update(inherit_patched(__name__, "shaw_sign_blind",
                                 (_relative, "shaw_index", _sign_blind_index)))
