"""refpos.golden.tolerance: ulps, the dtype/position rule (docs/conventions.md#tolerances), ``refpos tolerance``."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.cli import main
from refpos.golden import tolerance as tol


def _f32_rope(x, positions, base, d, factor=1.0):
    """A correct float32 RoPE path in the HF style (float32 inv_freq, positions, product, cos, apply)."""
    inv = np.float32(1.0) / (np.float32(base) ** (np.arange(0, d, 2, dtype=np.float32) / np.float32(d)))
    ang = positions[:, None].astype(np.float32) * inv[None, :]  # (T, d/2)
    c = np.cos(ang) * np.float32(factor)
    s = np.sin(ang) * np.float32(factor)
    x32 = x.astype(np.float32)
    m = d // 2
    return np.concatenate([x32[:, :m] * c - x32[:, m:] * s, x32[:, m:] * c + x32[:, :m] * s], -1)


def _f64_rope(x, positions, inv_freq, factor=1.0):
    ang = positions[:, None].astype(np.float64) * inv_freq[None, :]  # (T, d/2)
    c, s = np.cos(ang), np.sin(ang)
    m = inv_freq.size
    return factor * np.concatenate([x[:, :m] * c - x[:, m:] * s, x[:, m:] * c + x[:, :m] * s], -1)


def _pair_magnitude(x, factor=1.0):
    m = x.shape[-1] // 2
    norm = np.sqrt(x[:, :m] ** 2 + x[:, m:] ** 2)
    return factor * np.concatenate([norm, norm], -1)


@pytest.mark.parametrize(
    ("dtype", "value", "expected"),
    [
        ("bfloat16", 1.0, 2.0**-7), ("bfloat16", 3.0, 2.0**-6), ("bfloat16", 16.0, 0.125),
        ("bfloat16", 1721.0, 8.0), ("float16", 1.0, 2.0**-10), ("float16", 1000.0, 0.5),
        ("float32", 1.0, 2.0**-23), ("float32", 0.999, 2.0**-24), ("float64", 1.0, 2.0**-52),
        ("float64", 2.0**-1074, 2.0**-1074), ("float64", 0.0, 2.0**-1074), ("float16", 0.0, 2.0**-24),
    ],
)
def test_ulp_values(dtype, value, expected):
    assert float(to_numpy(tol.ulp([value], dtype))[0]) == expected


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_ulp_float64_equals_numpy_spacing(v):
    # numpy's spacing is the ulp of float64 (away from zero), exactly a power of two
    assert float(to_numpy(tol.ulp([v], "float64"))[0]) == float(np.spacing(np.float64(v)))


def test_ulp_on_backend(xp):
    u = tol.ulp(xp.asarray([1.0, 3.0, 0.5]), "float32")
    assert to_numpy(u).tolist() == [2.0**-23, 2.0**-22, 2.0**-24]


def test_ulp_at_the_ends_of_the_range(xp):
    """The largest float64 has spacing 2**971 (its log2 rounds up to 1024, which the exact comparison with
    2**1024 = inf corrects); inf has spacing inf and NaN stays NaN (the powers-of-two lookup must not see
    their exponents: casting inf or NaN to an integer index is undefined)."""
    big = float(np.finfo(np.float64).max)
    u = to_numpy(tol.ulp(xp.asarray([big, math.inf, -math.inf, math.nan]), "float64"))
    assert u[0] == 2.0**971
    assert u[1] == u[2] == math.inf and math.isnan(u[3])


@pytest.mark.parametrize("dtype", tol.DTYPES)
def test_ulp_numpy_fast_form_equals_the_readable_form(dtype):
    """NumPy reads the exponent from the float64 bits; the readable form (run here on array-api-strict) uses log2 and
    exact powers-of-two corrections. Equal, on every binade, zero, subnormals, the ends and inf/NaN."""
    import array_api_strict

    rng = np.random.default_rng(7)
    values = np.ldexp(rng.uniform(0.5, 1.0, 4000), rng.integers(-1080, 1025, 4000))  # every binade
    edges = [0.0, -0.0, 2.0**-1074, 2.0**-1022, 2.0**-149, 2.0**-126, 2.0**-24, 2.0**-14, 1.0, 1.0 - 2.0**-53,
             65504.0, float(np.finfo(np.float64).max), math.inf, -math.inf, math.nan]
    values = np.concatenate([values, -values[:100], edges])
    fast = to_numpy(tol.ulp(values, dtype))
    readable = to_numpy(tol.ulp(array_api_strict.asarray(values), dtype))
    np.testing.assert_array_equal(fast, readable)


def test_check_dtype_aliases_and_errors():
    assert tol.check_dtype("bf16") == "bfloat16"
    assert tol.check_dtype("fp16") == "float16"
    assert tol.check_dtype(np.dtype("float32")) == "float32"
    with pytest.raises(ValueError, match="dtype must be one of"):
        tol.check_dtype("int8")


def test_value_tolerance_per_dtype(xp):
    ref = xp.asarray([1.0, -4.0, 0.0], dtype=xp.float64)
    assert to_numpy(tol.value_tolerance("float64", ref)).tolist() == [1e-13, 4e-13, 0.0]
    assert to_numpy(tol.value_tolerance("float32", ref)).tolist() == [1e-6, 4e-6, 0.0]
    # bf16: 2 ulps of the reference, never absolute-only: 2·2^-7 at 1, 2·2^-5 at 4
    assert to_numpy(tol.value_tolerance("bfloat16", ref))[:2].tolist() == [2.0**-6, 2.0**-4]
    # scale floors entries that cancel to zero
    assert to_numpy(tol.value_tolerance("float64", ref, scale=2.0)).tolist() == [2e-13, 4e-13, 2e-13]


def test_integer_tolerance_is_exact():
    assert np.all(to_numpy(tol.integer_tolerance(np.array([3, 4, 5]))) == 0)


def test_probability_tolerance():
    """u·(3·max|logit| + 3n + 4): the stored logits' 2uM, log-sum-exp's uM, the arithmetic of a row of n."""
    assert tol.probability_tolerance("float32", np.array([[10.0, -3.0]])) == pytest.approx(2.0**-24 * (30 + 6 + 4))
    assert tol.probability_tolerance("float64", np.array([[1.0]])) == pytest.approx(2.0**-53 * (3 + 3 + 4))
    # a masked −inf is no stored magnitude
    assert tol.probability_tolerance("float32", np.array([-np.inf, 2.0])) == pytest.approx(2.0**-24 * (6 + 6 + 4))


def test_probability_tolerance_admits_both_float32_softmax_forms():
    """Rows of logits up to 1060 (a shift of 1000 on N(0, 20) logits): a float32 softmax, max-subtracted or by
    log-sum-exp, stays within the bound against float64; a softmax that forgets to normalise does not."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for n in (1, 2, 5, 9, 64):
        for shift in (0.0, -484.0, 1000.0):
            z = rng.standard_normal((200, n)) * 20 + shift
            exact = np.exp(z - z.max(-1, keepdims=True))
            exact /= exact.sum(-1, keepdims=True)
            z32 = z.astype(np.float32)
            e = np.exp(z32 - z32.max(-1, keepdims=True))
            subtracted = e / e.sum(-1, keepdims=True)
            m = z32.max(-1, keepdims=True)
            lse = m + np.log(np.exp(z32 - m).sum(-1, keepdims=True))
            logsumexp = np.exp(z32 - lse)
            bound = tol.probability_tolerance("float32", z)
            for form in (subtracted, logsumexp):
                assert form.dtype == np.float32
                worst = max(worst, float(np.abs(form - exact).max()) / bound)
            assert np.abs(e - exact).max() > bound or n == 1  # unnormalised
    assert worst <= 1.0, worst


