"""``refpos check``: compare a candidate with the reference and name the known mistake it matches.

:mod:`~refpos.check.catalogue` is the one catalogue of known mistakes (ids shared with the spec suite's
mutants), :mod:`~refpos.check.run` compares (:mod:`~refpos.check.case` a golden case's output),
:mod:`~refpos.check.diagnosis` holds the RoPE mistakes and the matching machinery, :mod:`~refpos.check.tables`
the mistakes of the table encodings (ALiBi, T5, DeBERTa buckets, sinusoids).
"""

from refpos.check.case import check_case
from refpos.check.run import check_alibi, check_deberta, check_rope, check_sinusoid, check_t5

__all__ = ["check_alibi", "check_case", "check_deberta", "check_rope", "check_sinusoid", "check_t5"]
