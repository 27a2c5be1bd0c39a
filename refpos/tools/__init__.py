"""Tools around the reference: ``refpos bench`` (:mod:`~refpos.tools.bench`) and its measuring
(:mod:`~refpos.tools.measure`), and the documentation's figures (:mod:`~refpos.tools.plots`)."""
