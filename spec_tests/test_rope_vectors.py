"""Spec: exact RoPE test vectors (every rope_type, layouts, partial rotary), through the adapter.

Tolerance: the vectors are float64 evaluations of the formulas of docs/rope.md and docs/extrapolation.md;
a float64 re-implementation matches them to a few ulps (operation order moves the last digit), hence
``rtol = 1e-13`` (docs/conventions.md#tolerances).
Adapters declaring a lower precision get the dtype rule of ``support.tolerance`` / ``assert_close``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from rope_support import model_configs
from support import assert_close, assert_frequencies, assert_quoted, assert_within, cases, require, tolerance

LLAMA2 = {"rope_type": "default", "rope_theta": 10000.0, "head_dim": 128}
LLAMA31 = {"rope_type": "llama3", "rope_theta": 500000.0, "head_dim": 128, "factor": 8.0, "low_freq_factor": 1.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
DYNAMIC = {"rope_type": "dynamic", "rope_theta": 10000.0, "head_dim": 128, "factor": 2.0,
           "max_position_embeddings": 4096}
TINY = {"rope_type": "default", "rope_theta": 10000.0, "head_dim": 8}
X8 = np.arange(1.0, 9.0) / 8


@pytest.fixture(scope="module")
def phi_factors():
    """(short_factor, long_factor) of the Phi models in model_configs.json."""
    return {name: (entry["config"]["rope_scaling"]["short_factor"], entry["config"]["rope_scaling"]["long_factor"])
            for name, entry in model_configs().items() if entry["config"]["model_type"] == "phi3"}


def close(actual, expected, impl, what=""):
    assert_within(actual, expected, what=what, **tolerance(impl))


# --------------------------------------------------------------------------------- default
def test_llama2_default_frequencies(impl):
    inv, a = require(impl, "rope_frequencies")(LLAMA2)
    assert inv.shape == (64,)
    close(inv[[0, 1, 63]], [1.0, 0.8659643233600653, 1.1547819846894582e-04], impl)
    assert a == 1.0


@pytest.mark.parametrize(("p", "c0", "s0", "c63", "s63"), cases("p, c0, s0, c63, s63", [
    (1, 0.5403023058681398, 0.8414709848078965, 0.9999999933323929, 1.154781982122914e-4),
    (4095, -0.0659759965580649, -0.9978212103769744, 0.8902588121830826, 0.4554549893571998),
    (100000, -0.9993608074382124, 0.03574879797201651, 0.5246003038823687, -0.8513486484199798),
], shown="p"))
def test_llama2_cos_sin(impl, p, c0, s0, c63, s63):
    cos, sin = require(impl, "rope_cos_sin")(np.array([p]), LLAMA2)
    assert cos.shape == sin.shape == (1, 128)
    got = np.array([cos[0, 0], sin[0, 0], cos[0, 63], sin[0, 63]])
    assert_close(got, np.array([c0, s0, c63, s63]), impl, "phase", positions=np.full(4, p), what=f"p={p}")
    # half layout: channel j + 64 repeats channel j
    np.testing.assert_array_equal(cos[0, 64:], cos[0, :64])


# --------------------------------------------------------------------------------- llama3
def test_llama31_frequencies(impl):
    inv, a = require(impl, "rope_frequencies")(LLAMA31)
    base = 500000.0 ** (-(np.arange(0, 128, 2) / 128))
    blend = [0.8281684118371798, 0.6437431331275951, 0.49350712273197117, 0.3711222795178447, 0.2714254770727862,
             0.19021074364065016]  # ω_j / θ^(−2j/d) of pairs 29-34
    expected = np.r_[base[:29], base[29:35] * blend, base[35:] / 8]  # unchanged, blended, divided by 8
    assert_frequencies(inv, expected, impl, what="Llama 3.1 ω")
    assert_frequencies(inv[[1, 40, 63]], expected, impl, pairs=[1, 40, 63], what="ω quoted")
    # the formula is the quoted float64 numbers (a re-derivation: rtol 1e-13)
    assert_within(expected[[1, 40, 63]], [0.8146172338565447, 3.428102195952591e-05, 3.068925988914511e-07],
                  rtol=1e-13)
    assert_within(expected[29:35], [0.002166570763503359, 0.0013718935677611381, 0.0008567514129196324,
                                    0.0005248461609929547, 0.00031269375038406517, 0.00017850781276799638], rtol=1e-13)
    assert a == 1.0
    cos, sin = require(impl, "rope_cos_sin")(np.array([100000]), LLAMA31)
    assert_close(np.array([cos[0, 63], sin[0, 63]]), np.array([0.999529121622777, 0.030684442768282773]),
                 impl, "phase", positions=np.full(2, 100000))


def test_llama32_bands(impl):
    rope = {**LLAMA31, "head_dim": 64, "factor": 32.0}
    inv, _ = require(impl, "rope_frequencies")(rope)
    ratio = inv / 500000.0 ** (-(np.arange(0, 64, 2) / 64))
    assert_within(ratio[:15], 1.0, rtol=tolerance(impl)["rtol"])
    assert np.all((ratio[15:18] < 1.0) & (ratio[15:18] > 1 / 32))
    assert_within(ratio[18:], 1 / 32, rtol=tolerance(impl)["rtol"])


# --------------------------------------------------------------------------------- dynamic
@pytest.mark.parametrize(("seq_len", "w1", "w63"), cases("seq_len, w1, w63", [
    (4096, 0.8659643233600653, 1.1547819846894582e-4),
    (4097, 0.865957613371064, 1.1542184014856078e-4),
    (5000, 0.8609532721153139, 8.011495611937704e-5),
    (6000, 0.8569756075131864, 5.984295305273306e-5),
    (8192, 0.8509942913412162, 3.849273282298194e-5),
    (9000, 0.8493269866249548, 3.4018893910299344e-5),
], shown="seq_len"))
def test_dynamic_ntk(impl, seq_len, w1, w63):
    inv, a = require(impl, "rope_frequencies")(DYNAMIC, seq_len=seq_len)
    close(inv[[1, 63]], [w1, w63], impl, what=f"seq_len={seq_len}")
    assert a == 1.0


def test_dynamic_vllm_static_rule(impl):
    inv, _ = require(impl, "rope_frequencies")({**DYNAMIC, "dynamic_rule": "vllm_static"}, seq_len=10)
    theta = 10000.0 * 3 ** (64 / 63)  # 30527.7367488067 for every L
    close(inv, theta ** (-(np.arange(0, 128, 2) / 128)), impl)


# --------------------------------------------------------------------------------- YaRN
YARN = [
    ("qwen2.5", dict(rope_theta=1e6, head_dim=128, factor=4.0, original_max_position_embeddings=32768),
     (23, 40), 3.102344401879299e-07, 1.138629436111989),
    ("deepseek-v3", dict(rope_theta=1e4, head_dim=64, factor=40.0, original_max_position_embeddings=4096,
                         mscale=1.0, mscale_all_dim=1.0), (10, 23), 3.33380358040831e-06, 1.0),
    ("gpt-oss", dict(rope_theta=1.5e5, head_dim=64, factor=32.0, original_max_position_embeddings=4096,
                     truncate=False), (8.092779115512402, 17.39802450158856), 3.0235114281192144e-07,
     1.3465735902799727),
    ("yarn-llama-2-13b-64k", dict(rope_theta=1e4, head_dim=128, factor=16.0, original_max_position_embeddings=4096),
     (20, 46), None, 1.2772588722239782),
]


@pytest.mark.parametrize(("name", "params", "bounds", "w_last", "a"), YARN, ids=[y[0] for y in YARN])
def test_yarn(impl, name, params, bounds, w_last, a):
    rope = {"rope_type": "yarn", **params}
    inv, got_a = require(impl, "rope_frequencies")(rope)
    d, s = params["head_dim"], params["factor"]
    ratio = inv / params["rope_theta"] ** (-(np.arange(0, d, 2) / d))
    lo, hi = bounds
    j = np.arange(d // 2)
    assert_within(ratio[j <= lo], 1.0, rtol=tolerance(impl)["rtol"])
    assert_within(ratio[j >= hi], 1 / s, rtol=tolerance(impl)["rtol"])
    ramp = np.clip((j - lo) / (hi - lo), 0, 1)  # the blend between the bounds
    close(ratio, (1 - ramp) + ramp / s, impl, what="ratio")
    if w_last is not None:
        close(inv[-1:], [w_last], impl)
    close(np.array([got_a]), np.array([a]), impl, what="attention factor")


def test_yarn_named_ratios(impl):
    """Ratios ω'/ω quoted to six decimals: each within half a unit of its last digit plus the dtype rule."""
    f = require(impl, "rope_frequencies")
    oss = {"rope_type": "yarn", **YARN[2][1]}
    ratio = f(oss)[0] / 1.5e5 ** (-(np.arange(0, 64, 2) / 64))
    assert_quoted(ratio[9:18], ["0.905551", "0.801443", "0.697335", "0.593227", "0.489119", "0.385011", "0.280903",
                                "0.176795", "0.072688"], impl, what="gpt-oss ramp ratios")
    ds = {"rope_type": "yarn", **YARN[1][1]}
    ratio = f(ds)[0] / 1e4 ** (-(np.arange(0, 64, 2) / 64))
    # the ramp divides by hi − lo, bounds that are logarithms (the correction dimensions), and the ratio
    # divides two computed frequencies: 100× the dtype's rtol (ratios down to 0.1, so atol-free)
    assert_within(ratio[11:23], 1 - 0.075 * np.arange(1, 13), rtol=100 * tolerance(impl)["rtol"])
    yl = {"rope_type": "yarn", **YARN[3][1]}
    ratio = f(yl)[0] / 1e4 ** (-(np.arange(0, 128, 2) / 128))
    assert_quoted(ratio[[21, 45]], ["0.963942", "0.098558"], impl, what="yarn-llama-2 ratios")


