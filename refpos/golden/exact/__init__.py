"""What "exact" means for a golden output: the error a correct implementation in a dtype may show
(:mod:`~refpos.golden.exact.tolerance`, with the float32 forms of :mod:`~refpos.golden.exact.forms` and
:mod:`~refpos.golden.exact.emulations`), units in the last place (:mod:`~refpos.golden.exact.ulp`), the one
comparison (:mod:`~refpos.golden.exact.compare`), an output's tolerance entry per dtype
(:mod:`~refpos.golden.exact.entries`, :mod:`~refpos.golden.exact.angle_entries`), and the exact (mpmath)
recomputation that certifies every output (:mod:`~refpos.golden.exact.certify`)."""
