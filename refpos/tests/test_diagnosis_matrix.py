"""The RoPE diagnosis does not miss: every RoPE mistake of the catalogue, in both directions, at the probe set
``refpos golden model`` writes for every model config (its seeded x and its probe positions), and at the
example configuration of every scaling rule no model config uses.

The cases are the mistakes' own definitions (refpos.check.rope_mistakes, the variants refpos check builds its
mutants from), iterated over the catalogue's diagnosed RoPE entries: a new mistake enters the matrix with its
definition. A *direction* is one side of a convention pair: each variant is checked against the reference,
and a variant whose definition names a reverse is checked the other way too (the variant's config as the
truth, the reference as the candidate: the half layout against interleaved and the reverse, θ = 10000
against the config's θ and the config's θ against 10000, LongRoPE's short factors at a long sequence and
the reverse, the rotated channels first instead of last and the reverse). Up to :data:`PER_MISTAKE`
variants of a mistake are taken per probe set, spread over its list (positions p − 8 … p + 8, token
indices, an offset dropped). Each candidate is checked as computed (float64); at the probe sets of one model
per family (:data:`FLOAT32_PORTS`) also cast to float32 (a float32 port): the mistake must be named both times.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.check import catalogue
from refpos.check.diagnosis import NEAR_MISS
from refpos.check.mistakes import Context, RopeCall
from refpos.check.rope_mistakes import ROPE_MISTAKES
from refpos.check.run import check_rope
from refpos.golden.rope_cases import declared_length, model_configs, probe_positions, shared_x, slug
from refpos.rope.rules import RULES
from refpos.testing.profiles import active_profile

#: variants of one mistake taken per probe set (spread over the definition's list): its first and last in the
#: default run, four under the nightly profile (REFPOS_HYPOTHESIS_PROFILE=refpos.thorough)
PER_MISTAKE = 4 if active_profile() == "refpos.thorough" else 2
#: probe sets where each candidate is also checked as a float32 port (one model per family of configs)
FLOAT32_PORTS = ("meta-llama--Llama-3.1-8B", "microsoft--Phi-3.5-mini-instruct", "deepseek-ai--DeepSeek-V3",
                 "EleutherAI--gpt-j-6b", "EleutherAI--gpt-neox-20b", "meta-llama--Llama-2-7b-hf", "openai--gpt-oss-20b",
                 "Gemma-4-family-HF-Gemma4Config-defaults/full_attention")
#: the RoPE mistakes refpos check names, from the catalogue
DIAGNOSED = tuple(m.id for m in catalogue.family("rope") if m.diagnosed)


def _probe_sets():
    """(label, rope, x, positions) as ``refpos golden model`` writes them, one per model and layer type; then
    each rule's example (refpos.rope.rules) for the rules no model config exercises."""
    sets = []
    for name, entry in model_configs().items():
        config = entry["config"]
        for layer_type in refpos.models.hf_layer_types(config) or (None,):
            rope = refpos.models.from_hf_config(config, layer_type=layer_type)
            key = "rope/" + slug(name) + ("" if layer_type is None else "/" + layer_type)
            positions = probe_positions(declared_length(config, rope), rope.original_max_position_embeddings, key)
            sets.append((key[5:], rope, shared_x(rope.head_dim, positions.size)[1], positions))
    exercised = {rope.rope_type for _, rope, _, _ in sets}
    for name, rule in RULES.items():
        if name not in exercised:
            rope = refpos.RopeConfig(rope_type=name, head_dim=64, **rule.example)
            positions = probe_positions(131072, rope.original_max_position_embeddings, f"rule/{name}")
            sets.append((f"rule-{name}", rope, shared_x(64, positions.size)[1], positions))
    return sets


PROBE_SETS = _probe_sets()


def _spread(variants):
    """Up to PER_MISTAKE variants, spread evenly over the list (its first and last always)."""
    if len(variants) <= PER_MISTAKE:
        return list(enumerate(variants))
    picks = sorted({round(i * (len(variants) - 1) / (PER_MISTAKE - 1)) for i in range(PER_MISTAKE)})
    return [(i, variants[i]) for i in picks]


