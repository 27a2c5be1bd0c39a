"""Spec: attention restricted to nearby keys (``local_attention``) and the per-layer query scale
(``query_scale``): how Gemma's sliding layers, Llama 4's chunked layers and its NoPE-layer temperature,
and Ministral-3's ``llama_4_scaling_beta`` see positions.

* sliding window ``w`` (HF ``sliding_window``): the query at position ``i`` sees keys ``j`` with
  ``0 ≤ i − j < w``; chunked-local ``C`` (HF ``attention_chunk_size``): keys with ``j ≤ i`` and
  ``⌊j/C⌋ = ⌊i/C⌋``; queries aligned to the end of the keys (query ``t`` at ``T_k − T_q + t``);
* ``llama4_temperature``: ``s(p) = 1 + a·ln(1 + ⌊(p + 1)/f⌋)``; ``llama_4_scaling_beta``:
  ``s(p) = 1 + β·ln(1 + ⌊p/L₀⌋)`` (docs/families.md).

The oracles are written here from these formulas (softmax over the explicit mask: the suite's float64
oracle ``encoding_support.softmax``). Tolerances: the declared dtype's rule for a re-derivation
(``encoding_support.tol``); scales are position-independent values of the formula (``support.tolerance``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from encoding_support import softmax as oracle_softmax
from encoding_support import tol
from hypothesis import given
from hypothesis import strategies as st
from support import assert_within, require, size, size_from, tolerance


@st.composite
def local_inputs(draw):
    """``(q, k, v)``: q ``(B, H, T_q, d)``, k and v ``(B, H_kv, T_k, ·)``, T_q ≤ T_k ≤ 12, GQA groups."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    b, h_kv, group = draw(size(1, 2)), draw(size(1, 2)), draw(size(1, 2))
    t_k = draw(size(1, 12))
    t_q = draw(size(1, t_k))
    d = draw(size_from([2, 4, 8]))
    return (rng.standard_normal((b, h_kv * group, t_q, d)), rng.standard_normal((b, h_kv, t_k, d)),
            rng.standard_normal((b, h_kv, t_k, 3)))


def visible(t_q: int, t_k: int, window: int | None, chunk: int | None) -> np.ndarray:
    """``(T_q, T_k)`` keys each query may see, from the definitions in the module docstring."""
    i = np.arange(t_k - t_q, t_k)[:, None]
    j = np.arange(t_k)[None, :]
    keep = j <= i
    if window is not None:
        keep &= i - j < window
    if chunk is not None:
        keep &= j // chunk == i // chunk
    return keep


def oracle(q, k, v, window, chunk):
    group = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    logits = q @ np.swapaxes(kk, -1, -2) / math.sqrt(q.shape[-1])
    return oracle_softmax(logits, visible(q.shape[-2], k.shape[-2], window, chunk)) @ vv


@given(local_inputs(), st.one_of(st.none(), st.integers(1, 14)), st.one_of(st.none(), st.integers(1, 14)))
def test_local_attention_equals_softmax_over_the_nearby_keys(impl, qkv, window, chunk):
    local = require(impl, "local_attention")
    q, k, v = qkv
    got = local(q, k, v, window=window, attention_chunk=chunk)
    assert_within(got, oracle(q, k, v, window, chunk), **tol(impl))


@given(local_inputs(), st.data())
def test_a_window_or_chunk_covering_every_key_is_causal_attention(impl, qkv, data):
    local, attention = require(impl, "local_attention", "attention")
    q, k, v = qkv
    wide = data.draw(st.integers(k.shape[-2], 40))
    causal = attention(q, k, v, causal=True)
    assert_within(local(q, k, v, window=wide), causal, **tol(impl))
    assert_within(local(q, k, v, attention_chunk=wide), causal, **tol(impl))


@given(local_inputs(), st.integers(1, 6), st.sampled_from(["window", "attention_chunk"]), st.integers(0, 2**32 - 1))
def test_keys_outside_the_neighbourhood_change_nothing(impl, qkv, size, which, seed):
    """Replacing every key and value no query can see leaves the output unchanged, bit for bit (a window one
    key too wide, or chunks counted from the first query instead of position 0, fail here)."""
    local = require(impl, "local_attention")
    q, k, v = qkv
    options = {which: size}
    hidden = ~visible(q.shape[-2], k.shape[-2], *((size, None) if which == "window" else (None, size))).any(axis=0)
    rng = np.random.default_rng(seed)
    k2, v2 = k.copy(), v.copy()
    k2[..., hidden, :] = rng.standard_normal(k2[..., hidden, :].shape) * 5
    v2[..., hidden, :] = rng.standard_normal(v2[..., hidden, :].shape) * 5
    np.testing.assert_array_equal(local(q, k2, v2, **options), local(q, k, v, **options))


