"""Deliberately wrong adapters: each wraps :mod:`refpos.testing.adapter` and breaks exactly one thing.

:data:`CATALOGUE` maps each mutant module (``spec_tests.mutants.<name>``) to the mistake it makes, the
page section of docs/ that documents it, and the spec test files expected to catch it. The meta test
(``spec_tests/test_meta.py``) runs those files on every mutant and asserts that they fail, and runs
them on :mod:`refpos.testing.adapter` and asserts that they pass.

Run one by hand: ``REFPOS_IMPL=spec_tests.mutants.softmax_no_max python -m pytest spec_tests -x``.
"""

from __future__ import annotations

from typing import NamedTuple


class Mutant(NamedTuple):
    """One known mistake, where it is catalogued, and which spec test files must catch it."""

    mistake: str
    pitfall: str  # where the mistake is documented: a page and section of docs/
    catches: tuple[str, ...]


#: mutant module name -> what it breaks; ``catches`` are paths relative to the repository root
ATTENTION = "spec_tests/test_attention.py"
ROPE_VECTORS = "spec_tests/test_rope_vectors.py"
ROPE_PROPERTIES = "spec_tests/test_rope_properties.py"
MROPE = "spec_tests/test_mrope.py"

CATALOGUE: dict[str, Mutant] = {
    "softmax_no_max": Mutant("softmax without the max subtraction: exp overflows to NaN for logits >= 710",
                             "docs/conventions.md#dtype-rules", (ATTENTION,)),
    "gqa_modulo_heads": Mutant("GQA: query head h reads kv head h % Hkv instead of h // n_rep",
                               "docs/conventions.md#gqa-head-mapping", (ATTENTION,)),
    "rope_layout_swapped": Mutant("RoPE layout swapped: half <-> interleaved",
                                  "docs/diagnosis.md#layout_swap", (ROPE_VECTORS,)),
    "rope_position_off_by_one": Mutant("RoPE rotation at position p uses p + 1",
                                       "docs/diagnosis.md#position_offset", (ROPE_PROPERTIES,)),
    "rope_float32_angles": Mutant("float32 RoPE angles while INFO declares float64",
                                  "docs/diagnosis.md#float32_angles", (ROPE_PROPERTIES,)),
    "rope_attention_factor_missing": Mutant("RoPE attention factor missing (A = 1)",
                                            "docs/diagnosis.md#missing_attention_factor", (ROPE_VECTORS,)),
    "rope_attention_factor_squared": Mutant("RoPE attention factor squared in cos/sin",
                                            "docs/diagnosis.md#squared_attention_factor", (ROPE_PROPERTIES,)),
    "dynamic_ntk_ignores_seq_len": Mutant("dynamic NTK ignores seq_len (plain RoPE at every length)",
                                          "docs/extrapolation.md#dynamic-ntk", (ROPE_VECTORS,)),
    "yarn_no_truncation": Mutant("YaRN correction range never truncated (float bounds)",
                                 "docs/extrapolation.md#where-the-anchors-differ", (ROPE_VECTORS,)),
    "llama3_band_edges_shifted": Mutant("llama3 band edges shifted: period 1/ω taken as the wavelength",
                                        "docs/extrapolation.md#llama3", (ROPE_VECTORS,)),
    "alibi_naive_slopes": Mutant("ALiBi slopes 2^(-8h/n) for every n (naive closed form)",
                                 "docs/diagnosis.md#alibi_closed_form_slopes", ("spec_tests/test_alibi.py",)),
    "t5_sign_flipped": Mutant("T5 relative position sign flipped (query - memory)",
                              "docs/diagnosis.md#t5_sign_flip", ("spec_tests/test_t5.py",)),
    "sinusoid_layout_swapped": Mutant("sinusoid layout swapped: interleaved <-> concat",
                                      "docs/diagnosis.md#sinusoid_layout_swap", ("spec_tests/test_sinusoidal.py",)),
    "learned_lookup_wraps": Mutant("learned lookup wraps negative positions",
                                   "docs/learned.md#the-math", ("spec_tests/test_sinusoidal.py",)),
    "shaw_sign_blind": Mutant("Shaw relative index sign-blind (|j - i|)",
                              "docs/relative.md#shaw", ("spec_tests/test_relative.py",)),
    "xpos_key_not_divided": Mutant("xPos key scaled by zeta^(+n/gamma) instead of zeta^(-n/gamma)",
                                   "docs/other-encodings.md#xpos", ("spec_tests/test_beyond_anchors.py",)),
    "mrope_1d_positions": Mutant("M-RoPE reads the temporal position for every pair (1-D positions)",
                                 "docs/mrope.md#mistakes", (MROPE,)),
    "mrope_sections_reversed": Mutant("M-RoPE sections read in reverse order (w, h, t)",
                                      "docs/mrope.md#mistakes", (MROPE,)),
    "mrope_interleave_ignored": Mutant("M-RoPE interleaved assignment ignored (contiguous bands)",
                                       "docs/mrope.md#mistakes", (MROPE,)),
    "mrope_temporal_spacing_ignored": Mutant("Qwen2.5-VL video temporal spacing ignored (Δ = 1)",
                                             "docs/mrope.md#mistakes", (MROPE,)),
}
