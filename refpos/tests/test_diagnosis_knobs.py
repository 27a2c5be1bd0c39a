"""The diagnosis points at the knob the candidate got wrong, not at a setting it has right.

* pairs that are no rotation are named as what they are — a sin table ``[sin, −sin]`` (the sin term reflects the
  pair), a reflection, a sign flip, sin and cos exchanged — and every pair stays in the plot;
* a closest mistake is named only within :data:`refpos.check.diagnosis.NEAR_MISS` times its tolerance; farther,
  the report says no catalogued mistake is close, with the distance;
* an equivalence (plain RoPE at θ' = 808523 reproduces ω̂ = θ^(−2j/(d+2))) comes after its structural reading
  (the exponent's denominator is d + 2; the NTK exponent d/(d − 1));
* a ``frequencies`` golden case names what the ``apply`` case of the same model names;
* positions stored in float16 are ``bf16_angles``, and not also ``llama3_band_edges``.

Each test fails on the tree before these changes (the maps, the factor, the readings and the frequency names did
not exist; the float16 positions gave both names).
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.check.case import check_case
from refpos.check.diagnosis import NEAR_MISS, diagnose_rope
from refpos.check.fit_names import frequencies_shown
from refpos.check.identify_text import report_lines
from refpos.check.mistakes import Context, RopeCall
from refpos.check.problem import rope_problem
from refpos.check.rope_mistakes import ROPE_MISTAKES
from refpos.check.run import check_rope
from refpos.golden.manifest import default_golden_dir, find_case, load_manifest

ROOT = default_golden_dir()
LLAMA = "rope/meta-llama--Llama-3.1-8B"


def golden(case_id: str) -> tuple[dict, np.ndarray | None, np.ndarray | None, refpos.RopeConfig]:
    """A committed golden case: the case, its input x and positions (``None`` where it has none), its RoPE."""
    case = find_case(load_manifest(ROOT), case_id)
    arrays = [np.load(ROOT / case["inputs"][k]["file"], allow_pickle=False) if k in case["inputs"] else None
              for k in ("x", "positions")]
    return case, *arrays, refpos.rope_config_from_params(case["parameters"]["rope"])


def ids(result: dict) -> list[str]:
    return [d["id"] for d in result["diagnosis"]]


def llama_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Llama-3.1's apply case: the halves ``u``, ``v`` of x and ``A cos φ``, ``A sin φ`` per pair."""
    case, x, positions, rope = golden(f"{LLAMA}/apply")
    omega, factor = (np.asarray(v) for v in refpos.rope_frequencies(rope, seq_len=case["parameters"]["seq_len"]))
    phi = positions[:, None] * omega
    m = x.shape[-1] // 2
    return x[:, :m], x[:, m:], factor * np.cos(phi), factor * np.sin(phi)


def wrong_table(kind: str) -> np.ndarray:
    """Llama-3.1's apply case computed with a wrong table (half layout: channels u_j, v_j = j, j + 64)."""
    u, v, c, s = llama_tables()
    out = {"sin_reflection": (u * c - v * s, v * c - u * s),  # sin table [sin, −sin] against rotate_half
           "reflection": (u * c + v * s, u * s - v * c),  # z' = e^{iφ} z̄
           "sign_flip": (u * c + v * s, v * c - u * s),  # sin negated
           "sin_cos_swap": (u * s - v * c, v * s + u * c)}[kind]  # sin and cos exchanged
    return np.concatenate(out, axis=-1)


#: each wrong table: the map every pair is fitted as, and the words the report uses for it
NOT_ROTATIONS = {
    "sin_reflection": ("sin_reflection", "not a rotation: the sin term reflects the pair instead of turning it"),
    "reflection": ("reflection", "not a rotation: a reflection, z' = A·e^{iφ}·z̄"),
    "sign_flip": ("rotation", "sin negated (a sign flip): a rotation by −ωp, ω̂ = −ω"),
    "sin_cos_swap": ("rotation", "sin and cos exchanged: a rotation by π/2 − ωp"),
}


@pytest.fixture(scope="module")
def checked() -> dict[str, dict]:
    return {kind: check_case(f"{LLAMA}/apply", wrong_table(kind), golden_dir=ROOT) for kind in NOT_ROTATIONS}