def test_deepseek_softmax_multiplier(impl):
    mult = require(impl, "rope_softmax_multiplier")
    v3 = {"rope_type": "yarn", **YARN[1][1]}
    close(np.array([mult(v3)]), np.array([1.8738542070926265]), impl)
    close(np.array([192**-0.5 * mult(v3)]), np.array([0.1352337788608801]), impl)
    v2 = {**v3, "mscale": 0.707, "mscale_all_dim": 0.707}
    close(np.array([mult(v2)]), np.array([1.5896261651208736]), impl)
    assert mult({"rope_type": "yarn", **YARN[0][1]}) == 1.0  # no mscale_all_dim: no multiplier


# --------------------------------------------------------------------------------- LongRoPE
def test_longrope_phi35(impl, phi_factors):
    short, long = phi_factors["microsoft/Phi-3.5-mini-instruct"]
    rope = {"rope_type": "longrope", "rope_theta": 1e4, "head_dim": 96, "original_max_position_embeddings": 4096,
            "max_position_embeddings": 131072, "short_factor": short, "long_factor": long}
    f = require(impl, "rope_frequencies")
    for seq_len in (None, 4096):
        inv, a = f(rope, seq_len=seq_len)
        close(inv[[0, 47]], [1.0, 4.2659433051390916e-05], impl, what=f"short set, seq_len={seq_len}")
    inv, a = f(rope, seq_len=4097)
    close(inv[[0, 47]], [0.9259258891329368, 1.8684881663397117e-06], impl, what="long set")
    close(np.array([a]), np.array([math.sqrt(17 / 12)]), impl)
    close(np.array([a]), np.array([1.1902380714238083]), impl)


