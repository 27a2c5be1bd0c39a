"""Positional encodings other than RoPE, one module per family.

Absolute (added to the input embeddings): :mod:`~refpos.encodings.sinusoidal`,
:mod:`~refpos.encodings.learned`. Relative terms and additive biases: :mod:`~refpos.encodings.distance`
(the distance bias of the worked example), :mod:`~refpos.encodings.shaw`, :mod:`~refpos.encodings.txl`,
:mod:`~refpos.encodings.t5`, :mod:`~refpos.encodings.alibi`, :mod:`~refpos.encodings.kerple`,
:mod:`~refpos.encodings.fire`, :mod:`~refpos.encodings.sandwich`, :mod:`~refpos.encodings.deberta` (DeBERTa's
disentangled c2p and p2c terms), :mod:`~refpos.encodings.bias_table` (window bias tables: Swin, Swin v2, BEiT).
Convolutional, for speech encoders: :mod:`~refpos.encodings.conv_position`. On the queries and keys:
:mod:`~refpos.encodings.xpos`. Contextual: :mod:`~refpos.encodings.cope`. RoPE has its own package,
:mod:`refpos.rope`.

``__all__`` is this package's public API: every encoding's class and functions (and :class:`NoPE`, the
encoding that adds nothing). Two functions share their module's name and stay in their module, so that
the module is never hidden: ``refpos.encodings.sinusoidal.sinusoidal`` and ``refpos.encodings.xpos.xpos``.
"""

from refpos.encoding import NoPE
from refpos.encodings.alibi import ALiBi, alibi_bias, alibi_bias_from_positions, alibi_slopes
from refpos.encodings.bias_table import WindowBias, beit_bias, swin_bias, swinv2_bias, window_bias
from refpos.encodings.bias_table_index import beit_relative_index, swin_relative_index
from refpos.encodings.conv_position import (
    add_conv_positions,
    conv_position_embedding,
    stacked_conv_position_embedding,
    weight_norm,
)
from refpos.encodings.cope import CoPE, cope_gates, cope_logits, cope_position_logits, cope_positions
from refpos.encodings.deberta import (
    DeBERTa,
    deberta_attention_logits,
    deberta_attention_span,
    deberta_c2p_terms,
    deberta_log_buckets,
    deberta_p2c_terms,
    deberta_pos_att_type,
    deberta_position_projection,
    deberta_relative_index,
    deberta_softmax_scale,
)
from refpos.encodings.distance import DistanceBias, distance_bias, relative_positions
from refpos.encodings.fire import FIRE, fire_bias, fire_features
from refpos.encodings.kerple import KERPLE, kerple_bias
from refpos.encodings.learned import LearnedAbsolute, learned_lookup
from refpos.encodings.sandwich import Sandwich, sandwich_bias
from refpos.encodings.shaw import Shaw, shaw_index, shaw_key_terms, shaw_value_terms, skew, unskew
from refpos.encodings.sinusoidal import (
    Sinusoidal,
    interleaved_to_concat_permutation,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)
from refpos.encodings.t5 import T5, t5_bias, t5_bucket
from refpos.encodings.txl import TransformerXL, txl_position_scores, txl_position_table, txl_rel_shift, txl_scores
from refpos.encodings.xpos import XPos, xpos_decay

__all__ = [
    "FIRE",
    "KERPLE",
    "T5",
    "ALiBi",
    "CoPE",
    "DeBERTa",
    "DistanceBias",
    "LearnedAbsolute",
    "NoPE",
    "Sandwich",
    "Shaw",
    "Sinusoidal",
    "TransformerXL",
    "WindowBias",
    "XPos",
    "add_conv_positions",
    "alibi_bias",
    "alibi_bias_from_positions",
    "alibi_slopes",
    "beit_bias",
    "beit_relative_index",
    "conv_position_embedding",
    "cope_gates",
    "cope_logits",
    "cope_position_logits",
    "cope_positions",
    "deberta_attention_logits",
    "deberta_attention_span",
    "deberta_c2p_terms",
    "deberta_log_buckets",
    "deberta_p2c_terms",
    "deberta_pos_att_type",
    "deberta_position_projection",
    "deberta_relative_index",
    "deberta_softmax_scale",
    "distance_bias",
    "fire_bias",
    "fire_features",
    "interleaved_to_concat_permutation",
    "kerple_bias",
    "learned_lookup",
    "relative_positions",
    "sandwich_bias",
    "shaw_index",
    "shaw_key_terms",
    "shaw_value_terms",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
    "skew",
    "stacked_conv_position_embedding",
    "swin_bias",
    "swin_relative_index",
    "swinv2_bias",
    "t5_bias",
    "t5_bucket",
    "txl_position_scores",
    "txl_position_table",
    "txl_rel_shift",
    "txl_scores",
    "unskew",
    "weight_norm",
    "window_bias",
    "xpos_decay",
]

