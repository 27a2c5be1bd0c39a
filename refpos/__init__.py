"""refpos: a float64 reference and spec test suite for Transformer positional encodings.

Every encoding plugs into one attention pipeline (:func:`self_attention`) through the hooks of
:class:`Encoding`; every function that takes arrays works on NumPy, CuPy and array-api-strict arrays
(:mod:`refpos.backend`).
"""

from refpos.absolute import LearnedAbsolute, learned_lookup
from refpos.attention import (
    attention,
    causal_mask,
    merge_heads,
    repeat_kv,
    sliding_window_mask,
    softmax,
    split_heads,
)
from refpos.backend import BACKENDS, array_namespace, backend_name, get_xp, to_numpy, use_backend
from refpos.chunked import chunked_attention
from refpos.encoding import Encoding, NoPE
from refpos.pipeline import AttentionWeights, self_attention
from refpos.relative import DistanceBias, distance_bias, relative_positions
from refpos.worked_example import explain_text, worked_example

# --- absolute and relative encodings (issue 3) ---

# --- RoPE (issue 4) ---

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "AttentionWeights",
    "DistanceBias",
    "Encoding",
    "LearnedAbsolute",
    "NoPE",
    "array_namespace",
    "attention",
    "backend_name",
    "causal_mask",
    "chunked_attention",
    "distance_bias",
    "explain_text",
    "get_xp",
    "learned_lookup",
    "merge_heads",
    "relative_positions",
    "repeat_kv",
    "self_attention",
    "sliding_window_mask",
    "softmax",
    "split_heads",
    "to_numpy",
    "use_backend",
    "worked_example",
]