def test_longrope_phi4_mini_partial(impl, phi_factors):
    short, long = phi_factors["microsoft/Phi-4-mini-instruct"]
    rope = {"rope_type": "longrope", "rope_theta": 1e4, "head_dim": 128, "rotary_dim": 96,
            "original_max_position_embeddings": 4096, "max_position_embeddings": 131072,
            "short_factor": short, "long_factor": long}
    inv, a = require(impl, "rope_frequencies")(rope, seq_len=4097)
    assert inv.shape == (48,)
    close(inv[[1, 47]], [0.738074691753546, 2.536168429199474e-06], impl)
    close(np.array([a]), np.array([1.1902380714238083]), impl)


# --------------------------------------------------------------------------------- partial
def test_partial_rotary_frequencies(impl):
    f = require(impl, "rope_frequencies")
    inv, _ = f({"rope_type": "default", "rope_theta": 1e4, "head_dim": 96, "partial_rotary_factor": 0.25})
    close(inv, [1.0, 0.46415888336127786, 0.2154434690031884, 0.1, 0.0464158883361278, 0.021544346900318832, 0.01,
                0.004641588833612777, 0.0021544346900318843, 0.001, 0.0004641588833612777,
                0.00021544346900318845], impl)
    inv, _ = f({"rope_type": "default", "rope_theta": 1e4, "head_dim": 256, "rotary_dim": 64})
    close(inv[[1, 31]], [0.7498942093324559, 1.333521432163324e-4], impl)