@pytest.mark.parametrize("kind", sorted(NOT_ROTATIONS))
def test_pairs_that_are_not_rotations_are_named_as_such(checked, kind):
    result = checked[kind]
    pair_map, words = NOT_ROTATIONS[kind]
    assert not result["ok"]
    assert {p["map"] for p in result["pairs"]} == {pair_map}, [p["map"] for p in result["pairs"]]
    assert all(p["rotation"] == (pair_map == "rotation") for p in result["pairs"])
    omega = np.array([p["omega"] for p in result["pairs"]])
    fitted = np.array([p["omega_fitted"] for p in result["pairs"]])
    sign = -1 if kind in ("sign_flip", "sin_cos_swap") else 1  # the frequency itself is right, up to its sign
    np.testing.assert_allclose(fitted, sign * omega, rtol=1e-9)
    lines = report_lines(result)
    assert f"  0–63  {words}" in "\n".join(lines), lines
    assert result["fitted"]["layout"] == "half"


def test_every_pair_stays_in_the_plot(checked):
    """Each pair is drawn, whatever the fit found: pairs of another map, turning backwards, or with no ω̂."""
    from refpos.tools.figures import pyplot
    from refpos.tools.plots_fit import plot_identification

    plt = pyplot()
    nothing = {**checked["sign_flip"], "pairs": [{**p, "omega_fitted": None, "map": None, "rotation": False}
                                                 for p in checked["sign_flip"]["pairs"]]}
    for result in (*checked.values(), nothing):
        fig = plt.figure()
        try:
            plot_identification(fig, result)
            left = fig.axes[0]
            drawn = {int(x) for line in left.lines if line.get_linestyle() in ("None", "none")
                     for x in line.get_xdata()}
        finally:
            plt.close(fig)
        assert drawn == {p["index"] for p in result["pairs"]}


def test_a_closest_mistake_is_named_only_within_the_near_miss_factor():
    """The nearest mutant plus a deviation of 3× its tolerance is named closest; at 10⁴× it is not: the report
    says no catalogued mistake is close, and how far the nearest is."""
    _, x, positions, rope = golden(f"{LLAMA}/apply")
    x, positions = x[:12], positions[:12]  # positions 0 … 2049
    pb = rope_problem(x, positions, rope, 131072, "float32")  # one tolerance: no float32 retry
    call = RopeCall(rope, positions, 131072, pb.inv_freq, pb.attention_factor)
    shifted = next(v for v in ROPE_MISTAKES["position_offset"].variants(call, Context(np.arange(12), 0, 2049))
                   if v.rows is None).call.run(x)
    rng = np.random.default_rng(0)
    for factor, named in ((3.0, True), (1e4, False)):
        candidate = shifted + factor * pb.atol() * rng.choice([-1.0, 1.0], shifted.shape)
        found = [d for d in diagnose_rope(pb, candidate) if d["id"] == "closest_mistake"]
        assert len(found) == 1, found
        entry = found[0]
        if named:
            assert entry["closest"] == "position_offset" and 1 < entry["max_ratio"] <= NEAR_MISS, entry
            assert "the closest is position_offset" in entry["evidence"]
        else:
            assert entry["closest"] is None and entry["max_ratio"] > NEAR_MISS, entry
            assert entry["evidence"].startswith("no catalogued mistake is close: the nearest, ")
            assert f"{entry['max_ratio']:.3g}× the float32 tolerance away" in entry["evidence"]