def test_rope_tolerance_grows_linearly_with_position():
    w = np.array([1.0, 0.1, 1e-4])
    atol = to_numpy(tol.rope_tolerance("float32", np.array([0, 1000, 2000]), w))
    # atol(p) = floor + p·max_j k_j ω_j·2^-24, here pow's k_0 = 4 at ω_0 = 1: equal increments
    assert atol[2] - atol[1] == pytest.approx(atol[1] - atol[0])
    assert atol[1] - atol[0] == pytest.approx(4 * 1000 * 2.0**-24)
    # float64: the same law with c = 4 and 2^-53, floor 1e-13 of the magnitude
    atol64 = to_numpy(tol.rope_tolerance("float64", np.array([0, 1000]), w))
    assert atol64[0] == pytest.approx(1e-13)
    assert atol64[1] - atol64[0] == pytest.approx(4 * 1000 * 2.0**-53)


def test_two_correct_float64_forms_agree_within_float64_tolerance():
    # θ^(−2j/d) and exp(−2j/d·ln θ): equal in exact arithmetic, a few ulps apart in float64
    rng = np.random.default_rng(3)
    positions = np.concatenate([rng.integers(0, 131072, 500), [131071]])
    for theta in (1e4, 5e5, 1e6):
        j = np.arange(0, 128, 2)
        w_pow, w_exp = theta ** (-j / 128), np.exp(-(j / 128) * np.log(theta))
        ref = np.cos(positions[:, None] * w_pow)
        other = np.cos(positions[:, None] * w_exp)
        atol = to_numpy(tol.rope_tolerance("float64", positions, w_pow, reference=ref))
        assert np.all(np.abs(other - ref) <= atol)