def _cases(rope, x, positions):
    """``(mistake, direction) -> (truth call, candidate, expected id)`` from the definitions of the catalogue's
    diagnosed RoPE mistakes."""
    reference = RopeCall.of(rope, positions)
    context = Context(np.arange(positions.size), int(positions.min()), int(positions.max()))
    right, out = reference.run(x), {}
    for mistake_id in DIAGNOSED:
        variants = [v for v in ROPE_MISTAKES[mistake_id].variants(reference, context)
                    if not np.array_equal(v.call.run(x), right)]  # a variant that changes nothing here is no case
        for index, variant in _spread(variants):
            out[mistake_id, f"variant {index}"] = (reference, variant.call.run(x), mistake_id)
            if variant.reverse is not None:
                out[mistake_id, f"variant {index} reversed"] = (variant.call, right, variant.reverse)
    return out


#: (probe set, mistake, direction) -> (truth call, candidate, expected id), built once
CASES = {(label, *key): case for label, rope, x, positions in PROBE_SETS
         for key, case in _cases(rope, x, positions).items()}
MATRIX = list(CASES)


@pytest.mark.parametrize(("probe_set", "mistake", "direction"), MATRIX)
def test_every_mistake_is_named_in_both_directions_at_every_probe_set(probe_set, mistake, direction):
    _, _, x, positions = next(s for s in PROBE_SETS if s[0] == probe_set)
    truth, candidate, expected = CASES[probe_set, mistake, direction]
    precision = ROPE_MISTAKES[mistake].found_by == "precision"  # a float32 path declared float64
    for port in ("float64", "float32") if probe_set in FLOAT32_PORTS else ("float64",):
        cand = candidate if port == "float64" else candidate.astype(np.float32)
        result = check_rope(cand, x, positions, truth.rope, seq_len=truth.seq_len,
                            dtype="float64" if precision else None)
        ids = [d["id"] for d in result["diagnosis"]]
        assert not result["ok"], (expected, port)
        assert expected in ids, (expected, port, result["diagnosis"])


def test_the_matrix_covers_every_rope_mistake_of_the_catalogue():
    """Iterating the catalogue: each diagnosed RoPE entry has a definition, and its cases are in the matrix
    (each reverse a definition names, too: it is the id expected of the reversed cases)."""
    assert set(DIAGNOSED) <= set(ROPE_MISTAKES), set(DIAGNOSED) - set(ROPE_MISTAKES)
    expected = {case[2] for case in CASES.values()}
    assert expected == set(DIAGNOSED), (f"never named: {set(DIAGNOSED) - expected}; "
                                        f"not diagnosed: {expected - set(DIAGNOSED)}")
    assert any(direction.endswith("reversed") for _, _, direction in MATRIX)


def test_no_match_names_the_closest_mistake_and_by_how_much():
    import dataclasses

    _, rope, x, positions = next(s for s in PROBE_SETS if s[0].startswith("meta-llama--Llama-3.1-8B"))
    seq_len = int(positions.max()) + 1
    swapped = dataclasses.replace(rope, layout="interleaved")
    candidate = np.asarray(refpos.apply_rope(x, positions, swapped, seq_len=seq_len)) * (1 + 1e-4)  # swap, and more
    result = check_rope(candidate, x, positions, rope)  # no mutant matches; the fit names both parts
    assert [d["id"] for d in result["diagnosis"]] == ["layout_swap", "attention_factor_mismatch", "error_profile"]
    omega, factor = refpos.rope_frequencies(rope, seq_len=seq_len, xp="numpy")
    bent = np.asarray(omega) * (1 + 1e-3 * np.arange(len(omega)) / len(omega))  # no rule's frequencies
    other = np.asarray(refpos.apply_rope(x, positions, rope, seq_len=seq_len, frequencies=(bent, factor)))
    result = check_rope(other, x, positions, rope)  # neither a mutant nor a part of the fit is a known mistake
    assert [d["id"] for d in result["diagnosis"]] == ["closest_mistake", "error_profile"]
    closest = result["diagnosis"][0]  # far from every mutant: none is named, the nearest's distance is given
    assert closest["closest"] is None and closest["nearest"] in {m.id for m in catalogue.family("rope")}
    assert closest["max_ratio"] > NEAR_MISS and "no catalogued mistake is close" in closest["evidence"]
