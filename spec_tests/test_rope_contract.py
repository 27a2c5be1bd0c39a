"""Spec: the RoPE contract beyond single formulas — config resolution of real models, stateful dynamic
NTK, attention logits (attention factor, DeepSeek softmax multiplier, cached decode), and bad input.

Tolerances: resolved numbers are float64 closed forms (rtol 1e-13, ``support.tolerance``); logits use
the phase rule scaled by |q|·|k|·A² (``support.assert_close``).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rope_support import frequencies_or_reference, model_configs, rope_dicts, span_slices
from support import IMPL_NAME, assert_close, assert_within, declared_value, require, size, tolerance

from refpos.testing.bad_inputs import BAD_POSITIONS as BAD_INPUTS
from refpos.testing.bad_inputs import BAD_ROPE_CONFIGS

CONFIGS = model_configs()


def _layers(entry):
    resolved = entry["resolved_by_hf_5_24"]
    if "per_layer_type" in resolved:
        return [(layer, {**resolved, **block}) for layer, block in resolved["per_layer_type"].items()]
    if "full_attention" in resolved:
        return list(resolved.items())
    return [(None, resolved)]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_real_configs_resolve_as_hf(impl, name):
    """golden/README.md / model_configs.json: what HF 5.24.0 resolves for each released config.json."""
    resolve, frequencies = require(impl, "rope_params_from_hf_config", "rope_frequencies")
    entry = CONFIGS[name]
    for layer, expected in _layers(entry):
        rope = resolve(copy.deepcopy(entry["config"]), layer)
        assert rope["rope_type"] == expected["rope_type"], layer
        assert rope["rope_theta"] == expected["rope_theta"], layer
        assert rope["head_dim"] == expected.get("head_dim", expected.get("qk_head_dim")), layer
        inv, a = frequencies(rope)
        assert_within([a], [expected["attention_factor"]], **tolerance(impl))
        if "rotary_dim" in expected:
            assert inv.shape == (expected["rotary_dim"] // 2,)
        if "rotated_pairs" in expected:
            assert (int((inv != 0).sum()), int((inv == 0).sum())) == (expected["rotated_pairs"],
                                                                      expected["zero_frequency_pairs"])
        for key in ("original_max_position_embeddings", "factor"):
            if expected.get(key) is not None:
                assert rope[key] == expected[key], key
        if "softmax_scale_multiplier" in expected:
            multiplier = require(impl, "rope_softmax_multiplier")(rope)
            assert_within([multiplier], [expected["softmax_scale_multiplier"]], **tolerance(impl))
    if "long_context_recipe" in entry:
        recipe = resolve({**entry["config"], **entry["long_context_recipe"]}, None)
        want = entry["resolved_by_hf_5_24"]["with_long_context_recipe"]
        assert (recipe["rope_type"], recipe["factor"]) == (want["rope_type"], want["factor"])
        assert_within([frequencies(recipe)[1]], [want["attention_factor"]], **tolerance(impl))


def test_resolver_schema_variants(impl):
    resolve = require(impl, "rope_params_from_hf_config")
    llama = CONFIGS["meta-llama/Llama-3.1-8B"]["config"]
    v4 = resolve(copy.deepcopy(llama), None)
    legacy = copy.deepcopy(llama)
    legacy["rope_scaling"]["type"] = legacy["rope_scaling"].pop("rope_type")
    assert resolve(legacy, None) == v4  # legacy "type"
    v5 = copy.deepcopy(llama)
    v5["rope_parameters"] = {**v5.pop("rope_scaling"), "rope_theta": v5.pop("rope_theta")}
    assert resolve(v5, None) == v4  # transformers v5 rope_parameters with theta inside
    phi = copy.deepcopy(CONFIGS["microsoft/Phi-3.5-mini-instruct"]["config"])
    phi["rope_scaling"]["type"] = "su"
    assert resolve(phi, None)["rope_type"] == "longrope"  # Phi-3's early name


def test_dynamic_ntk_state_sequence(impl):
    """docs/extrapolation.md#dynamic-ntk: growth above the cached length, reset only below L_max with a longer cache."""
    sequence = require(impl, "rope_dynamic_ntk_frequencies")
    rope = {"rope_type": "dynamic", "rope_theta": 1e4, "head_dim": 128, "factor": 2.0,
            "max_position_embeddings": 4096}
    lengths = [10, 8192, 6000, 4096, 4095, 5000, 9000, 100]
    thetas = [1e4, 30527.7367488067, 30527.7367488067, 30527.7367488067, 1e4, 14497.957419935765,
              34610.26204656427, 1e4]
    got = sequence(rope, lengths)
    expected = np.stack([theta ** (-(np.arange(0, 128, 2) / 128)) for theta in thetas])
    assert_within(got, expected, **tolerance(impl))


@given(rope_dicts(layouts=("half", "interleaved", "deinterleaved")), size(1, 6), size(0, 5000),
       st.integers(0, 2**32 - 1))
def test_logits_of_a_cached_decode_step(impl, rope, t, cached, seed):
    """One query at position P = cached + t - 1 against keys 0 … P: its logits equal those of the same
    vectors rotated by their own positions and multiplied, scaled by head_dim^-1/2 (no offset bugs)."""
    logits, apply = require(impl, "rope_attention_logits", "apply_rope")
    rng = np.random.default_rng(seed)
    d = rope["head_dim"]
    q, k = rng.standard_normal((2, 1, d)), rng.standard_normal((2, cached + t, d))
    q_pos, k_pos = np.array([cached + t - 1]), np.arange(cached + t)
    seq_len = cached + t
    got = logits(q, k, q_pos, k_pos, rope)
    expected = apply(q, q_pos, rope, seq_len=seq_len) @ np.swapaxes(apply(k, k_pos, rope, seq_len=seq_len), -1,
                                                                    -2) * d**-0.5
    inv, a = frequencies_or_reference(impl, rope, seq_len)  # for the tolerance only
    size = np.linalg.norm(q, axis=-1).max() * np.linalg.norm(k, axis=-1).max() * max(a, 1.0) ** 2 * d**-0.5
    assert_close(got, expected, impl, "phase", positions=np.full(got.shape[:-1], 2 * seq_len), inv_freq=inv,
                 magnitude=size, what="decode logits")


