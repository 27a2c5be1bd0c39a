"""refpos: a float64 reference and spec test suite for Transformer positional encodings.

Every encoding plugs into one attention pipeline (:func:`self_attention`) through the hooks of
:class:`Encoding`; every function that takes arrays works on NumPy, CuPy and array-api-strict arrays
(:mod:`refpos.backend`).

Public API
----------
What ``refpos.__all__`` lists is the public API: those names keep their meaning and signature. Three
subpackages are public as modules, for what they are for: :mod:`refpos.check` (``check_*`` functions),
:mod:`refpos.golden` (tolerances, the manifest, generate and verify) and :mod:`refpos.testing`
(Hypothesis strategies, the reference adapter). Everything else (the modules of ``refpos.core``,
``refpos.encodings``, ``refpos.rope``, ``refpos.models``, ``refpos.pipeline``, ``refpos.tools``,
``refpos.cli``, and any name that starts with ``_``) is importable and documented, but internal: it may
move between releases.

The layers, each importing only from those before it: :mod:`refpos.backend`, :mod:`refpos.validation`,
:mod:`refpos.parallel`, :mod:`refpos.encoding` → :mod:`refpos.core` (attention), :mod:`refpos.encodings`,
:mod:`refpos.rope` → :mod:`refpos.models` (a model's config.json) → :mod:`refpos.pipeline` →
:mod:`refpos.golden` → :mod:`refpos.check` → :mod:`refpos.testing`, :mod:`refpos.tools` → :mod:`refpos.cli`
(the only code that parses arguments or prints).
"""

from refpos.backend import BACKENDS, array_namespace, backend_name, get_xp, set_backend, to_numpy, use_backend
from refpos.core.attention import attention
from refpos.core.chunked import chunked_attention
from refpos.core.heads import merge_heads, repeat_kv, split_heads
from refpos.core.softmax import causal_mask, chunked_causal_mask, sliding_window_mask, softmax
from refpos.encoding import Encoding, NoPE
from refpos.encodings.distance import DistanceBias, distance_bias, relative_positions
from refpos.encodings.learned import LearnedAbsolute, learned_lookup
from refpos.pipeline.layer import AttentionWeights, self_attention
from refpos.pipeline.worked_example import explain_text, worked_example

# --- encodings other than RoPE ---
# isort: split
from refpos.encodings.alibi import ALiBi, alibi_bias, alibi_bias_from_positions, alibi_slopes
from refpos.encodings.cope import CoPE, cope_gates, cope_logits, cope_position_logits, cope_positions
from refpos.encodings.deberta import (
    DeBERTa,
    deberta_attention_logits,
    deberta_c2p_terms,
    deberta_log_buckets,
    deberta_p2c_terms,
    deberta_position_projection,
    deberta_relative_index,
)
from refpos.encodings.fire import FIRE, fire_bias, fire_features
from refpos.encodings.kerple import KERPLE, kerple_bias
from refpos.encodings.sandwich import Sandwich, sandwich_bias
from refpos.encodings.shaw import Shaw, shaw_index, shaw_key_terms, shaw_value_terms, skew, unskew
from refpos.encodings.sinusoidal import (
    Sinusoidal,
    interleaved_to_concat_permutation,
    sinusoidal,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)
from refpos.encodings.t5 import T5, t5_bias, t5_bucket
from refpos.encodings.txl import TransformerXL, txl_position_scores, txl_position_table, txl_rel_shift, txl_scores
from refpos.encodings.xpos import XPos, xpos

# --- RoPE ---
# isort: split
from refpos.rope import (
    DroPE,
    DynamicNTKState,
    Rope,
    RopeConfig,
    apply_rope,
    apply_rope_complex,
    half_to_interleaved_permutation,
    interleaved_to_half_permutation,
    permute_qk_heads,
    rms_norm,
    rope_config_from_params,
    rope_cos_sin,
    rope_frequencies,
    rope_rotation_matrix,
    softmax_multiplier,
)

# --- a model's positions from its config.json ---
# isort: split
from refpos.models import (
    ModelPositions,
    UnknownFamilyWarning,
    from_hf_config,
    hf_layer,
    hf_layer_types,
    hf_layers,
    model_positions,
)

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "FIRE",
    "KERPLE",
    "T5",
    "ALiBi",
    "AttentionWeights",
    "CoPE",
    "DeBERTa",
    "DistanceBias",
    "DroPE",
    "DynamicNTKState",
    "Encoding",
    "LearnedAbsolute",
    "ModelPositions",
    "NoPE",
    "Rope",
    "RopeConfig",
    "Sandwich",
    "Shaw",
    "Sinusoidal",
    "TransformerXL",
    "UnknownFamilyWarning",
    "XPos",
    "alibi_bias",
    "alibi_bias_from_positions",
    "alibi_slopes",
    "apply_rope",
    "apply_rope_complex",
    "array_namespace",
    "attention",
    "backend_name",
    "causal_mask",
    "chunked_attention",
    "chunked_causal_mask",
    "cope_gates",
    "cope_logits",
    "cope_position_logits",
    "cope_positions",
    "deberta_attention_logits",
    "deberta_c2p_terms",
    "deberta_log_buckets",
    "deberta_p2c_terms",
    "deberta_position_projection",
    "deberta_relative_index",
    "distance_bias",
    "explain_text",
    "fire_bias",
    "fire_features",
    "from_hf_config",
    "get_xp",
    "half_to_interleaved_permutation",
    "hf_layer",
    "hf_layer_types",
    "hf_layers",
    "interleaved_to_concat_permutation",
    "interleaved_to_half_permutation",
    "kerple_bias",
    "learned_lookup",
    "merge_heads",
    "model_positions",
    "permute_qk_heads",
    "relative_positions",
    "repeat_kv",
    "rms_norm",
    "rope_config_from_params",
    "rope_cos_sin",
    "rope_frequencies",
    "rope_rotation_matrix",
    "sandwich_bias",
    "self_attention",
    "set_backend",
    "shaw_index",
    "shaw_key_terms",
    "shaw_value_terms",
    "sinusoidal",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
    "skew",
    "sliding_window_mask",
    "softmax",
    "softmax_multiplier",
    "split_heads",
    "t5_bias",
    "t5_bucket",
    "to_numpy",
    "txl_position_scores",
    "txl_position_table",
    "txl_rel_shift",
    "txl_scores",
    "unskew",
    "use_backend",
    "worked_example",
    "xpos",
]
