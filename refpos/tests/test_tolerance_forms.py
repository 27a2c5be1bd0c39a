"""The tolerance model: every bound of refpos.golden.exact.forms proven against an emulation of its form.

For each form (docs/conventions.md#tolerances) the computation real code performs is emulated in NumPy
(:mod:`refpos.golden.exact.emulations`: float32 and float16 arithmetic for real, bfloat16 by rounding) at
positions up to 2²⁰ and head sizes up to 512, and its error against the float64 reference must lie within
the bound of that form; the measured worst ratio must also be a sizeable part of the bound (a bound 10×
too loose would hide mistakes). The rule the forms replaced (one ``c = 3`` on ``max ω``; two ulps of the
output entry for bfloat16 / float16) is kept here as ``old_rule`` to show the false alarms it raised.
Every catalogued mistake is still caught by the stored golden tolerances at the goldens' probe positions.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.golden.exact import forms
from refpos.golden.exact import tolerance as tol
from refpos.golden.exact.emulations import angles_float32, rotate_half, rotate_half_exact, round_to
from refpos.golden.exact.ulp import ulp

RNG = np.random.default_rng(20)
#: every position to 300, the powers of two to 2²⁰ and their predecessors, and random ones up to 2²⁰
POSITIONS = np.unique(np.concatenate([np.arange(0, 300), 2 ** np.arange(8, 21), 2 ** np.arange(8, 21) - 1,
                                      RNG.integers(0, 2**20 + 1, 300)]))
HEAD_DIMS = (64, 80, 96, 128, 256, 512)
THETAS = (1e4, 1.5e5, 5e5, 1e6, 1e7)
ANGLE_FORMS = forms.admitted("float32", "angles")


def _frequencies(theta: float, d: int, rule: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``(ω, freq_factors)``: plain θ^(−2j/d), or llama3-like (the slow half divided by 8) as per-pair factors."""
    base = theta ** -(np.arange(0, d, 2) / d)
    if rule == "plain":
        return base, None
    factors = np.where(np.arange(d // 2) >= d // 4, 8.0, 1.0)
    return base / factors, factors


def old_rule(dtype: str, positions: np.ndarray, inv_freq: np.ndarray, magnitude: np.ndarray,
             reference: np.ndarray) -> np.ndarray:
    """The rule the forms replaced: ``m·c·p·max ω·u`` (c = 3, float32 path) + 4 ulps₃₂(m), plus two ulps of the
    output entry for bfloat16 / float16 (``(T, n)``)."""
    angle = 3.0 * np.max(inv_freq) * 2.0**-24 * positions  # (T,)
    out = angle[:, None] * magnitude[:, None] + 4 * np.asarray(ulp(magnitude, "float32"))[:, None]
    if dtype in ("bfloat16", "float16"):
        out = out + 2 * np.asarray(ulp(np.abs(reference), dtype))
    return out


def _angle_ratios(form: str) -> tuple[float, float]:
    """(worst per-pair ratio of error to the form's bound, worst ratio to the old rule's angle term)."""
    worst, worst_old = 0.0, 0.0
    for d in HEAD_DIMS:
        for theta in THETAS:
            for rule in ("plain", "scaled"):
                inv_freq, factors = _frequencies(theta, d, rule)
                got = angles_float32(form, POSITIONS, theta, d, factors).astype(np.float64)  # (T, m)
                error = np.abs(got - POSITIONS[:, None] * inv_freq)
                bound = POSITIONS[:, None] * forms.FORMS[form].roundoff * forms.angle_coefficients(
                    forms.FORMS[form], inv_freq)
                assert np.all(error <= bound), (form, d, theta, rule, float(np.max(error / np.maximum(bound, 1e-300))))
                worst = max(worst, float(np.max(error[1:] / bound[1:])))
                old = 3.0 * np.max(inv_freq) * 2.0**-24 * POSITIONS[1:]
                worst_old = max(worst_old, float(np.max(error[1:].max(axis=1) / old)))
    return worst, worst_old


@pytest.mark.parametrize("form", ANGLE_FORMS)
def test_each_angle_form_stays_within_its_bound(form):
    """Pair by pair, ``|δφ| ≤ |p|·u·(c + b·j + e·ln(1/ω_j))·ω_j``: float32 angles of the form, 6 head sizes to 512,
    5 bases, plain and llama3-like scaled tables, positions to 2²⁰. Measured worst ratios (the docs quote
    them): pow 0.72, exp_log 0.68, running_product 0.46."""
    worst, _ = _angle_ratios(form)
    assert worst > 0.3, f"{form}: the bound is {1 / worst:.1f}× the worst error measured, too loose to be derived"


def test_the_running_product_was_a_false_alarm_under_one_constant():
    """ggml's running product errs by up to 6.4·p·max ω·2⁻²⁴ at head size 512 (θ = 1e4): 2.1× what the old
    c = 3 allowed; pow and exp/log stay within it."""
    assert _angle_ratios("running_product")[1] > 2.0
    assert _angle_ratios("pow")[1] < 1.0 and _angle_ratios("exp_log")[1] < 1.0


def test_two_float64_paths_stay_within_the_float64_form():
    """θ^(−2j/d) against exp(−(2j/d)·ln θ), both float64, positions to 2²⁰, head sizes to 512."""
    for d in HEAD_DIMS:
        for theta in THETAS:
            j = np.arange(0, d, 2) / d
            w_pow, w_exp = theta ** (-j), np.exp(-j * np.log(theta))
            error = np.abs(POSITIONS[:, None] * w_exp - POSITIONS[:, None] * w_pow)
            bound = POSITIONS[:, None] * forms.FORMS["float64"].roundoff * forms.angle_coefficients(
                forms.FORMS["float64"], w_pow)
            assert np.all(error <= bound), (d, theta)


STORAGE = [(dtype, storage) for dtype in ("bfloat16", "float16") for storage in forms.admitted(dtype, "storage")]


@pytest.mark.parametrize(("dtype", "storage"), STORAGE, ids=[f"{d}-{s}" for d, s in STORAGE])
def test_each_storage_form_stays_within_its_bound(dtype, storage):
    """The rotated q/k of each storage form, angles by every float32 angle form, inputs of three sizes,
    attention factors 1 and 1.1386, positions to 2²⁰: within ``rope_tolerance`` of these two forms, and
    far outside the old two-ulps-of-the-entry rule where a rotated entry cancels. Measured worst ratios:
    0.82 (fused), 0.83 (input in the dtype), 0.64 (tables in the dtype)."""
    worst, worst_old = 0.0, 0.0
    for angle_form in ANGLE_FORMS:
        for d in (64, 128, 512):
            for theta in (1e4, 1e6):
                for factor in (1.0, 1.1386):
                    inv_freq = theta ** -(np.arange(0, d, 2) / d)
                    x = RNG.standard_normal((POSITIONS.size, d)) * RNG.choice([0.01, 1.0, 30.0], (POSITIONS.size, 1))
                    got = rotate_half(x, angles_float32(angle_form, POSITIONS, theta, d), dtype, storage, factor)
                    want = rotate_half_exact(x, POSITIONS, inv_freq, factor)
                    size = factor * np.sqrt(x[:, : d // 2] ** 2 + x[:, d // 2:] ** 2).max(axis=1)  # (T,)
                    bound = np.asarray(tol.rope_tolerance(dtype, POSITIONS, inv_freq, reference=want,
                                                          magnitude=size[:, None], forms=[angle_form, storage]))
                    error = np.abs(got - want)
                    assert np.all(error <= bound), (angle_form, d, theta, factor, float(np.max(error / bound)))
                    worst = max(worst, float(np.max(error / bound)))
                    worst_old = max(worst_old, float(np.max(error / old_rule(dtype, POSITIONS, inv_freq, size, want))))
    assert worst > 0.3, f"{dtype} {storage}: the bound is {1 / worst:.1f}× the worst error measured"
    assert worst_old > 10.0, "the old rule is expected to reject this correct form where entries cancel"


def test_float32_rotation_stays_within_its_bound():
    """float32 storage (the input cast, float32 tables and rotation) with every angle form."""
    for angle_form in ANGLE_FORMS:
        for d in (64, 512):
            inv_freq = 1e4 ** -(np.arange(0, d, 2) / d)
            x = RNG.standard_normal((POSITIONS.size, d))
            got = rotate_half(x, angles_float32(angle_form, POSITIONS, 1e4, d), "float32", "float32_rotation")
            want = rotate_half_exact(x, POSITIONS, inv_freq)
            size = np.sqrt(x[:, : d // 2] ** 2 + x[:, d // 2:] ** 2).max(axis=1)
            bound = tol.rope_tolerance("float32", POSITIONS, inv_freq, reference=want, magnitude=size[:, None],
                                       forms=[angle_form])
            assert np.all(np.abs(got - want) <= np.asarray(bound)), (angle_form, d)


def test_bfloat16_rounding_is_to_nearest_even():
    """1 + 2⁻⁸ is a tie between 1 and 1 + 2⁻⁷: to the even 1; 1 + 3·2⁻⁸ a tie to the even 1 + 2⁻⁶."""
    values = np.array([1.0, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-8 + 2.0**-20, -1.5, 0.0])
    expected = [1.0, 1.0, 1.0 + 2.0**-6, 1.0 + 2.0**-7, -1.5, 0.0]
    assert round_to(values, "bfloat16").astype(np.float64).tolist() == expected


def test_declared_forms_narrow_the_bound_and_unknown_ones_are_refused():
    w = 1e4 ** -(np.arange(0, 512, 2) / 512)
    every = float(tol.rope_tolerance("float16", np.array([2**20]), w)[0])
    narrow = float(tol.rope_tolerance("float16", np.array([2**20]), w, forms=["pow", "fused_float32"])[0])
    assert narrow < every
    with pytest.raises(ValueError, match="not a form of float32"):
        forms.check_forms("float32", ["tables_in_dtype"])
    with pytest.raises(ValueError, match="forms must name"):
        forms.check_forms("float32", ["ggml"])


def _apply_goldens() -> list[dict]:
    """The golden apply_rope cases at probe positions (the model and boundary cases; the tiny layout vectors
    of docs/rope.md#in-numbers sit at the one position 3)."""
    from refpos.golden.files.manifest import default_golden_dir, load_manifest

    cases = load_manifest(default_golden_dir())["cases"]
    return [c for c in cases if (c["parameters"].get("call") or {}).get("function") == "apply_rope"
            and not c["id"].startswith("rope-layout/")]


@pytest.mark.parametrize("dtype", tol.DTYPES)
def test_every_catalogued_mistake_is_caught_at_the_probe_positions(dtype):
    """Each mutant of refpos check's catalogue (refpos/data/mistakes.toml) that changes the output of a golden
    apply_rope case lies outside the case's stored tolerance for ``dtype`` (every form the dtype admits) at
    its probe positions: the wider bounds of the forms cost no catalogued mistake. (A mutant equal to the
    reference, such as float16 positions below 2048, is no mistake there.)"""
    import refpos
    from refpos.check.rope.diagnosis import _mutants
    from refpos.check.rope.problem import rope_problem
    from refpos.golden.exact.entries import compare
    from refpos.golden.files.manifest import default_golden_dir, load_arrays

    root, checked = default_golden_dir(), 0
    for case in _apply_goldens():
        params = case["parameters"]
        inputs, reference = load_arrays(root, case, "inputs"), load_arrays(root, case, "outputs")["y"]
        problem = rope_problem(inputs["x"], inputs["positions"], refpos.rope_config_from_params(params["rope"]),
                               params["seq_len"], dtype)
        for mutant in _mutants(problem):
            wrong = mutant.build()
            if np.array_equal(wrong, problem.reference):  # the same computation: no mistake on these inputs
                continue
            checked += 1
            result = compare(wrong, reference, case["outputs"]["y"]["tolerance"], dtype)
            assert not result["ok"], f"{case['id']}: {mutant.id} ({mutant.evidence}) passes the {dtype} tolerance"
    assert checked > 1000


def test_the_docs_table_of_forms_is_the_registry():
    """docs/conventions.md#tolerances lists the forms as refpos.golden.exact.forms states them."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "conventions.md").read_text(encoding="utf-8")
    table = page.split("<!-- forms:begin -->\n", 1)[1].split("\n<!-- forms:end -->", 1)[0]
    assert table == forms.markdown_table(), "re-render the table from refpos.golden.exact.forms.markdown_table()"