@pytest.mark.parametrize(("base", "d", "factor"), [(1e4, 128, 1.0), (5e5, 64, 1.0), (1e6, 128, 1.1902380714238083)])
def test_correct_float32_rope_passes_float32_and_fails_float64(base, d, factor):
    rng = np.random.default_rng(7)
    positions = np.concatenate([np.arange(0, 64), rng.integers(0, 131072, 256), [131071]])
    x = rng.standard_normal((positions.size, d))
    inv_freq = base ** (-np.arange(0, d, 2) / d)
    ref = _f64_rope(x, positions, inv_freq, factor)
    cand = _f32_rope(x, positions, base, d, factor).astype(np.float64)
    mag = _pair_magnitude(x, factor)
    atol32 = to_numpy(tol.rope_tolerance("float32", positions, inv_freq, reference=ref, magnitude=mag,
                                         forms=["pow"]))  # the form _f32_rope takes
    err = np.abs(cand - ref)
    assert np.all(err <= atol32), f"worst ratio {np.max(err / atol32):.3f}"
    # measured ratio ≥ 0.15 of the budget at long positions (margin, not slack of 10×)
    assert np.max(err / atol32) > 0.15
    atol64 = to_numpy(tol.rope_tolerance("float64", positions, inv_freq, reference=ref, magnitude=mag))
    assert np.any(err > atol64)


def test_bf16_inv_freq_is_a_bug_not_a_tolerance():
    # bf16-rounded inv_freq moves cos by O(0.1) by p = 256 (docs/diagnosis.md): far outside float32 and bf16
    d, base = 128, 1e4
    w = base ** (-np.arange(0, d, 2) / d)
    bits = w.astype(np.float32).view(np.uint32)
    w_bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32).astype(np.float64)
    positions = np.arange(200, 264)
    ref = np.cos(positions[:, None] * w[None, :])
    cand = np.cos(positions[:, None] * w_bf16[None, :])
    for dtype in ("float32", "bfloat16"):
        atol = to_numpy(tol.rope_tolerance(dtype, positions, w, reference=ref))
        assert np.any(np.abs(cand - ref) > atol)


def test_rope_tolerance_on_backend(xp):
    p = xp.asarray([0, 1, 2048], dtype=xp.int64)
    w = xp.asarray([1.0, 0.5], dtype=xp.float64)
    atol = tol.rope_tolerance("bfloat16", p, w, reference=xp.ones((3, 2), dtype=xp.float64), magnitude=2.0)
    assert atol.shape == (3, 2)
    a = to_numpy(atol)
    assert np.all(a[2] > a[1]) and np.all(a[1] > a[0])


def test_describe_rules_are_json():
    for rule in ("value", "rope", "integer", "probability"):
        for dtype in tol.DTYPES:
            d = tol.describe(rule, dtype)
            assert d["rule"] == rule and d["dtype"] == dtype and d["reason"]
            json.dumps(d)
    assert tol.describe("rope", "float32")["forms"] == ["pow", "exp_log", "running_product", "float32_rotation"]
    with pytest.raises(ValueError, match="rule must be one of"):
        tol.describe("nope", "float64")


def test_cli_tolerance_prints_table(capsys):
    assert main(["tolerance", "--dtype", "float32", "--max-position", "131072"]) == 0
    out = capsys.readouterr().out
    assert "131072" in out and "float32" in out
    assert "1e-05 rejects correct float32 code from position ≈ 167" in out


