"""The RoPE diagnosis does not miss: every mistake of the catalogue, in both directions, at the probe set
``refpos golden model`` writes for every model config (its seeded x and its 32 probe positions).

A *direction* is one side of a convention pair: the half layout checked against interleaved and the
reverse, positions ``p + δ`` and ``p − δ`` (δ = 1 and 8; ``p − δ`` compared where ``p ≥ δ``: position 0
is always a probe), θ = 10000 against the config's θ (``default_theta``) and the config's θ against
10000 (``wrong_theta``), frequencies unscaled and scaled twice, A missing and A squared, the attention
factor times 1.1 and divided by it, LongRoPE's short factors at a long sequence and the reverse, the
rotated channels first instead of last and the reverse, float32 angles stored as float64 and as
float32 (both declared float64), inv_freq rounded to bfloat16 and to float16. Each candidate is checked
as computed (float64); at the probe sets of one model per family (:data:`FLOAT32_PORTS`) also cast to
float32 (a float32 port): the mistake must be named both times.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.check.problem import round_to
from refpos.check.run import check_rope
from refpos.golden.rope_cases import declared_length, model_configs, probe_positions, shared_x, slug
from refpos.rope.scaling import base_inv_freq
from refpos.tests.ports import float32_rope


def _probe_sets():
    """(label, rope, x, positions) as ``refpos golden model`` writes them, one per model and layer type."""
    sets = []
    for name, entry in model_configs().items():
        config = entry["config"]
        for layer_type in refpos.hf_layer_types(config) or (None,):
            rope = refpos.from_hf_config(config, layer_type=layer_type)
            key = "rope/" + slug(name) + ("" if layer_type is None else "/" + layer_type)
            positions = probe_positions(declared_length(config, rope), rope.original_max_position_embeddings, key)
            sets.append((key[5:], rope, shared_x(rope.head_dim, positions.size)[1], positions))
    return sets


PROBE_SETS = _probe_sets()
#: probe sets where each candidate is also checked as a float32 port (one model per family of configs)
FLOAT32_PORTS = ("meta-llama--Llama-3.1-8B", "microsoft--Phi-3.5-mini-instruct", "deepseek-ai--DeepSeek-V3",
                 "EleutherAI--gpt-j-6b", "EleutherAI--gpt-neox-20b", "meta-llama--Llama-2-7b-hf", "openai--gpt-oss-20b",
                 "Gemma-4-family-HF-Gemma4Config-defaults/full_attention")


def _apply(x, positions, rope, seq_len, **kw):
    return np.asarray(refpos.apply_rope(x, positions, rope, seq_len=seq_len, **kw))


def _float32_phase(x, positions, rope, seq_len):
    """A correct float32 implementation (refpos.tests.ports.float32_rope) at the config's ω and A."""
    w, factor = refpos.rope_frequencies(rope, seq_len=seq_len, xp="numpy")
    return float32_rope(x, positions, rope, w, factor)


