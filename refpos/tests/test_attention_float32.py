"""float32 attention on NumPy: the fused tiles (scale on the queries, division after p·v) and the readable
steps are both within one stated bound of the float64 result (refpos.core.tiled, docs/performance.md).

The bound is a worst-case rounding analysis of any float32 evaluation of the nine steps; it holds for the
readable form too, so the fast form is held to the readable form's own promise. A fused form with a
real mistake (the scale twice, no normalisation, the mask ignored) is outside it.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refpos
from refpos import parallel

tiled = importlib.import_module("refpos.core.tiled")

U = 2.0**-24  # float32 unit roundoff


def gamma(n: int) -> float:
    """γ_n = n·u / (1 − n·u): the relative error bound of n rounded float32 operations in sequence."""
    return n * U / (1 - n * U)


def float32_bound(q, k, v, scale, *, temperature=None, bias=None, mask=None, causal=False):
    """Per output row, the largest |o_float32 − o_float64| any float32 evaluation of the steps may reach.

    With A_i = c·max_j Σ_l |q_il k_jl| (× |t_i|) and L_i = max_j |s_ij| over allowed keys (float64): an
    exponent is off by Δ_i = γ_{d+2}·A_i + γ_3·L_i + 2u·L_i (dot product and scale; temperature, softcap
    and bias roundings; the max subtraction), a weight by a factor within η_i = e^Δ(1 + 4u) − 1 (exp under
    4 ulp), the normalised weights by at most 4η/(1 − η) in total, the sum and p·v over T_k keys by
    γ_{T_k} each, the division by u: |Δo_i| ≤ max|v|·(4η/(1 − η) + 2γ_{T_k} + 2u).
    """
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    d, t_q, t_k = q.shape[-1], q.shape[-2], k.shape[-2]
    n_rep = q.shape[-3] // k.shape[-3]
    k_rep = np.repeat(k64, n_rep, axis=-3)  # (..., Hq, Tk, d)
    a = scale * np.max(np.abs(q64) @ np.swapaxes(np.abs(k_rep), -1, -2), axis=-1)  # (..., Hq, Tq)
    logits = scale * (q64 @ np.swapaxes(k_rep, -1, -2))  # (..., Hq, Tq, Tk)
    if temperature is not None:
        a = a * np.abs(temperature)
        logits = logits * temperature[..., None]
    if bias is not None:
        logits = logits + bias
    allowed = np.ones(logits.shape, dtype=bool)
    if mask is not None:
        allowed &= mask
    if causal:
        allowed &= np.arange(t_k)[None, :] <= (t_k - t_q + np.arange(t_q))[:, None]
    big = np.max(np.where(allowed, np.abs(logits), 0.0), axis=-1)  # (..., Hq, Tq)
    delta = gamma(d + 2) * a + gamma(3) * big + 2 * U * big
    eta = np.exp(delta) * (1 + 4 * U) - 1
    return np.max(np.abs(v64)) * (4 * eta / (1 - eta) + 2 * gamma(t_k) + 2 * U)  # (..., Hq, Tq)


def _inputs(seed, t_q, extra, h_kv, n_rep, d, dv, magnitude):
    rng = np.random.default_rng(seed)
    t_k = t_q + extra
    q = (rng.standard_normal((2, h_kv * n_rep, t_q, d)) * magnitude).astype(np.float32)
    k = (rng.standard_normal((2, h_kv, t_k, d)) * magnitude).astype(np.float32)
    v = rng.standard_normal((2, h_kv, t_k, dv)).astype(np.float32)
    return rng, q, k, v


def _outside(got, want, bound):
    """Rows of got that are further from want than the bound (NaN where both are NaN agrees)."""
    err = np.where(np.isnan(got) & np.isnan(want), 0.0, np.abs(got.astype(np.float64) - want))
    return np.max(err, axis=-1) > bound


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), t_q=st.integers(1, 9), extra=st.integers(0, 5), h_kv=st.integers(1, 2),
       n_rep=st.integers(1, 3), d=st.sampled_from([1, 4, 16]), dv=st.sampled_from([1, 3]),
       magnitude=st.sampled_from([0.5, 2.0, 4.0]), causal=st.booleans(), masked=st.booleans(),
       with_bias=st.booleans(), with_temperature=st.booleans(), softcap=st.sampled_from([None, 5.0]),
       fully_masked=st.sampled_from(["zeros", "nan"]), n_threads=st.integers(1, 3))
def test_fused_and_readable_float32_are_within_the_bound_of_float64(
        seed, t_q, extra, h_kv, n_rep, d, dv, magnitude, causal, masked, with_bias, with_temperature, softcap,
        fully_masked, n_threads):
    rng, q, k, v = _inputs(seed, t_q, extra, h_kv, n_rep, d, dv, magnitude)
    t_k, h_q = k.shape[-2], q.shape[-3]
    kwargs = {"causal": causal, "softcap": softcap, "fully_masked": fully_masked,
              "mask": rng.random((t_q, t_k)) < 0.7 if masked else None,
              "bias": rng.standard_normal((h_q, t_q, t_k)).astype(np.float32) if with_bias else None,
              "temperature": (rng.random((2, h_q, t_q)) + 0.5).astype(np.float32) if with_temperature else None}
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("REFPOS_THREADS", str(n_threads))
        monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)
        monkeypatch.setattr(tiled, "_BLOCK_ELEMENTS", 2 * n_rep * t_k)  # two query rows per tile
        assert tiled.fuses(q, refpos.core.attention.attention_steps(q, k, v, **kwargs))
        fused = refpos.attention(q, k, v, **kwargs)
    readable, _ = refpos.attention(q, k, v, return_weights=True, **kwargs)  # the whole-array readable steps
    as64 = {key: (value.astype(np.float64) if isinstance(value, np.ndarray) and value.dtype == np.float32 else value)
            for key, value in kwargs.items()}
    exact, _ = refpos.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                                return_weights=True, **as64)
    bound = float32_bound(q, k, v, d**-0.5, temperature=kwargs["temperature"], bias=kwargs["bias"],
                          mask=kwargs["mask"], causal=causal)
    assert fused.dtype == np.float32
    assert not _outside(readable, exact, bound).any()  # the bound is the float32 semantics' own
    assert not _outside(fused, exact, bound).any()
    np.testing.assert_array_equal(np.isnan(fused), np.isnan(exact))  # fully masked rows: the same policy


def _mutant_scale_twice(q, k, v, steps, rows):
    return ORIGINAL(q * steps.scale, k, v, steps, rows)


def _mutant_unnormalised(q, k, v, steps, rows):
    return ORIGINAL(q, k, v, steps, rows) * k.shape[-2]


def _mutant_mask_ignored(q, k, v, steps, rows):
    from dataclasses import replace

    return ORIGINAL(q, k, v, replace(steps, mask=None), rows)


ORIGINAL = tiled.fused_rows


@pytest.mark.parametrize("mutant", [_mutant_scale_twice, _mutant_unnormalised, _mutant_mask_ignored])
def test_the_bound_rejects_a_wrong_fused_form(monkeypatch, mutant):
    """Meta: the bound is tight enough to see a real mistake of the fused tiles."""
    rng, q, k, v = _inputs(7, 8, 3, 2, 2, 16, 3, 2.0)
    mask = rng.random((8, 11)) < 0.6
    exact = refpos.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), mask=mask,
                             return_weights=True)[0]
    bound = float32_bound(q, k, v, 16**-0.5, mask=mask)
    assert not _outside(refpos.attention(q, k, v, mask=mask), exact, bound).any()
    monkeypatch.setattr(tiled, "fused_rows", mutant)
    assert _outside(refpos.attention(q, k, v, mask=mask), exact, bound).any()


def test_only_float32_tiles_without_terms_before_the_scale_are_fused():
    q = np.ones((1, 2, 3, 4), dtype=np.float32)
    steps = refpos.core.attention.attention_steps
    assert tiled.fuses(q, steps(q, q, q))
    assert not tiled.fuses(q.astype(np.float64), steps(q.astype(np.float64), q.astype(np.float64),
                                                      q.astype(np.float64)))  # float64: the readable steps
    assert not tiled.fuses(q, steps(q, q, q, qk_terms=np.zeros((3, 3), dtype=np.float32)))
    assert not tiled.fuses(q, steps(q, q, q, bias=np.zeros((3, 3), dtype=np.float32), bias_scaled=True))
    assert not tiled.fuses(q, steps(q, q, q, bias=np.zeros((3, 3))))  # a float64 bias: float64 logits
    assert tiled.fuses(q, steps(q, q, q, bias=np.zeros((3, 3), dtype=np.float32), causal=True))
