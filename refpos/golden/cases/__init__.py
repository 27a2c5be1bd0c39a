"""The builders of the committed golden cases, one module per case family (or per group of small ones), each
listed in the registry (:mod:`refpos.golden.registry`) with its id prefix and the kinds it covers:

* text tables and other encodings: :mod:`~refpos.golden.cases.tables` (sinusoid, ALiBi, T5),
  :mod:`~refpos.golden.cases.relative` (Shaw, Transformer-XL, KERPLE, FIRE, xPos, Sandwich, CoPE, the distance
  bias, learned rows), :mod:`~refpos.golden.cases.deberta`;
* RoPE: :mod:`~refpos.golden.cases.rope` (real models' RoPE, layouts, boundaries; a config's case set for
  ``refpos golden model``), :mod:`~refpos.golden.cases.mrope`, :mod:`~refpos.golden.cases.rope_builders`,
  :mod:`~refpos.golden.cases.models` (the non-RoPE layers of a model), :mod:`~refpos.golden.cases.layers`
  (vision RoPE, local attention, query scales);
* attention and the worked example: :mod:`~refpos.golden.cases.scenarios`;
* the vision and audio kinds: :mod:`~refpos.golden.cases.bias_table`, :mod:`~refpos.golden.cases.conv_position`,
  :mod:`~refpos.golden.cases.grid` (with :mod:`~refpos.golden.cases.grid_exact`, the exact resampling),
  :mod:`~refpos.golden.cases.decomposed`, :mod:`~refpos.golden.cases.sincos2d`, :mod:`~refpos.golden.cases.fourier`,
  :mod:`~refpos.golden.cases.sinusoid1d`, :mod:`~refpos.golden.cases.axis_tables`,
  :mod:`~refpos.golden.cases.tiled_grid`, :mod:`~refpos.golden.cases.box_tables`,
  :mod:`~refpos.golden.cases.shaw_key`; a config's vision and audio
  layers for ``refpos golden model``:
  :mod:`~refpos.golden.cases.model_kinds` (the registry of a record's contract call),
  :mod:`~refpos.golden.cases.model_kind_references`, :mod:`~refpos.golden.cases.model_kind_inputs`,
  :mod:`~refpos.golden.cases.model_kind_cases`;
* :mod:`~refpos.golden.cases.common` — what every builder shares (seeded inputs, the ``call`` entry).
"""
