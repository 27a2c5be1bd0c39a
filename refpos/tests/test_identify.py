"""The RoPE fit (refpos/check/shared/fit.py, identify.py, rule_fit.py): what a candidate computed, per pair and whole.

Float64 candidates rotated at arbitrary frequencies and amplitudes are fitted to 1e-6 (ω, relative) and 1e-9
(A) at the probe positions ``refpos golden model`` writes, and the stated bound holds; float32 ports are
within their stated bound; positions that cannot determine a pair are named (aliasing), never guessed; each
rule's keys are recovered from the frequencies they give. Each property is shown to fail on a broken fit.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refpos
from refpos.check.rope.identify import identify_rope
from refpos.check.rope.problem import rope_problem
from refpos.check.rope.rule_fit import fit_rule, pair_bands
from refpos.check.shared import fit as fit_module
from refpos.check.shared.fit import angle_noise, common_offset, fit_pairs
from refpos.golden.cases.rope import model_configs, probe_positions
from refpos.rope.rules import RULES
from refpos.rope.scaling import base_inv_freq
from refpos.tests.ports import float32_rope

CONFIGS = model_configs()


def _rotated(omega: np.ndarray, amplitude: float, positions: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Input pairs ``z`` ``(N, m)`` and the float64 rotation ``A e^{ipω} z``."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((positions.size, omega.size)) + 1j * rng.standard_normal((positions.size, omega.size))
    return z, amplitude * np.exp(1j * positions[:, None] * omega[None, :]) * z


@settings(max_examples=40, deadline=None)
@given(m=st.integers(2, 48), seed=st.integers(0, 2**16), log_low=st.floats(-7.0, -1.0),
       amplitude=st.floats(0.25, 4.0), limit=st.sampled_from([4096, 131072, 1048576]))
def test_float64_frequencies_to_1e_6_and_amplitudes_to_1e_9_at_the_probe_positions(m, seed, log_low, amplitude,
                                                                                      limit):
    positions = probe_positions(limit, limit // 16, f"fit-{seed}")
    omega = np.sort(10.0 ** np.random.default_rng(seed).uniform(log_low, math.log10(3.0), m))[::-1]
    z, y = _rotated(omega, amplitude, positions, seed)
    fits = fit_pairs(z, y, positions, "float64", omega)
    assert fits.rotation.all(), fits.notes
    np.testing.assert_array_less(np.abs(fits.omega - omega), 1e-6 * omega)
    np.testing.assert_array_less(np.abs(fits.amplitude - amplitude), 1e-9)
    assert np.all(np.abs(fits.omega - omega) <= fits.omega_bound)  # the stated bound holds


def test_the_float64_property_fails_on_a_fit_that_does_not_unwrap(monkeypatch):
    """Meta: angles taken as atan2 returns them (no 2π turns added) miss ω by far more than 1e-6."""
    positions = probe_positions(131072, 8192, "fit-meta")
    omega = np.array([1.0, 0.1, 0.01])
    z, y = _rotated(omega, 1.0, positions, 0)
    monkeypatch.setattr(fit_module, "wrap", lambda angle: angle)
    fits = fit_pairs(z, y, positions, "float64", omega)
    assert not np.all(np.abs(fits.omega - omega) < 1e-6 * omega)


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "microsoft/Phi-3.5-mini-instruct",
                                   "deepseek-ai/DeepSeek-V3"])
def test_float32_ports_are_within_their_stated_bound(model):
    """A float32 port (float32 ω, p·ω, cos/sin, products) is fitted within the bound the fit states for float32;
    for these models at their probe positions that bound is below 1e-4 of ω on every pair (7.3e-5 at most:
    Llama-3.1's slowest pair, ω = 3.1e-7)."""
    rope = refpos.models.from_hf_config(CONFIGS[model]["config"])
    positions = probe_positions(rope.max_position_embeddings or 131072, rope.original_max_position_embeddings,
                                model)
    omega, factor = (np.asarray(v) if i == 0 else float(v) for i, v in
                     enumerate(refpos.rope_frequencies(rope, seq_len=int(positions.max()) + 1, xp="numpy")))
    x = np.random.default_rng(1).standard_normal((positions.size, rope.head_dim))
    y = float32_rope(x, positions, rope, omega, factor).astype(np.float64)
    u_in, v_in, u_out, v_out = refpos.rope.forms.pair_channels(rope)
    fits = fit_pairs(x[:, u_in] + 1j * x[:, v_in], y[:, u_out] + 1j * y[:, v_out], positions, "float32", omega)
    assert fits.rotation.all()
    assert np.all(np.abs(fits.omega - omega) <= fits.omega_bound)
    assert np.all(fits.omega_bound <= 1e-4 * omega)
    assert np.all(np.abs(fits.amplitude - factor) <= 2 * fits.amplitude_bound)
    # declared float64, the same port is not one frequency per pair: its float32 angles are noise to float64
    assert not fit_pairs(x[:, u_in] + 1j * x[:, v_in], y[:, u_out] + 1j * y[:, v_out], positions, "float64",
                         omega).rotation.all()


def test_angle_noise_is_the_tolerance_per_radian():
    """η_j(p) − √2·a₀ is the tolerance's angle bound of pair j alone (one pair: the same number), its largest over
    the pairs the bound of them all; a₀ is the float32 storage rounding of a unit pair, 4 ulps."""
    from refpos.golden.exact import tolerance

    p = np.array([0, 7, 1000, 131071])
    a0 = math.sqrt(2) * 4 * 2.0**-23
    for dtype in ("float32", "float64", "bfloat16"):
        for w in (1.0, 0.3, 1e-4):
            alone = angle_noise(dtype, p, np.array([w]))[:, 0]
            storage = alone[0]
            np.testing.assert_allclose(alone - storage, tolerance.angle_error_bound(dtype, p, np.array([w])),
                                       rtol=1e-12, atol=4 * np.finfo(float).eps * storage)  # the subtraction
        omega = 500000.0 ** (-np.arange(64) / 64)
        every = angle_noise(dtype, p, omega)
        np.testing.assert_allclose((every - every[0]).max(axis=1), tolerance.angle_error_bound(dtype, p, omega),
                                   rtol=1e-12, atol=4 * np.finfo(float).eps * every[0, 0])
    assert angle_noise("float32", p, np.array([1.0]))[0, 0] == pytest.approx(a0, rel=1e-12)


# ------------------------------------------------------------------------------------------- aliasing
def test_positions_too_far_apart_are_named_not_guessed():
    omega = np.array([1.0, 0.9, 0.01, 1e-4])
    positions = np.array([0, 4, 8, 12, 16])  # gap 4: ω·4 ≥ π for the first two pairs
    z, y = _rotated(omega, 1.0, positions, 3)
    fits = fit_pairs(z, y, positions, "float64", omega)
    assert np.isnan(fits.omega[:2]).all() and all(n.startswith("aliasing") for n in fits.notes[:2])
    np.testing.assert_allclose(fits.omega[2:], omega[2:], rtol=1e-9)
    one = fit_pairs(z[:1], y[:1], positions[:1], "float64", omega)  # one position: no frequency
    assert np.isnan(one.omega).all() and "one position only" in one.notes[0]


def test_a_far_position_the_line_cannot_reach_is_left_out():
    """bfloat16 angles known to ~0.03 rad from p = 0, 1 cannot place p = 10⁶: left out and named."""
    omega = np.array([0.3, 0.001])
    positions = np.array([0, 1, 2, 1_000_000])
    z, y = _rotated(omega, 1.0, positions, 4)
    fits = fit_pairs(z, y, positions, "bfloat16", omega)
    assert "aliasing: positions 1000000 left out" in fits.notes[0]
    assert fits.reach[0].tolist() == [0, 2]


# ------------------------------------------------------------------------------------ whole candidate
def _identify(model: str, candidate_of, dtype: str = "float64"):
    rope = refpos.models.from_hf_config(CONFIGS[model]["config"])
    positions = probe_positions(131072, rope.original_max_position_embeddings, model)
    x = np.random.default_rng(2).standard_normal((positions.size, rope.head_dim))
    y = candidate_of(x, positions, rope)
    return identify_rope(rope, 131072, dtype, x, y, positions, np.arange(positions.size), np.zeros(rope.head_dim),
                         np.zeros(rope.head_dim))


def test_the_pairing_offset_and_attention_factor_are_fitted():
    llama = "meta-llama/Llama-3.1-8B"
    swapped = _identify(llama, lambda x, p, r: np.asarray(refpos.apply_rope(
        x, p, dataclasses.replace(r, layout="interleaved"), seq_len=131072)))
    assert swapped["fitted"]["layout"] == "interleaved" and all(q["rotation"] for q in swapped["pairs"])
    shifted = _identify(llama, lambda x, p, r: np.asarray(refpos.apply_rope(x, p + 3, r, seq_len=131072)))
    assert shifted["fitted"]["position_offset"] == 3
    yarn = "NousResearch/Yarn-Llama-2-13b-64k"
    rope = refpos.models.from_hf_config(CONFIGS[yarn]["config"])
    w, a = refpos.rope_frequencies(rope, seq_len=131072, xp="numpy")
    scaled = _identify(yarn, lambda x, p, r: np.asarray(refpos.apply_rope(x, p, r, seq_len=131072,
                                                                           frequencies=(w, 1.0))))
    assert scaled["fitted"]["attention_factor"] == pytest.approx(1.0, abs=1e-12) and a != 1.0
    backwards = _identify(llama, lambda x, p, r: np.asarray(refpos.apply_rope(
        x, p, r, seq_len=131072, frequencies=(-refpos.rope_frequencies(r, seq_len=131072, xp="numpy")[0], 1.0))))
    assert backwards["fitted"]["rule"] is None and "backwards" in backwards["fitted"]["rule_reason"]
    assert backwards["fitted"]["position_offset"] == 0


@pytest.mark.parametrize("rule", [r for r in RULES.values() if "factor" in r.parameters], ids=lambda r: r.name)
def test_every_rules_inversion_recovers_its_scale(rule):
    """Registry-wide: the record's example with its scale changed is reproduced by keys the inversion proposes."""
    example = dict(rule.example)
    head_dim = 2 * max(example.get("rotary_dim", 64), 32) if rule.spans_head else example.get("rotary_dim", 64)
    rope = refpos.RopeConfig(rope_type=rule.name, head_dim=head_dim, **example)
    scaled = dataclasses.replace(rope, factor=(rope.factor or 2.0) * 1.5)
    omega, factor = refpos.rope_frequencies(scaled, seq_len=200000, xp="numpy")
    own, own_factor = refpos.rope_frequencies(rope, seq_len=200000, xp="numpy")
    if np.array_equal(omega, own):  # the scale sets only A here (LongRoPE): the fit of A reports it
        assert factor != own_factor
        return
    found = fit_rule(rope, 200000, np.asarray(omega), 1e-14 * np.abs(omega) + 1e-300)
    assert found["keys"] is not None, found.get("reason")
    assert found["changed"], "the scaled frequencies are not the config's"


def _config(rope_type: str) -> refpos.RopeConfig:
    examples = {
        "default": {"theta": 500000.0},
        "linear": {"factor": 4.0},
        "ntk": {"factor": 8.0},
        "dynamic": {"factor": 2.0, "max_position_embeddings": 4096},
        "yarn": {"theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768},
        "yarn_log": {"theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768,
                     "extrapolation_factor": 0.5},
        "llama3": {"theta": 500000.0, "factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0},
        "longrope": {"rotary_dim": 8, "original_max_position_embeddings": 4096, "max_position_embeddings": 131072,
                     "short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [1.0, 4.0, 16.0, 32.0]},
        "proportional": {"rotary_dim": 32, "factor": 2.0},
    }
    keys = examples[rope_type]
    head_dim = 64 if "rotary_dim" in keys and rope_type == "proportional" else (8 if "rotary_dim" in keys else 128)
    return refpos.RopeConfig(rope_type=rope_type, head_dim=head_dim, **keys)


#: (rope_type, the candidate's change, seq_len, the keys the fit must report changed)
RULE_CASES = [
    ("default", {"theta": 10000.0}, 4096, {"rope_theta"}),
    ("linear", {"factor": 2.0}, 4096, {"factor"}),
    ("ntk", {"factor": 3.0}, 4096, {"factor"}),
    ("dynamic", {}, 6000, {"seq_len"}),
    ("yarn", {"beta_fast": 16.0}, 131072, {"beta_fast"}),
    ("yarn", {"beta_slow": 2.0}, 131072, {"beta_slow"}),
    ("yarn", {"factor": 8.0}, 131072, {"factor"}),
    ("yarn", {"truncate": False}, 131072, {"truncate"}),
    ("yarn_log", {"extrapolation_factor": 1.0}, 131072, {"extrapolation_factor"}),
    ("llama3", {"factor": 4.0}, 131072, {"factor"}),
    ("llama3", {"original_max_position_embeddings": 4096}, 131072, {"original_max_position_embeddings"}),
    ("llama3", {"theta": 10000.0}, 131072, {"rope_theta"}),
    ("longrope", {}, 4096, {"seq_len"}),
    ("proportional", {"factor": 1.0}, 4096, {"factor"}),
]


@pytest.mark.parametrize(("rope_type", "change", "seq_len", "changed"), RULE_CASES)
def test_the_keys_that_give_the_frequencies_are_recovered(rope_type, change, seq_len, changed):
    rope = _config(rope_type)
    candidate_seq = 8192 if rope_type == "dynamic" else (131072 if rope_type == "longrope" else seq_len)
    omega = np.asarray(refpos.rope_frequencies(dataclasses.replace(rope, **change), seq_len=candidate_seq,
                                               xp="numpy")[0])
    found = fit_rule(rope, seq_len, omega, 1e-15 * np.abs(omega) + 1e-300)
    assert found["keys"] is not None, found.get("reason")
    assert set(found["changed"]) == changed
    again = dict(change)
    for key, (_, value) in found["changed"].items():
        again[{"rope_theta": "theta"}.get(key, key)] = value if not isinstance(value, list) else tuple(value)
    length = again.pop("seq_len", seq_len)
    np.testing.assert_allclose(refpos.rope_frequencies(dataclasses.replace(rope, **again), seq_len=length,
                                                       xp="numpy")[0], omega, rtol=1e-12)


def test_the_llama3_period_for_wavelength_bug_is_reproduced_by_band_factors_over_2pi():
    rope = _config("llama3")
    plain = np.asarray(base_inv_freq(rope.theta, 128, refpos.backend.get_xp("numpy")))
    period, s, l0 = 1 / plain, 8.0, 8192
    g = (l0 / period - 1) / 3
    omega = np.where(period < l0 / 4, plain, np.where(period > l0, plain / s, (1 - g) * plain / s + g * plain))
    found = fit_rule(rope, 131072, omega, 1e-15 * omega)
    assert found["changed"]["low_freq_factor"][1] == pytest.approx(1 / (2 * math.pi), rel=1e-9)
    assert found["changed"]["high_freq_factor"][1] == pytest.approx(4 / (2 * math.pi), rel=1e-9)
    assert fit_rule(rope, 131072, omega * (1 + 1e-6), 1e-12 * omega)["keys"] is None  # no rule: named why


def test_bands_name_each_rules_parts():
    llama = pair_bands(_config("llama3"), 131072)
    assert llama[0].startswith("high") and llama[-1].startswith("low") and any(b.startswith("smooth") for b in llama)
    yarn = pair_bands(_config("yarn"), 131072)
    assert yarn[0].startswith("before the ramp") and yarn[-1].startswith("after") and "on the ramp: blended" in yarn
    assert pair_bands(_config("longrope"), 131072) == ["long_factor[j]"] * 4
    assert pair_bands(_config("longrope"), 4096)[0] == "short_factor[j]"


def test_a_constant_phase_is_not_a_shift():
    omega = np.array([1.0, 0.1, 0.01])
    positions = np.arange(8)
    z, y = _rotated(omega, 1.0, positions, 5)
    fits = fit_pairs(z, 1j * y, positions, "float64", omega)  # every pair turned by π/2 more
    delta, _, why = common_offset(fits)
    assert delta is None and "constant phase" in why


# -------------------------------------------------------------------------------- the CLI's JSON and text
def test_cli_json_pairs_and_text_ranges(tmp_path, capsys):
    from refpos.cli import main
    from refpos.golden.files.npy import npy_bytes

    rope = _config("llama3")
    positions = probe_positions(131072, 8192, "cli")
    x = np.random.default_rng(7).standard_normal((positions.size, 128))
    plain = np.asarray(base_inv_freq(rope.theta, 128, refpos.backend.get_xp("numpy")))
    period, g = 1 / plain, (8192 / (1 / plain) - 1) / 3
    omega = np.where(period < 2048, plain, np.where(period > 8192, plain / 8, (1 - g) * plain / 8 + g * plain))
    y = np.asarray(refpos.apply_rope(x, positions, rope, seq_len=131072, frequencies=(omega, 1.0)))
    config = {"model_type": "llama", "head_dim": 128, "num_attention_heads": 1, "hidden_size": 128,
              "rope_theta": 500000.0, "max_position_embeddings": 131072,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                               "low_freq_factor": 1.0, "high_freq_factor": 4.0}}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf8")
    for name, a in (("x", x), ("p", positions), ("y", y)):
        (tmp_path / f"{name}.npy").write_bytes(npy_bytes(a))
    args = ["check", "rope", "--config", str(tmp_path / "config.json"), "--input", str(tmp_path / "x.npy"),
            "--positions", str(tmp_path / "p.npy"), "--candidate", str(tmp_path / "y.npy"), "--seq-len", "131072"]
    assert main([*args, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert {"index", "omega", "omega_fitted", "amplitude", "amplitude_fitted", "max_error", "ok"} <= set(
        result["pairs"][0])
    assert set(result["fitted"]) >= {"layout", "position_offset", "attention_factor", "rule"}
    # ok is false exactly for the pairs with an element outside the tolerance (computed here independently)
    problem = rope_problem(x, positions, rope, 131072, "float64")
    outside = np.abs(y - problem.reference) > problem.atol()  # (T, D)
    u_out, v_out = refpos.rope.forms.pair_channels(rope)[2:]
    expected = [j for j in range(64) if outside[:, u_out[j]].any() or outside[:, v_out[j]].any()]
    assert [p["index"] for p in result["pairs"] if not p["ok"]] == expected == list(range(29, 44))
    fitted = np.array([p["omega_fitted"] for p in result["pairs"]])
    np.testing.assert_allclose(fitted, omega, rtol=1e-12)
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "29–34  smooth band: blended" in out and "low_freq_factor = 0.159155 (config 1: × 1/2π)" in out