def _cases(rope, x, positions):
    """``(mistake, direction) -> (config checked against, candidate, seq_len, expected id, dtypes)``."""
    seq_len = int(positions.max()) + 1
    w, factor = (np.asarray(v) if i == 0 else float(v)
                 for i, v in enumerate(refpos.rope_frequencies(rope, seq_len=seq_len, xp="numpy")))
    out = {}
    both = ("float64", "float32")
    if rope.rope_type != "proportional":
        other = "interleaved" if rope.layout != "interleaved" else "half"
        swapped = dataclasses.replace(rope, layout=other)
        out["layout_swap", "other layout"] = (rope, _apply(x, positions, swapped, seq_len), seq_len, "layout_swap",
                                              both)
        out["layout_swap", "reverse"] = (swapped, _apply(x, positions, rope, seq_len), seq_len, "layout_swap", both)
    for delta in (1, 8):
        out["position_offset", f"p+{delta}"] = (rope, _apply(x, positions + delta, rope, seq_len), seq_len,
                                                "position_offset", both)
        shifted = positions - delta  # p − δ < 0 does not exist as a reference: the rows from p = δ on compare
        candidate = _apply(x, np.maximum(shifted, 0), rope, seq_len)
        out["position_offset", f"p-{delta}"] = (rope, candidate, seq_len, "position_offset", both)
    y32 = _float32_phase(x, positions, rope, seq_len)
    out["float32_angles", "stored float64"] = (rope, y32.astype(np.float64), seq_len, "float32_angles", ("float64",))
    out["float32_angles", "stored float32"] = (rope, y32, seq_len, "float32_angles", ("float64",))
    for low in ("bfloat16", "float16"):
        out["bf16_angles", low] = (rope, _apply(x, positions, rope, seq_len, frequencies=(round_to(w, low), factor)),
                                   seq_len, "bf16_angles", both)
    if rope.rope_type == "default":  # θ = 10000 where the config says θ, and the config's θ where it says 10000
        other_theta = refpos.rope_config_from_params({**rope.to_params(),
                                                      "rope_theta": 10000.0 if rope.theta != 10000.0 else 500000.0})
        default_rope, model_rope = (other_theta, rope) if rope.theta != 10000.0 else (rope, other_theta)
        out["theta", "default filled in"] = (model_rope, _apply(x, positions, default_rope, seq_len), seq_len,
                                             "default_theta", both)
        out["theta", "another theta"] = (default_rope, _apply(x, positions, model_rope, seq_len), seq_len,
                                         "wrong_theta", both)
    default = np.asarray(base_inv_freq(rope.theta, rope.rotary_dim, refpos.get_xp("numpy")))
    if rope.rope_type not in ("default", "proportional") and default.shape == w.shape:
        out["scaling", "not applied"] = (rope, _apply(x, positions, rope, seq_len, frequencies=(default, 1.0)),
                                         seq_len, "unscaled_frequencies", both)
        out["scaling", "applied twice"] = (rope, _apply(x, positions, rope, seq_len,
                                                        frequencies=(w**2 / default, factor)),
                                           seq_len, "double_scaled_frequencies", both)
    if factor != 1.0:
        out["attention_factor", "missing"] = (rope, _apply(x, positions, rope, seq_len, frequencies=(w, 1.0)),
                                              seq_len, "missing_attention_factor", both)
        out["attention_factor", "squared"] = (rope, _apply(x, positions, rope, seq_len, frequencies=(w, factor**2)),
                                              seq_len, "squared_attention_factor", both)
    for label, ratio in (("times 1.1", 1.1), ("divided by 1.1", 1 / 1.1)):
        out["attention_factor_mismatch", label] = (rope, _apply(x, positions, rope, seq_len,
                                                                frequencies=(w, factor * ratio)),
                                                   seq_len, "attention_factor_mismatch", both)
    if rope.rope_type == "longrope" and seq_len > rope.original_max_position_embeddings:  # MiniCPM3: L <= L_0 only
        orig = rope.original_max_position_embeddings
        out["longrope_factor_swap", "short factors"] = (rope, _apply(x, positions, rope, orig), seq_len,
                                                        "longrope_factor_swap", both)
        out["longrope_factor_swap", "long factors"] = (rope, _apply(x, positions, rope, seq_len), orig,
                                                       "longrope_factor_swap", both)
    if rope.rope_type != "proportional" and rope.rotary_dim < rope.head_dim:
        moved = dataclasses.replace(rope, placement="last" if rope.placement == "first" else "first")
        out["partial_rotary_placement", "other end"] = (rope, _apply(x, positions, moved, seq_len), seq_len,
                                                        "partial_rotary_placement", both)
        out["partial_rotary_placement", "reverse"] = (moved, _apply(x, positions, rope, seq_len), seq_len,
                                                      "partial_rotary_placement", both)
    return out


MATRIX = [(label, mistake, direction) for label, rope, x, positions in PROBE_SETS
          for mistake, direction in _cases(rope, x, positions)]


@pytest.mark.parametrize(("probe_set", "mistake", "direction"), MATRIX)
def test_every_mistake_is_named_in_both_directions_at_every_probe_set(probe_set, mistake, direction):
    _, rope, x, positions = next(s for s in PROBE_SETS if s[0] == probe_set)
    against, candidate, seq_len, expected, dtypes = _cases(rope, x, positions)[mistake, direction]
    for port in dtypes if probe_set in FLOAT32_PORTS else dtypes[:1]:
        cand = candidate if port == "float64" or candidate.dtype == np.float32 else candidate.astype(np.float32)
        result = check_rope(cand, x, positions, against, seq_len=seq_len, dtype="float64" if mistake ==
                            "float32_angles" else None)
        ids = [d["id"] for d in result["diagnosis"]]
        assert not result["ok"], (expected, port)
        assert expected in ids, (expected, port, result["diagnosis"])


def test_the_matrix_covers_every_mistake_of_the_catalogue_and_both_directions():
    named = {expected for label, rope, x, positions in PROBE_SETS
             for _, _, _, expected, _ in _cases(rope, x, positions).values()}
    assert named == {"layout_swap", "position_offset", "float32_angles", "bf16_angles", "default_theta",
                     "wrong_theta", "unscaled_frequencies", "double_scaled_frequencies", "missing_attention_factor",
                     "squared_attention_factor", "attention_factor_mismatch", "longrope_factor_swap",
                     "partial_rotary_placement"}
    directions = {}
    for mistake, direction in ((m, d) for _, m, d in MATRIX):
        directions.setdefault(mistake, set()).add(direction)
    assert all(len(d) >= 2 for d in directions.values()), directions


def test_no_match_names_the_closest_mistake_and_by_how_much():
    _, rope, x, positions = next(s for s in PROBE_SETS if s[0].startswith("meta-llama--Llama-3.1-8B"))
    seq_len = int(positions.max()) + 1
    swapped = dataclasses.replace(rope, layout="interleaved")
    candidate = _apply(x, positions, swapped, seq_len) * (1 + 1e-4)  # the layout swap, and a little more
    result = check_rope(candidate, x, positions, rope)
    closest = next(d for d in result["diagnosis"] if d["id"] == "closest_mistake")
    assert closest["closest"] == "layout_swap" and closest["max_ratio"] > 1
    assert "no mistake of the catalogue matches" in closest["evidence"]
