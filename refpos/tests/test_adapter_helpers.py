"""The helpers docs/write-an-adapter.md tells adapters to reuse (``spec_tests/adapters/_contract.py``) accept every
shape the contract allows: attention inputs ``(..., H, T, d)`` with any leading axes, 3-D ``(H, T, d)`` included.

A library attention that takes only 4-D arrays is wrapped by ``batch_of_heads``; here the library is a float64
attention written in NumPy that refuses anything but 4-D, and the wrapped function is compared, for 3-, 4- and
5-D inputs with masks and biases of every contract shape, with the same formula applied per leading index.
"""

from __future__ import annotations

import numpy as np
import pytest

from spec_tests.adapters._contract import attention_shapes, batch_of_heads


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def four_d_only(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None):
    """softmax(q·kᵀ/√d + bias, masked)·v of a library that takes (B, H, T, d) and nothing else."""
    if not q.ndim == k.ndim == v.ndim == 4:
        raise NotImplementedError("this library takes (B, H, T, d)")
    n_rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, n_rep, axis=1), np.repeat(v, n_rep, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return _softmax(s) @ v


def _per_index(q, k, v, bias, mask):
    """The formula applied on each leading index separately (the expected result)."""
    lead = q.shape[:-3]
    out = np.empty((*lead, q.shape[-3], q.shape[-2], v.shape[-1]))
    for index in np.ndindex(*lead):
        b = None if bias is None else (bias[index] if np.ndim(bias) == q.ndim else bias)
        m = None if mask is None else (mask[index] if np.ndim(mask) == q.ndim else mask)
        out[index] = four_d_only(q[index][None], k[index][None], v[index][None], b, m)[0]
    return out


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)], ids=["3-D", "4-D", "5-D"])
@pytest.mark.parametrize("extras", ["none", "bias (T_q, T_k)", "mask (H, T_q, T_k)", "mask and bias, full rank"])
def test_batch_of_heads_accepts_every_leading_shape(lead, extras):
    rng = np.random.default_rng(len(lead))
    h, h_kv, t_q, t_k, d = 4, 2, 3, 5, 8
    q = rng.standard_normal((*lead, h, t_q, d))
    k = rng.standard_normal((*lead, h_kv, t_k, d))
    v = rng.standard_normal((*lead, h_kv, t_k, 6))
    bias = mask = None
    if extras == "bias (T_q, T_k)":
        bias = rng.standard_normal((t_q, t_k))
    elif extras == "mask (H, T_q, T_k)":
        mask = rng.random((h, t_q, t_k)) < 0.7
        mask[..., 0] = True
    elif extras == "mask and bias, full rank":
        bias = rng.standard_normal((*lead, h, t_q, t_k))
        mask = rng.random((*lead, 1, t_q, t_k)) < 0.7
        mask[..., 0] = True
    got = batch_of_heads(four_d_only)(q, k, v, bias=bias, mask=mask)
    assert got.shape == (*lead, h, t_q, 6)
    np.testing.assert_allclose(got, _per_index(q, k, v, bias, mask), rtol=1e-13, atol=1e-14)


def test_without_the_wrapper_the_library_refuses_three_axes():
    """The wrapper is what makes 3-D run: the bare library refuses it (the test above can fail)."""
    q = np.zeros((2, 3, 4))
    with pytest.raises(NotImplementedError):
        four_d_only(q, q, q)


@pytest.mark.parametrize(("q_shape", "k_shape", "expected"), [
    ((4, 3, 8), (2, 5, 8), (1, 4, 3, 8, 2, 5)),
    ((2, 4, 3, 8), (2, 2, 5, 8), (2, 4, 3, 8, 2, 5)),
    ((2, 3, 4, 3, 8), (2, 3, 1, 5, 8), (6, 4, 3, 8, 1, 5)),
])
def test_attention_shapes_of_every_rank(q_shape, k_shape, expected):
    assert attention_shapes(np.zeros(q_shape), np.zeros(k_shape), "lib", "(b, h, t, d)") == expected


@pytest.mark.parametrize(("q_shape", "k_shape", "says"), [
    ((3, 8), (5, 8), "same leading axes"),
    ((2, 4, 3, 8), (3, 2, 5, 8), "same leading axes"),
    ((4, 3, 8), (3, 5, 8), "multiple of kv heads"),
])
def test_attention_shapes_refuse_what_the_contract_does_not_allow(q_shape, k_shape, says):
    with pytest.raises(ValueError, match=says):
        attention_shapes(np.zeros(q_shape), np.zeros(k_shape), "lib", "(b, h, t, d)")