def test_cli_tolerance_json(capsys):
    assert main(["tolerance", "--dtype", "bf16", "--max-position", "4096", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["dtype"] == "bfloat16"
    rows = result["positions"]
    assert rows[0]["position"] == 0 and rows[-1]["position"] == 4096
    assert all(a["cos_sin_atol"] <= b["cos_sin_atol"] for a, b in itertools.pairwise(rows))


def test_cli_tolerance_bad_input_exits_2(capsys):
    assert main(["tolerance", "--dtype", "int4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dtype must be one of" in err
    assert main(["tolerance", "--max-position", "-1"]) == 2


def test_cli_tolerance_from_a_config(tmp_path, capsys):
    from refpos.golden.rope_cases import model_configs

    configs = model_configs()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(configs["microsoft/Phi-3.5-mini-instruct"]["config"]), encoding="utf8")
    assert main(["tolerance", "--config", str(path), "--max-position", "131072", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["attention_factor"] == pytest.approx(1.1902380714238083)
    assert result["max_inv_freq"] == 1.0  # short factor 1.0 on pair 0
    path.write_text(json.dumps(configs["google/gemma-3-12b-it (text_config)"]["config"]), encoding="utf8")
    assert main(["tolerance", "--config", str(path)]) == 0  # per-layer-type config: every layer's ω
    assert "full_attention: linear" in capsys.readouterr().out
    path.write_text(json.dumps({"model_type": "llama", "rope_scaling": {"rope_type": "yarn"}}), encoding="utf8")
    assert main(["tolerance", "--config", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("dtype", tol.DTYPES)
def test_correct_error_stays_inside_the_tolerance(dtype: str):
    """What a correct implementation shows (correct_error) is never outside the bound (rope_tolerance), so a
    summary drawn from the first is consistent with the table of the second."""
    positions = np.unique(np.concatenate([np.arange(0, 300), 2 ** np.arange(9, 18)]))
    for inv_freq in (np.array([1.0]), np.array([0.25, 1e-3])):
        typical = np.asarray(tol.correct_error(dtype, positions, inv_freq))
        bound = np.asarray(tol.rope_tolerance(dtype, positions, inv_freq))
        assert np.all(typical <= bound), dtype


@pytest.mark.parametrize("dtype", tol.DTYPES)
@pytest.mark.parametrize("atol", [1e-5, 1e-6, 1e-3])
def test_first_rejected_position_is_where_the_correct_error_passes_atol(dtype: str, atol: float):
    first = tol.first_rejected_position(dtype, atol, [1.0], 10**15)
    assert first is not None
    errors = np.asarray(tol.correct_error(dtype, np.array([max(first - 1, 0), first]), np.array([1.0])))
    assert errors[1] > atol
    assert first == 0 or errors[0] <= atol
    if dtype in ("bfloat16", "float16") and atol < 2.0 ** -12:
        assert first == 0  # the output's own rounding is larger than atol
    assert tol.first_rejected_position(dtype, atol, [1.0], max(first - 1, 0)) in (None, 0)


@pytest.mark.parametrize("dtype", tol.DTYPES)
def test_cli_tolerance_summary_follows_its_table(dtype: str, capsys):
    """For every dtype the fixed-atol summary comes from the dtype's own model (bfloat16 is not float32's
    168), never claims rejection where the table's own atol is below the fixed one, and the frequency
    promise is printed."""
    assert main(["tolerance", "--dtype", dtype, "--max-position", "131072", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = result["positions"]
    for atol, first in result["fixed_atol_rejects_correct_code_from"].items():
        assert first == tol.first_rejected_position(dtype, float(atol), [1.0], 131072)
        if first is not None:  # from there on the table admits more than the fixed atol
            assert all(r["cos_sin_atol"] > float(atol) for r in rows if r["position"] >= first), (dtype, atol)
    low = dtype in ("bfloat16", "float16")
    assert (result["fixed_atol_rejects_correct_code_from"]["1e-05"] == 0) == low
    assert main(["tolerance", "--dtype", dtype, "--max-position", "4096"]) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = [line for line in lines if "a fixed atol of 1e-05" in line]
    assert len(summary) == 1 and f"correct {dtype} code" in summary[0]
    assert ("from position 0" in summary[0]) == low
    promise = [line for line in lines if line.startswith("  frequencies: ")]
    assert len(promise) == 1
    if dtype != "float64":
        assert "bf16_angles" in promise[0] and "16 rad" in promise[0], promise  # 4096·1·2⁻⁸