@given(local_inputs())
def test_a_window_of_one_sees_only_itself(impl, qkv):
    local = require(impl, "local_attention")
    q, k, v = qkv
    group = q.shape[1] // k.shape[1]
    own = np.repeat(v, group, axis=1)[..., k.shape[-2] - q.shape[-2]:, :]  # each query's own value row
    assert_within(local(q, k, v, window=1), own, **tol(impl))
    assert_within(local(q, k, v, attention_chunk=1), own, **tol(impl))


@pytest.mark.parametrize("options", [{"window": 0}, {"attention_chunk": 0}, {"window": -2}],
                         ids=["window=0", "attention_chunk=0", "window=-2"])
def test_bad_window_and_chunk_are_rejected(impl, options):
    local = require(impl, "local_attention")
    q = np.ones((1, 1, 2, 2))
    with pytest.raises(ValueError):
        local(q, q, q, **options)


# ------------------------------------------------------------------------------------ query scale
def _llama4_temperature(p: np.ndarray, c: dict) -> np.ndarray:
    """1 + a·ln(1 + ⌊(p + 1)/f⌋)."""
    return 1.0 + c["attn_scale"] * np.log1p(np.floor((p + 1.0) / c["floor_scale"]))


def _llama_4_scaling_beta(p: np.ndarray, c: dict) -> np.ndarray:
    """1 + β·ln(1 + ⌊p/L₀⌋)."""
    return 1.0 + c["beta"] * np.log1p(np.floor(p / c["original_max_position_embeddings"]))


#: each rule: a real configuration (Llama 4's defaults, Ministral-3's β and L₀) and its formula
SCALES = {
    "llama4_temperature": ({"rule": "llama4_temperature", "attn_scale": 0.1, "floor_scale": 8192.0},
                           _llama4_temperature),
    "llama_4_scaling_beta": ({"rule": "llama_4_scaling_beta", "beta": 0.1, "original_max_position_embeddings": 16384},
                             _llama_4_scaling_beta),
}


@pytest.mark.parametrize("rule", list(SCALES))
@given(st.lists(st.integers(0, 2**20), min_size=1, max_size=8), st.floats(0.01, 1.0), st.sampled_from([64, 8192]))
def test_query_scale_is_its_formula(impl, rule, positions, strength, step):
    scale = require(impl, "query_scale")
    base, formula = SCALES[rule]
    params = {**base, **({"attn_scale": strength, "floor_scale": float(step)} if rule == "llama4_temperature"
                         else {"beta": strength, "original_max_position_embeddings": step})}
    p = np.array(positions)
    assert_within(scale(p, params), formula(p.astype(np.float64), params), **tolerance(impl))


@pytest.mark.parametrize("rule", list(SCALES))
def test_query_scale_steps_at_its_boundaries(impl, rule):
    """Constant between steps, 1 before the first: llama4_temperature steps when (p + 1) reaches a multiple of
    8192 (positions 8190 → 8191), llama_4_scaling_beta when p reaches a multiple of 16384."""
    scale = require(impl, "query_scale")
    params, _ = SCALES[rule]
    positions = [0, 8190, 8191, 16383] if rule == "llama4_temperature" else [0, 16383, 16384, 32768]
    got = scale(np.array(positions), params)
    assert got[0] == got[1] == 1.0
    assert_within(got[2:], [1.0 + 0.1 * math.log(2), 1.0 + 0.1 * math.log(3)], **tolerance(impl))


@pytest.mark.parametrize(("positions", "params", "error"), [
    pytest.param(np.array([0, -1]), SCALES["llama4_temperature"][0], ValueError, id="negative-position-ValueError"),
    pytest.param(np.array([0.0, 1.0]), SCALES["llama4_temperature"][0], TypeError, id="float-positions-TypeError"),
    pytest.param(np.array([0]), {"rule": "temperature"}, ValueError, id="unknown-rule-ValueError"),
    pytest.param(np.array([0]), {"rule": "llama_4_scaling_beta", "beta": 0.1}, ValueError,
                 id="missing-original_max_position_embeddings-ValueError"),
])
def test_bad_query_scales_are_rejected(impl, positions, params, error):
    scale = require(impl, "query_scale")
    with pytest.raises(error):
        scale(positions, params)