def test_deepseek_logits_carry_the_softmax_multiplier(impl):
    logits = require(impl, "rope_attention_logits")
    rope = {"rope_type": "yarn", "rope_theta": 1e4, "head_dim": 192, "rotary_dim": 64, "placement": "last",
            "layout": "deinterleaved", "factor": 40.0, "original_max_position_embeddings": 4096, "mscale": 1.0,
            "mscale_all_dim": 1.0, "softmax_mscale": True}
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 3, 192)), rng.standard_normal((1, 3, 192))
    pos = np.arange(3)
    with_multiplier = logits(q, k, pos, pos, rope)
    without = logits(q, k, pos, pos, {**rope, "softmax_mscale": False})
    # each logit is a 192-term dot product of rotated q, k rounded by the value rule, times one more product:
    # 10× the declared dtype's rtol
    assert_within(with_multiplier, without * 1.8738542070926265, rtol=10 * tolerance(impl)["rtol"])


#: the functions that read a rope dict, in the order a bad-input test calls the first one provided: the
#: frequencies when the library exposes them, else its rotation (a kernel whose table lives inside)
CONFIG_READERS = ("rope_frequencies", "apply_rope", "rope_cos_sin")


def _config_reader(impl):
    """A callable ``f(rope)`` through the first provided function of :data:`CONFIG_READERS`."""
    for name in CONFIG_READERS:
        if callable(getattr(impl, name, None)):
            function = getattr(impl, name)
            if name == "rope_frequencies":
                return function
            if name == "apply_rope":
                return lambda rope: function(np.ones((1, rope["head_dim"])), np.array([0]), rope)
            return lambda rope: function(np.array([0]), rope)
    return require(impl, *CONFIG_READERS)  # skips, naming what is missing


@pytest.mark.parametrize(("rope", "error"), [pytest.param(bad.value, bad.error, id=f"{bad.id}-{bad.error.__name__}")
                                             for bad in BAD_ROPE_CONFIGS])
def test_bad_rope_configs_are_rejected(impl, rope, error):
    """Through rope_frequencies, or apply_rope / rope_cos_sin where the frequencies live in a kernel: a config
    the contract does not define is bad input before anything is rotated (refpos/testing/bad_inputs.py says why
    each one is)."""
    read = _config_reader(impl)
    with pytest.raises(error):
        read(rope)


#: refpos/testing/bad_inputs.py: the bad positions, with the error each must raise
BAD_POSITIONS = [pytest.param(bad.value, bad.error, id=f"{bad.id}-{bad.error.__name__}") for bad in BAD_INPUTS]
PLAIN = {"rope_type": "default", "rope_theta": 1e4, "head_dim": 4}


def _skip_declared_negative(positions):
    if (positions < 0).any() and declared_value("negative_positions") == "rotate":
        pytest.skip(f"{IMPL_NAME} declares INFO['negative_positions'] = 'rotate': a negative position rotates "
                    "backwards (test_negative_positions_rotate_backwards)")


@pytest.mark.parametrize(("positions", "error"), BAD_POSITIONS)
def test_bad_positions_are_rejected(impl, positions, error):
    """apply_rope: float positions are a TypeError; a negative one a ValueError unless the adapter declares
    that it rotates backwards (INFO["negative_positions"])."""
    apply = require(impl, "apply_rope")
    _skip_declared_negative(positions)
    with pytest.raises(error):
        apply(np.ones((2, 4)), positions, PLAIN)


@pytest.mark.parametrize(("positions", "error"), BAD_POSITIONS)
def test_bad_positions_are_rejected_by_the_tables(impl, positions, error):
    cos_sin = require(impl, "rope_cos_sin")
    _skip_declared_negative(positions)
    with pytest.raises(error):
        cos_sin(positions, PLAIN)


@given(rope_dicts(), st.integers(1, 70000), st.integers(1, 200000), st.integers(0, 2**32 - 1))
def test_negative_positions_rotate_backwards(impl, rope, delta, seq_len, seed):
    """INFO["negative_positions"] = "rotate" (llama.cpp shifts cached keys by negative deltas): position −δ
    turns by −δ·ω, so rotating by δ and then by −δ gives A²·x on the rotated span (index-from-the-end
    semantics or a clip to 0 cannot). The frequencies are those of ``seq_len``, given explicitly."""
    apply = require(impl, "apply_rope")
    if declared_value("negative_positions") != "rotate":
        pytest.skip(f"{IMPL_NAME} declares negative positions an error (test_bad_positions_are_rejected)")
    x = np.random.default_rng(seed).standard_normal((1, rope["head_dim"]))
    there = apply(x, np.array([delta]), rope, seq_len=seq_len)
    back = apply(there, np.array([-delta]), rope, seq_len=seq_len)
    inv, a = frequencies_or_reference(impl, rope, seq_len)
    span, _ = span_slices(rope)
    expected = x.copy()
    expected[:, span] = a * a * x[:, span]
    assert_close(back, expected, impl, "phase", positions=np.array([2 * delta]), inv_freq=inv,
                 magnitude=max(a, 1.0) ** 2 * 2 * np.abs(x).max(), what="R(−δ) R(δ) x")