def test_an_exponent_over_d_plus_2_is_read_before_its_equivalent_base():
    case, x, positions, rope = golden("rope/Qwen--Qwen2-7B-Instruct/apply")
    d = rope.rotary_dim
    omega = rope.theta ** (-2 * np.arange(d // 2) / (d + 2))
    y = np.asarray(refpos.apply_rope(x, positions, rope, seq_len=case["parameters"]["seq_len"],
                                     frequencies=(omega, 1.0)))
    result = check_case(case["id"], y, golden_dir=ROOT)
    reading = ("ω̂ = θ^(−2j/(d + 2)): the exponent's denominator is d + 2 = 130 where the rule's is the rotary size "
               "d = 128 (808523 = θ^(d/(d + 2)))")
    assert result["fitted"]["reading"]["reading"] == "exponent_denominator"
    assert f"fit: {reading}; equivalently, default reproduces ω̂ with rope_theta = 808523" in report_lines(result)[-1]
    assert ids(result) == ["wrong_theta", "error_profile"]
    assert result["diagnosis"][0]["evidence"].startswith(f"{reading}; equivalently, ")


def test_an_ntk_exponent_over_d_minus_1_is_read_before_its_equivalent_length():
    case, _, _, rope = golden("rope-boundary/dynamic-ntk/L8192")
    d, s, length = rope.rotary_dim, rope.factor, case["parameters"]["seq_len"]
    ratio = s * length / rope.max_position_embeddings - (s - 1)
    omega = (rope.theta * ratio ** (d / (d - 1))) ** (-2 * np.arange(d // 2) / d)
    result = check_case(case["id"], omega, golden_dir=ROOT, output="inv_freq")
    assert result["fitted"]["reading"]["reading"] == "ntk_exponent"
    line = report_lines(result)[-1]
    assert line.startswith("fit: ω̂ = (θ·r^(d/(d − 1)))^(−2j/d): the NTK exponent is d/(d − 1) = 128/127 where the "
                           "rule's is d/(d − 2) = 128/126 (r = 3); equivalently, dynamic reproduces ω̂ with "), line


def test_a_base_that_is_merely_wrong_has_no_reading():
    """θ' = 700000 is no exponent of θ = 10⁶ over an integer: the equivalence is the answer, with no reading."""
    case, x, positions, rope = golden("rope/Qwen--Qwen2-7B-Instruct/apply")
    other = refpos.rope_config_from_params({**rope.to_params(), "rope_theta": 7e5})
    y = np.asarray(refpos.apply_rope(x, positions, other, seq_len=case["parameters"]["seq_len"]))
    result = check_case(case["id"], y, golden_dir=ROOT)
    assert "reading" not in result["fitted"]
    assert ids(result) == ["wrong_theta", "error_profile"]
    assert report_lines(result)[-1] == "fit: default reproduces ω̂ with rope_theta = 700000 (config 1e+06: × 0.7)"


#: mistakes of Llama-3.1 that change its frequencies: (id, which of the definition's variants)
FREQUENCY_MISTAKES = (("llama3_band_edges", 0), ("unscaled_frequencies", 0), ("double_scaled_frequencies", 0),
                      ("bf16_angles", 0), ("default_theta", 0))


@pytest.mark.parametrize(("mistake", "which"), FREQUENCY_MISTAKES)
def test_the_frequencies_case_names_what_the_apply_case_names(mistake, which):
    case, x, positions, rope = golden(f"{LLAMA}/apply")
    seq_len = case["parameters"]["seq_len"]
    call = RopeCall.of(rope, positions, seq_len)
    variant = ROPE_MISTAKES[mistake].variants(call, Context(np.arange(positions.size), 0, int(positions.max())))[which]
    applied = check_case(f"{LLAMA}/apply", variant.call.run(x), golden_dir=ROOT)
    frequencies = check_case(f"{LLAMA}/frequencies", variant.call.inv_freq, golden_dir=ROOT)
    assert mistake in ids(applied)
    assert ids(frequencies) == [mistake], frequencies["diagnosis"]
    assert frequencies["diagnosis"][0]["evidence"] == f"the frequencies show it: {variant.evidence}"


def test_the_attention_factor_of_a_frequencies_case_is_named():
    yarn = "rope/NousResearch--Yarn-Llama-2-13b-64k/frequencies"
    result = check_case(yarn, np.float64(1.0), golden_dir=ROOT, output="attention_factor")
    assert ids(result) == ["missing_attention_factor"]


def test_positions_stored_in_float16_are_bf16_angles_and_nothing_else():
    case, x, positions, rope = golden(f"{LLAMA}/apply")
    keep = positions < 65504  # float16's largest finite value: beyond it the positions are infinite
    x, positions = x[keep], positions[keep]
    rounded = positions.astype(np.float16).astype(np.int64)  # 2049 → 2048, 8193 → 8192, …
    y = np.asarray(refpos.apply_rope(x, rounded, rope, seq_len=case["parameters"]["seq_len"]))
    result = check_rope(y, x, positions, rope, seq_len=case["parameters"]["seq_len"])
    assert ids(result) == ["bf16_angles", "error_profile"], result["diagnosis"]


def test_a_variant_that_changes_only_pairs_the_fit_did_not_determine_is_not_shown():
    reference = np.array([1.0, 0.5, 0.25])
    variant = np.array([1.0, 0.5, 0.3])  # differs on pair 2 only
    pairs = [{"index": j, "rotation": j < 2, "omega_fitted": w if j < 2 else None, "omega_bound": 1e-9}
             for j, w in enumerate(reference)]
    assert not frequencies_shown(variant, reference, pairs)
    pairs[2] = {"index": 2, "rotation": True, "omega_fitted": 0.3, "omega_bound": 1e-9}
    assert frequencies_shown(variant, reference, pairs)
