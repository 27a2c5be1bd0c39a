"""``refpos check``: compare a candidate with the reference and name the known mistake it matches.

The targets are records of one registry (:mod:`~refpos.check.targets`), each with its package:

* :mod:`~refpos.check.rope` — RoPE and M-RoPE: the comparison, the catalogue's RoPE mistakes and their matching
  (:mod:`~refpos.check.rope.diagnosis`), the fit of what a candidate computed (:mod:`~refpos.check.rope.identify`);
* :mod:`~refpos.check.tables` — ALiBi, T5, DeBERTa, the sinusoid and learned tables, one module each;
* :mod:`~refpos.check.kinds` — the vision and audio kinds, one target per kind from its formula module;
* :mod:`~refpos.check.case` — a golden case's output (``refpos check CASE``);
* :mod:`~refpos.check.shared` — what every target shares: the one catalogue of known mistakes (ids shared with
  the spec suite's mutants), the blockwise comparison, the pair fit, the request a target is handed.
"""

from refpos.check.case import check_case
from refpos.check.kinds import check_kind
from refpos.check.rope.run import check_rope
from refpos.check.tables.alibi import check_alibi
from refpos.check.tables.deberta import check_deberta
from refpos.check.tables.sinusoid import check_sinusoid
from refpos.check.tables.t5 import check_t5

__all__ = ["check_alibi", "check_case", "check_deberta", "check_kind", "check_rope", "check_sinusoid", "check_t5"]
