"""Golden cases of convolutional positional embeddings (docs/conv-position.md): the frames ``x + e`` an encoder's
layers receive.

* ``conv_position/weight-norm-…``: wav2vec2's form, a weight-normalised grouped kernel (an even kernel, so the
  trim shows), the exact GELU; and the tanh GELU with an odd kernel;
* ``conv_position/sew-stride-2-…``: SEW's strided convolution added to the pooled frames;
* ``conv_position/stacked-…``: Data2Vec-audio's layers with their layer norm (two: the tolerance grows with
  each layer's gain, see :func:`_stacked_scale`).

Exact values: the weight norm, the sums, the layer norm and the activation (``erfc`` for the exact GELU) at
:data:`refpos.golden.certify.DIGITS` digits with mpmath, from the float64 inputs. Not wired into ``refpos golden
generate``: :func:`conv_position_cases` returns the cases.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.conv_position import (
    add_conv_positions,
    conv_position_embedding,
    stacked_conv_position_embedding,
    weight_norm,
)
from refpos.golden import certify as cert
from refpos.golden.cases import In, as_xp, call, rng_for, to_np
from refpos.golden.entries import tolerance_value
from refpos.golden.manifest import Case, Output


def _mp_activation(name: str, v: Any) -> Any:
    mp = cert.mp
    if name == "gelu":
        return v * mp.erfc(-v / mp.sqrt(2)) / 2
    if name == "gelu_new":
        return v * (1 + mp.tanh(mp.sqrt(2 / mp.pi) * (v + mp.mpf("0.044715") * v**3))) / 2
    raise ValueError(f"activation {name!r} has no exact form here")


def _mp(a: np.ndarray) -> np.ndarray:
    """A float64 array as exact mpmath numbers."""
    return np.vectorize(lambda v: cert.mp.mpf(float(v)), otypes=[object])(a)


def _mp_conv(h: np.ndarray, w: np.ndarray, bias: np.ndarray, groups: int, stride: int) -> np.ndarray:
    """The trimmed convolution of exact frames ``h`` ``(B, T, C)`` and an exact kernel ``w`` ``(C, C/G, K)``."""
    mp = cert.mp
    batch, frames = h.shape[0], h.shape[1]
    c_out, per_group, k = w.shape
    pad = k // 2
    t_out = (frames + 2 * pad - k) // stride + 1 - (1 if k % 2 == 0 else 0)
    y = np.empty((batch, t_out, c_out), dtype=object)
    for b, t, o in np.ndindex(y.shape):
        first = (o // (c_out // groups)) * per_group
        y[b, t, o] = mp.fsum(w[o, i, kk] * h[b, stride * t + kk - pad, first + i] for kk in range(k)
                             for i in range(per_group) if 0 <= stride * t + kk - pad < frames) + mp.mpf(float(bias[o]))
    return y


def _mp_added(x: np.ndarray, e: np.ndarray, stride: int) -> np.ndarray:
    mp = cert.mp
    length = min(x.shape[1] // stride, e.shape[1])
    out = np.empty((x.shape[0], length, x.shape[2]), dtype=object)
    for b, t, c in np.ndindex(out.shape):
        out[b, t, c] = mp.fsum(x[b, stride * t + j, c] for j in range(stride)) / stride + e[b, t, c]
    return out


def _mp_single(x: np.ndarray, v: np.ndarray, g: np.ndarray, bias: np.ndarray, groups: int, activation: str,
               stride: int) -> np.ndarray:
    mp = cert.mp
    v = _mp(v)
    norms = [mp.sqrt(mp.fsum(value**2 for value in v[:, :, kk].ravel())) for kk in range(v.shape[2])]
    w = np.empty(v.shape, dtype=object)
    for o, i, kk in np.ndindex(v.shape):
        w[o, i, kk] = mp.mpf(float(g[kk])) * v[o, i, kk] / norms[kk]
    frames = _mp(x)
    y = _mp_conv(frames, w, bias, groups, stride)
    return _mp_added(frames, np.vectorize(lambda value: _mp_activation(activation, value), otypes=[object])(y), stride)


def _mp_stacked(x: np.ndarray, weights: np.ndarray, biases: np.ndarray, groups: int, activation: str,
                eps: float) -> np.ndarray:
    mp = cert.mp
    frames = _mp(x)
    h = frames
    for weight, bias in zip(weights, biases, strict=True):
        y = _mp_conv(h, _mp(weight), bias, groups, 1)
        for b, t in np.ndindex(y.shape[:2]):
            row = list(y[b, t])
            mean = mp.fsum(row) / len(row)
            var = mp.fsum((value - mean) ** 2 for value in row) / len(row)
            y[b, t] = [_mp_activation(activation, (value - mean) / mp.sqrt(var + mp.mpf(eps))) for value in row]
        h = y
    return frames + h


def _scale(x: np.ndarray, kernels: np.ndarray) -> float:
    """The size of an output's terms: the largest ``Σ|w|`` of a kernel times the largest frame, plus the frame."""
    return float(np.abs(kernels).sum(axis=(-2, -1)).max() * np.abs(x).max() + np.abs(x).max())


