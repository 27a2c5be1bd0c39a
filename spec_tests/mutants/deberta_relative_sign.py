"""Mutant: DeBERTa's relative position taken as key − query (refpos's own sign) instead of query − key
(docs/deberta.md#deberta_relative_sign): c2p and p2c read the mirrored row ``b(j − i)``.

Caught by the logits formula and the row-index test of spec_tests/test_deberta.py.
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_deberta = module("refpos.encodings.deberta")
_reference = _deberta.deberta_relative_index


def _key_minus_query(q_positions, k_positions, **settings):
    return _reference(k_positions, q_positions, **settings).mT  # index of (j, i) read at (i, j): b(p_j − p_i)


globals().update(inherit_patched(__name__, "deberta_relative_sign",
                                 (_deberta, "deberta_relative_index", _key_minus_query)))
