"""What every ``refpos check`` target shares: the catalogue of known mistakes (:mod:`~refpos.check.shared.
catalogue`), the blockwise comparison (:mod:`~refpos.check.shared.stream`), the fit of a pair's frequency and
amplitude (:mod:`~refpos.check.shared.fit`), the arrays a check reads (:mod:`~refpos.check.shared.arrays`) and the
request a target is handed (:mod:`~refpos.check.shared.request`)."""
