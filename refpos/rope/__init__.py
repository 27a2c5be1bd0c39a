"""Rotary position embeddings: every context-extension rule, M-RoPE, vision RoPE and DroPE (the rotation math).

* :mod:`refpos.rope.rules` — the registry of scaling rules: one record per ``rope_type`` (its keys, checks,
  formulas, Hypothesis draw and docs row), from which the rest of this list reads every rule.
* :mod:`refpos.rope.config` — :class:`RopeConfig`.
* :mod:`refpos.rope.params` — :func:`rope_config_from_params` (the adapter-contract dict).
* :mod:`refpos.rope.scaling` — :func:`rope_frequencies` (``ω``, ``A``) for every ``rope_type``, :func:`mscale`.
* :mod:`refpos.rope.core` — :func:`rope_cos_sin`, :func:`apply_rope` (the readable rotation, and the dispatch to
  the fast forms of :mod:`refpos.rope.fast` and :mod:`refpos.rope.fast_gpu`).
* :mod:`refpos.rope.forms` — :func:`apply_rope_complex`, :func:`rope_rotation_matrix`, :func:`pair_channels`,
  the Meta ↔ HF permutations.
* :mod:`refpos.rope.dynamic` — :class:`DynamicNTKState` (transformers' stateful dynamic NTK).
* :mod:`refpos.rope.encoding` — :class:`Rope`, the pipeline encoding.
* :mod:`refpos.rope.drope` — :class:`DroPE`, :func:`rms_norm`.

Reading a model's config.json is :mod:`refpos.models`. The math is on docs/rope.md and
docs/extrapolation.md; docstrings cite their sections by anchor.
"""

from refpos.rope.config import LAYOUTS, PLACEMENTS, ROPE_TYPES, RopeConfig
from refpos.rope.core import apply_rope, rope_cos_sin
from refpos.rope.drope import DroPE, rms_norm
from refpos.rope.dynamic import DynamicNTKState
from refpos.rope.encoding import Rope
from refpos.rope.forms import (
    apply_rope_complex,
    half_to_interleaved_permutation,
    interleaved_to_half_permutation,
    pair_channels,
    permute_qk_heads,
    rope_rotation_matrix,
)
from refpos.rope.params import rope_config_from_params
from refpos.rope.scaling import (
    attention_factor,
    dynamic_theta,
    mscale,
    ntk_theta,
    rope_frequencies,
    softmax_multiplier,
    vllm_ntk_inv_freq,
    yarn_correction_range,
    yarn_pair_at,
    yarn_ramp,
)

__all__ = [
    "LAYOUTS",
    "PLACEMENTS",
    "ROPE_TYPES",
    "DroPE",
    "DynamicNTKState",
    "Rope",
    "RopeConfig",
    "apply_rope",
    "apply_rope_complex",
    "attention_factor",
    "dynamic_theta",
    "half_to_interleaved_permutation",
    "interleaved_to_half_permutation",
    "mscale",
    "ntk_theta",
    "pair_channels",
    "permute_qk_heads",
    "rms_norm",
    "rope_config_from_params",
    "rope_cos_sin",
    "rope_frequencies",
    "rope_rotation_matrix",
    "softmax_multiplier",
    "vllm_ntk_inv_freq",
    "yarn_correction_range",
    "yarn_pair_at",
    "yarn_ramp",
]
