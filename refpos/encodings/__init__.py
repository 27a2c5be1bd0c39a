"""Positional encodings other than RoPE, one module per family.

Absolute (added to the input embeddings): :mod:`~refpos.encodings.sinusoidal`,
:mod:`~refpos.encodings.learned`. Relative terms and additive biases: :mod:`~refpos.encodings.distance`
(the distance bias of the worked example), :mod:`~refpos.encodings.shaw`, :mod:`~refpos.encodings.txl`,
:mod:`~refpos.encodings.t5`, :mod:`~refpos.encodings.alibi`, :mod:`~refpos.encodings.kerple`,
:mod:`~refpos.encodings.fire`, :mod:`~refpos.encodings.sandwich`, :mod:`~refpos.encodings.deberta` (DeBERTa's
disentangled c2p and p2c terms). On the queries and keys:
:mod:`~refpos.encodings.xpos`. Contextual: :mod:`~refpos.encodings.cope`. RoPE has its own package,
:mod:`refpos.rope`. Nothing is re-exported here; the front door :mod:`refpos` exports the public names.
"""