# --------------------------------------------------------------------------------- apply
APPLY = {
    "half": ({}, [-0.2119490671124727, 0.017193967285396794, 0.3485851999786866, 0.4969977545016855,
                  -0.6011053093677949, 0.7903824185095394, 0.8858545921062999, 1.001495497753376]),
    "interleaved": ({"layout": "interleaved"},
                    [-0.1590290640900225, -0.22985812314262796, 0.21049108009143247, 0.5884883220608054,
                     0.6022221459412455, 0.7684097129383004, 0.8719960670029511, 1.0026204960658767]),
    "deinterleaved": ({"layout": "deinterleaved"},
                      [-0.1590290640900225, 0.21049108009143247, 0.6022221459412455, 0.8719960670029511,
                       -0.22985812314262796, 0.5884883220608054, 0.7684097129383004, 1.0026204960658767]),
    "head-d4-half": ({"rotary_dim": 4, "placement": "first"},
                     [-0.17666906509750588, 0.23488975833599907, -0.35360718521768364, 0.5072738919251177,
                      0.625, 0.75, 0.875, 1.0]),
    "tail-d4-half": ({"rotary_dim": 4, "placement": "last"},
                     [0.125, 0.25, 0.375, 0.5, -0.7422253174276622, 0.719667025109245, -0.7780434294879728,
                      1.0220466589008592]),
    "tail-d4-interleaved": ({"rotary_dim": 4, "placement": "last", "layout": "interleaved"},
                            [0.125, 0.25, 0.375, 0.5, -0.7245853164201788, -0.6542943674129171,
                             0.8446107793278684, 1.0257960964261712]),
    "proportional": ({"rope_type": "proportional", "rotary_dim": 4},
                     [-0.2119490671124727, 0.017193967285396794, 0.375, 0.5, -0.6011053093677949,
                      0.7903824185095394, 0.875, 1.0]),
}


@pytest.mark.parametrize("case", list(APPLY))
def test_tiny_apply_vectors(impl, case):
    extra, expected = APPLY[case]
    y = require(impl, "apply_rope")(X8[None, :], np.array([3]), {**TINY, **extra})
    assert y.shape == (1, 8)
    assert_close(y[0], np.array(expected), impl, "phase", positions=np.full(8, 3), magnitude=1.5, what=case)
    if "rotary_dim" not in extra:
        close(np.array([np.linalg.norm(y)]), np.array([1.7853571071357126]), impl)


# --------------------------------------------------------------------------------- numbers
def test_relative_invariance_numbers(impl):
    rng = np.random.default_rng(0)
    rng.standard_normal((5, 8))
    q, k = rng.standard_normal(8), rng.standard_normal(8)
    apply = require(impl, "apply_rope")

    def score(p_q, p_k):
        return float(apply(q[None, :], np.array([p_q]), TINY, seq_len=108)[0]
                     @ apply(k[None, :], np.array([p_k]), TINY, seq_len=108)[0])

    close(np.array([score(10, 3), score(107, 100)]), np.array([-1.4515448047554167, -1.4515448047554171]), impl)


def test_meta_hf_permutation_vector(impl):
    perm = require(impl, "rope_layout_permutation")(8)
    np.testing.assert_array_equal(perm, [0, 2, 4, 6, 1, 3, 5, 7])
