"""Plain float32 implementations of the adapter contract (spec_tests/README.md), one per form a correct float32
implementation may take: the frequencies and angles by ``pow``, ``exp_log`` or a ``running_product``
(refpos.golden.exact.forms), the softmax max-subtracted or by log-sum-exp.

Every function that computes floating-point values is written here from its formula (the contract, docs/*.md) in
NumPy float32 arithmetic, the way a straightforward PyTorch or NumPy port computes it: one module per concern,

* :mod:`.rope` — RoPE of every rule, placement, layout, M-RoPE, the complex form, the rotation matrix, given
  tables, rotated logits, stateful dynamic NTK, the vision encoders' RoPE;
* :mod:`.attention` — the softmax, attention, the online softmax over chunks, local attention, the query scale;
* :mod:`.biases` — ALiBi, T5 (buckets through a float32 log), KERPLE, FIRE, Sandwich, DeBERTa (float32 log
  buckets), CoPE, Shaw, Transformer-XL, xPos;
* :mod:`.sinusoids` — the sinusoid and its shift matrix, the 1-D sinusoids, the 2-D sin–cos grids and sine maps,
  the Fourier features, the learned lookup;
* :mod:`.vision` — the window bias tables (Swin, BEiT's bilinear resampling, Swin V2's MLP), ``interpolate`` and
  the position-table resampling, the decomposed relative positions, the convolutional positions.

Not computed here, because no float arithmetic takes part: ``rope_layout_permutation`` and
``rope_permute_qk_heads`` (index permutations), ``rope_params_from_hf_config`` (configuration bookkeeping),
``mrope_position_ids`` (integer position ids) and ``txl_rel_shift`` (a pad-and-reshape of its input) are the
reference adapter's. The scalars a port computes in Python floats before any tensor exists (the resolved rope
config, the NTK base, YaRN's ramp bounds, the attention factor, the softmax multiplier) are float64, as there.

Argument checks: each function first calls the reference adapter's function of its name for its ``ValueError`` /
``TypeError`` on bad input only (its result is discarded, :func:`._base.checked`); every value returned is the
float32 computation here.

An adapter module imports everything from here and calls :func:`configure` once (``spec_tests/test_meta_forms.py``
writes them). ``wrong`` names a group of functions that then round one intermediate to bfloat16 (8 bits), the
classic low-precision mistake: ω (``frequencies``), the angles ``p·ω`` (``angles``, every sinusoid's too), the
logits of the softmax (``softmax``) or of the attention (``attention``), ALiBi's ``m·distance`` (``alibi``),
T5's log-bucket ratio (``t5``), the 2-D sin–cos grid's angles (``sincos2d``). The suite must fail each.
"""

from __future__ import annotations

from refpos.testing.adapter import (  # no float arithmetic: see the module docstring
    mrope_position_ids,
    rope_layout_permutation,
    rope_params_from_hf_config,
    rope_permute_qk_heads,
    txl_rel_shift,
)
from spec_tests.float32_forms._base import ANGLE_FORMS, FORM, INFO, SOFTMAX_FORMS, WRONG
from spec_tests.float32_forms.attention import attention, chunked_attention, local_attention, query_scale, softmax
from spec_tests.float32_forms.biases import (
    alibi_bias,
    alibi_slopes,
    cope_logits,
    cope_positions,
    deberta_attention_logits,
    deberta_log_buckets,
    fire_bias,
    kerple_bias,
    sandwich_bias,
    shaw_attention,
    t5_bias,
    t5_bucket,
    txl_scores,
    xpos,
)
from spec_tests.float32_forms.rope import (
    apply_rope,
    apply_rope_complex,
    apply_rope_tables,
    apply_vision_rope,
    rope_attention_logits,
    rope_cos_sin,
    rope_dynamic_ntk_frequencies,
    rope_frequencies,
    rope_rotation_matrix,
    rope_softmax_multiplier,
)
from spec_tests.float32_forms.sinusoids import (
    fourier_features,
    learned_lookup,
    padded_sinusoid,
    perceiver_fourier_features,
    sincos_2d_grid,
    sine_coordinates,
    sine_position_map,
    sinusoid_1d,
    sinusoidal,
    sinusoidal_shift_matrix,
)
from spec_tests.float32_forms.vision import (
    add_decomposed_rel_pos,
    conv_positions,
    interpolate,
    resample_position_table,
    stacked_conv_positions,
    window_bias,
)

__all__ = [
    "INFO", "add_decomposed_rel_pos", "alibi_bias", "alibi_slopes", "apply_rope", "apply_rope_complex",
    "apply_rope_tables", "apply_vision_rope", "attention", "chunked_attention", "conv_positions", "cope_logits",
    "cope_positions", "deberta_attention_logits", "deberta_log_buckets", "fire_bias", "fourier_features",
    "interpolate", "kerple_bias", "learned_lookup", "local_attention", "mrope_position_ids", "padded_sinusoid",
    "perceiver_fourier_features", "query_scale", "resample_position_table", "rope_attention_logits",
    "rope_cos_sin", "rope_dynamic_ntk_frequencies", "rope_frequencies", "rope_layout_permutation",
    "rope_params_from_hf_config", "rope_permute_qk_heads", "rope_rotation_matrix", "rope_softmax_multiplier",
    "sandwich_bias", "shaw_attention", "sincos_2d_grid", "sine_coordinates", "sine_position_map", "sinusoid_1d",
    "sinusoidal", "sinusoidal_shift_matrix", "softmax", "stacked_conv_positions", "t5_bias", "t5_bucket",
    "txl_rel_shift", "txl_scores", "window_bias", "xpos",
]


def configure(angles: str, softmax: str, *, wrong: str | None = None) -> None:
    """Choose the forms (and the group made wrong, if any); names ``INFO`` after them."""
    if angles not in ANGLE_FORMS or softmax not in SOFTMAX_FORMS or wrong not in (None, *WRONG):
        raise ValueError(f"angles must be one of {ANGLE_FORMS}, softmax one of {SOFTMAX_FORMS}, wrong one of {WRONG}")
    FORM.update(angles=angles, softmax=softmax, wrong=wrong)
    INFO["name"] = f"float32 {angles} angles, {softmax} softmax" + (f", {wrong} in bfloat16" if wrong else "")
    INFO["forms"] = [angles]
