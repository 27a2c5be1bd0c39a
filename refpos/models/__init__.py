"""What a model's config.json says about positions: the family table and the config reader.

* :mod:`refpos.models.positions` — :func:`model_positions`: every layer of every stack, whatever its encoding,
  as typed records (:mod:`refpos.models.records`).
* :mod:`refpos.models.kinds` — the encoding kinds, one record each (:data:`~refpos.models.kinds.KINDS`): the
  facts a family row states, the builder of a stack's layers, the layer record, and the pieces outside this
  package that belong to the kind (check target, goldens, contract, docs).
* :mod:`refpos.models.view` — :class:`~refpos.models.view.ConfigView`: a config read once, every key read
  recorded.
* :mod:`refpos.models.hf_files` — reading a config.json, its language model's config, its rope dict and
  layer types.
* :mod:`refpos.models.families` — the family table (:func:`family_of`): what a model's code fixes; which kind
  each stack has is :mod:`refpos.models.facts`.
* :mod:`refpos.models.query_scales` — the query-scale rules (Llama 4's temperature, ``llama_4_scaling_beta``).
* :mod:`refpos.models.hf` — :func:`from_hf_config`: a config's RoPE as a :class:`~refpos.RopeConfig`.
* :mod:`refpos.models.layers` — :func:`hf_layers`: every decoder layer's RoPE and query scale.
* :mod:`refpos.models.position_keys` — the config keys that change positions or attention.
* :mod:`refpos.models.mrope_hf` — M-RoPE and vision RoPE from a config.
* :mod:`refpos.models.mm_positions` — M-RoPE position ids of a multimodal token sequence.
"""

from refpos.models.families import Family, UnknownFamilyWarning, family_of
from refpos.models.hf import from_hf_config, hf_layer_types
from refpos.models.layers import HFLayer, LayerSchedule, hf_layer, hf_layers
from refpos.models.positions import ModelPositions, model_positions
from refpos.models.schedule import LayerCountMissing

__all__ = [
    "Family",
    "HFLayer",
    "LayerCountMissing",
    "LayerSchedule",
    "ModelPositions",
    "UnknownFamilyWarning",
    "family_of",
    "from_hf_config",
    "hf_layer",
    "hf_layer_types",
    "hf_layers",
    "model_positions",
]
