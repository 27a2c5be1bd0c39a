"""Deliberately wrong adapters: each wraps :mod:`refpos.testing.adapter` and breaks exactly one thing.

:data:`MUTANTS` maps each mutant module (``spec_tests.mutants.<name>``) to the mistake it implements — an
id of the one catalogue of known mistakes, :mod:`refpos.check.shared.catalogue` (``refpos/data/mistakes.toml``:
description, example, the page section of docs/ that documents it), the id ``refpos check`` prints for the
same mistake — and the spec test files expected to catch it. The meta test
(``spec_tests/test_meta.py``) runs those files on every mutant and asserts that they fail, and runs
them on :mod:`refpos.testing.adapter` and asserts that they pass.

Run one by hand: ``REFPOS_IMPL=spec_tests.mutants.softmax_no_max python -m pytest spec_tests -x``.
"""

from __future__ import annotations

from typing import NamedTuple

from refpos.check.shared.catalogue import BY_ID, Mistake


class Mutant(NamedTuple):
    """One mutant: the catalogued mistake it implements, and which spec test files must catch it."""

    mistake: str  # an id of refpos.check.shared.catalogue (what refpos check prints for the same mistake)
    catches: tuple[str, ...]

    @property
    def entry(self) -> Mistake:
        """The catalogue entry: description, example, and the page section of docs/ that documents it."""
        return BY_ID[self.mistake]


#: mutant module name -> what it breaks; ``catches`` are paths relative to the repository root
ATTENTION = "spec_tests/test_attention.py"
ROPE_VECTORS = "spec_tests/test_rope_vectors.py"
ROPE_PROPERTIES = "spec_tests/test_rope_properties.py"
MROPE = "spec_tests/test_mrope.py"
DEBERTA = "spec_tests/test_deberta.py"
ROPE_SCALING = "spec_tests/test_rope_scaling.py"

MUTANTS: dict[str, Mutant] = {
    "softmax_no_max": Mutant("softmax_no_max", (ATTENTION,)),
    "gqa_modulo_heads": Mutant("gqa_head_mapping", (ATTENTION,)),
    "softcap_before_scale": Mutant("softcap_before_scale", (ATTENTION,)),
    "rope_layout_swapped": Mutant("layout_swap", (ROPE_VECTORS,)),
    "rope_position_off_by_one": Mutant("position_offset", (ROPE_PROPERTIES,)),
    "rope_float32_angles": Mutant("float32_angles", (ROPE_PROPERTIES,)),
    "rope_attention_factor_missing": Mutant("missing_attention_factor", (ROPE_VECTORS,)),
    "rope_attention_factor_squared": Mutant("squared_attention_factor", (ROPE_VECTORS,)),
    "rope_unscaled_frequencies": Mutant("unscaled_frequencies", (ROPE_VECTORS,)),
    "rope_default_theta": Mutant("default_theta", (ROPE_VECTORS,)),
    "rope_double_scaled_frequencies": Mutant("double_scaled_frequencies", (ROPE_VECTORS,)),
    "rope_bf16_inv_freq": Mutant("bf16_angles", (ROPE_VECTORS,)),
    "longrope_factor_swap": Mutant("longrope_factor_swap", (ROPE_VECTORS,)),
    "rope_partial_rotary_ignored": Mutant("partial_rotary_placement", (ROPE_VECTORS,)),
    "yarn_log_linear_blend": Mutant("yarn_log_linear_blend", (ROPE_SCALING,)),
    "yarn_no_truncation": Mutant("yarn_truncation", (ROPE_VECTORS,)),
    "llama3_band_edges_shifted": Mutant("llama3_band_edges", (ROPE_VECTORS,)),
    "alibi_naive_slopes": Mutant("alibi_closed_form_slopes", ("spec_tests/test_alibi.py",)),
    "t5_sign_flipped": Mutant("t5_sign_flip", ("spec_tests/test_t5.py",)),
    "sinusoid_layout_swapped": Mutant("sinusoid_layout_swap", ("spec_tests/test_sinusoidal.py",)),
    "learned_lookup_wraps": Mutant("learned_lookup_wraps", ("spec_tests/test_sinusoidal.py",)),
    "shaw_sign_blind": Mutant("shaw_sign_blind", ("spec_tests/test_relative.py",)),
    "xpos_key_not_divided": Mutant("xpos_key_scale_sign", ("spec_tests/test_beyond_anchors.py",)),
    "mrope_1d_positions": Mutant("mrope_1d_positions", (MROPE,)),
    "mrope_sections_reversed": Mutant("mrope_section_order", (MROPE,)),
    "mrope_interleave_ignored": Mutant("mrope_assignment", (MROPE,)),
    "mrope_temporal_spacing_ignored": Mutant("mrope_temporal_spacing_ignored", (MROPE,)),
    "deberta_bucket_truncated": Mutant("deberta_bucket_rounding", (DEBERTA,)),
    "deberta_relative_sign": Mutant("deberta_relative_sign", (DEBERTA,)),
    "deberta_p2c_not_transposed": Mutant("deberta_p2c_not_transposed", (DEBERTA,)),
    "deberta_scale_without_terms": Mutant("deberta_scale_factor", (DEBERTA,)),
}
