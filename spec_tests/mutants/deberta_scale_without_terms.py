"""Mutant: DeBERTa's logits scaled by ``1/√d`` instead of ``1/√(d·(1 + n))`` — the number of position terms
left out of the scale (docs/deberta.md#deberta_scale_factor): logits √3 too large with c2p and p2c.

Caught by the scale test and the logits formula of spec_tests/test_deberta.py.
"""

from __future__ import annotations

import math

from spec_tests.mutants._base import inherit_patched, module

_deberta = module("refpos.encodings.deberta")

globals().update(inherit_patched(__name__, "deberta_scale_factor",
                                 (_deberta, "deberta_softmax_scale", lambda head_dim, pos_att_type:
                                  1.0 / math.sqrt(head_dim))))
