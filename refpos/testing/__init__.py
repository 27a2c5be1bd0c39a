"""For test suites: Hypothesis strategies (:mod:`~refpos.testing.strategies`), the Hypothesis profiles
(:mod:`~refpos.testing.profiles`) and the reference adapter of the spec suite
(:mod:`~refpos.testing.adapter`)."""