def _stacked_scale(x: np.ndarray, weights: np.ndarray, biases: np.ndarray, groups: int, eps: float) -> float:
    """The size an error of the stacked layers can reach: the first layer's terms carried through each layer's
    gain, ``max_o Σ|w|`` times the layer norm's ``(2 + max|ŷ|)/min σ`` times GELU's slope 1.13
    (spec_tests/test_conv_position.py derives the same gain)."""
    h, gain = x, 1.0
    for weight, bias in zip(weights, biases, strict=True):
        y = to_np(conv_position_embedding(as_xp(h), as_xp(weight), as_xp(bias), groups=groups, activation="linear"))
        sigma = np.sqrt(y.var(axis=-1) + eps)
        normed = (y - y.mean(axis=-1, keepdims=True)) / sigma[..., None]
        gain *= max(np.abs(weight).sum(axis=(1, 2)).max(), 1.0) * (2 + np.abs(normed).max()) / sigma.min() * 1.13
        h = normed
    return _scale(x, weights[0]) * gain


def conv_position_cases() -> list[Case]:
    """Every convolutional positional embedding case."""
    cases = []
    for name, kernel, activation, stride in [("weight-norm-k8-gelu", 8, "gelu", 1),
                                             ("weight-norm-k7-gelu-tanh", 7, "gelu_new", 1),
                                             ("sew-stride-2-k8-gelu", 8, "gelu", 2)]:
        cid = f"conv_position/{name}"
        rng = rng_for(cid)
        x, v = rng.standard_normal((1, 16, 8)), rng.standard_normal((8, 4, kernel))
        g, bias = rng.uniform(0.5, 1.5, kernel), 0.1 * rng.standard_normal(8)
        xb = as_xp(x)
        e = conv_position_embedding(xb, weight_norm(as_xp(v), as_xp(g), dim=2), as_xp(bias), groups=2,
                                    activation=activation, stride=stride)
        out = to_np(add_conv_positions(xb, e, stride=stride))
        scale = _scale(x, g * v / np.sqrt((v * v).sum(axis=(0, 1))))
        form = "SEW's strided convolution added to the frames pooled by 2" if stride > 1 else "x + e"
        cases.append(Case(
            cid, "conv_position", "conv_positions",
            f"{form}: a weight-normalised kernel of {kernel} taps, 8 channels in 2 groups, {activation}, 16 frames "
            "(docs/conv-position.md#the-math)",
            {"call": call("conv_positions", ["out"], In("x"), In("v"), In("bias"), 2, activation, stride, In("g"))},
            {"x": x, "v": v, "g": g, "bias": bias},
            {"out": Output(out, tolerance_value(out, scale=scale),
                           lambda x=x, v=v, g=g, b=bias, a=activation, s=stride, scale=scale: (
                               _mp_single(x, v, g, b, 2, a, s), scale))}))
    cid = "conv_position/stacked-2-layers-k5"
    rng = rng_for(cid)
    x, weights = rng.standard_normal((1, 12, 6)), rng.standard_normal((2, 6, 2, 5)) / np.sqrt(10)
    biases = 0.1 * rng.standard_normal((2, 6))
    xb = as_xp(x)
    e = stacked_conv_position_embedding(xb, [as_xp(w) for w in weights], [as_xp(b) for b in biases], groups=3,
                                        activation="gelu", eps=1e-5)
    out = to_np(add_conv_positions(xb, e, stride=1))
    scale = _stacked_scale(x, weights, biases, 3, 1e-5)
    cases.append(Case(
        cid, "conv_position", "stacked_conv_positions",
        "Data2Vec-audio: 2 layers of a 5-tap kernel, 6 channels in 3 groups, layer norm, exact GELU, 12 frames "
        "(docs/conv-position.md#the-math)",
        {"call": call("stacked_conv_positions", ["out"], In("x"), In("weights"), In("biases"), 3, "gelu", 1e-5)},
        {"x": x, "weights": weights, "biases": biases},
        {"out": Output(out, tolerance_value(out, scale=scale),
                       lambda: (_mp_stacked(x, weights, biases, 3, "gelu", 1e-5), scale))}))
    return cases
