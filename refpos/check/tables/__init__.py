"""``refpos check`` of the table encodings, one module per target: :mod:`~refpos.check.tables.alibi`,
:mod:`~refpos.check.tables.t5`, :mod:`~refpos.check.tables.deberta` (their buckets share
:mod:`~refpos.check.tables.buckets`), :mod:`~refpos.check.tables.sinusoid`, :mod:`~refpos.check.tables.learned`;
each holds its catalogue's mistakes, its blockwise comparison and the fit of what a candidate computed
(:mod:`~refpos.check.tables.common`: what they share)."""
