"""``refpos check rope``: the comparison (:mod:`~refpos.check.rope.run`), the problem a diagnosis works on
(:mod:`~refpos.check.rope.problem`), the catalogue's RoPE and M-RoPE mistakes as definitions
(:mod:`~refpos.check.rope.mistakes`, :mod:`~refpos.check.rope.rope_mistakes`) and their matching
(:mod:`~refpos.check.rope.diagnosis`, :mod:`~refpos.check.rope.mrope`), what a candidate computed
(:mod:`~refpos.check.rope.identify` with its fits, readings and lines) and a RoPE golden case's diagnosis
(:mod:`~refpos.check.rope.golden_rope`)."""
