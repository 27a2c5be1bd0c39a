"""Deliberately wrong adapters: each wraps :mod:`refpos.testing.adapter` and breaks exactly one thing.

:data:`CATALOGUE` maps each mutant module (``spec_tests.mutants.<name>``) to the mistake it makes, the
pitfalls.md section it comes from, and the spec test files expected to catch it. The meta test
(``spec_tests/test_meta.py``) runs those files on every mutant and asserts that they fail, and runs
them on :mod:`refpos.testing.adapter` and asserts that they pass.

Run one by hand: ``REFPOS_IMPL=spec_tests.mutants.softmax_no_max python -m pytest spec_tests -x``.
"""

from __future__ import annotations

from typing import NamedTuple


class Mutant(NamedTuple):
    """One known mistake, where it is catalogued, and which spec test files must catch it."""

    mistake: str
    pitfall: str  # section of pitfalls.md (or the spec file named)
    catches: tuple[str, ...]


#: mutant module name -> what it breaks; ``catches`` are paths relative to the repository root
ATTENTION = "spec_tests/test_attention.py"
ROPE_VECTORS = "spec_tests/test_rope_vectors.py"
ROPE_PROPERTIES = "spec_tests/test_rope_properties.py"

CATALOGUE: dict[str, Mutant] = {
    "softmax_no_max": Mutant("softmax without the max subtraction: exp overflows to NaN for logits >= 710",
                             "§17; encodings.md §1.6", (ATTENTION,)),
    "gqa_modulo_heads": Mutant("GQA: query head h reads kv head h % Hkv instead of h // n_rep", "§18",
                               (ATTENTION,)),
    "rope_layout_swapped": Mutant("RoPE layout swapped: half <-> interleaved", "§2, §18", (ROPE_VECTORS,)),
    "rope_position_off_by_one": Mutant("RoPE rotation at position p uses p + 1", "§3, §18", (ROPE_PROPERTIES,)),
    "rope_float32_angles": Mutant("float32 RoPE angles while INFO declares float64", "§5, §18",
                                  (ROPE_PROPERTIES,)),
    "rope_attention_factor_missing": Mutant("RoPE attention factor missing (A = 1)", "§4, §18", (ROPE_VECTORS,)),
    "rope_attention_factor_squared": Mutant("RoPE attention factor squared in cos/sin", "§4, §18",
                                            (ROPE_PROPERTIES,)),
    "dynamic_ntk_ignores_seq_len": Mutant("dynamic NTK ignores seq_len (plain RoPE at every length)", "§15",
                                          (ROPE_VECTORS,)),
    "yarn_no_truncation": Mutant("YaRN correction range never truncated (float bounds)", "§4; rope.md G6",
                                 (ROPE_VECTORS,)),
    "llama3_band_edges_shifted": Mutant("llama3 band edges shifted: period 1/ω taken as the wavelength",
                                        "§8, §9", (ROPE_VECTORS,)),
    "alibi_naive_slopes": Mutant("ALiBi slopes 2^(-8h/n) for every n (naive closed form)", "§7, §18",
                                 ("spec_tests/test_alibi.py",)),
    "t5_sign_flipped": Mutant("T5 relative position sign flipped (query - memory)", "§13, §18",
                              ("spec_tests/test_t5.py",)),
    "sinusoid_layout_swapped": Mutant("sinusoid layout swapped: interleaved <-> concat", "§16, §18",
                                      ("spec_tests/test_sinusoidal.py",)),
    "learned_lookup_wraps": Mutant("learned lookup wraps negative positions", "§16; encodings.md §3",
                                   ("spec_tests/test_sinusoidal.py",)),
    "shaw_sign_blind": Mutant("Shaw relative index sign-blind (|j - i|)", "encodings.md §5",
                              ("spec_tests/test_relative.py",)),
    "xpos_key_not_divided": Mutant("xPos key scaled by zeta^(+n/gamma) instead of zeta^(-n/gamma)",
                                   "encodings.md §11", ("spec_tests/test_beyond_anchors.py",)),
}
