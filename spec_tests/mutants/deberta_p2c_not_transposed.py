"""Mutant: DeBERTa's p2c term read at the transposed index — key j takes the row of ``j − i`` (``K Q_rᵀ``
gathered at the c2p index instead of its negative before the transposition back) instead of the row of
``i − j`` (docs/deberta.md#deberta_p2c_not_transposed). c2p stays right.

Caught by the logits formula and the row-index test of spec_tests/test_deberta.py.
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_deberta = module("refpos.encodings.deberta")
_reference = _deberta.deberta_p2c_terms


def _transposed(k, pos_query, index, *, form="gather"):
    return _reference(k, pos_query, _deberta.array_namespace(index).matrix_transpose(index), form=form)


globals().update(inherit_patched(__name__, "deberta_p2c_not_transposed",
                                 (_deberta, "deberta_p2c_terms", _transposed)))
