"""Vision and audio position kinds in float32: ``interpolate`` as torch's CPU kernels compute it for a float32
tensor (source coordinates, weights and the map all float32; docs/grid.md#resampling), the position-table
resampling built on it (docs/grid.md#the-ways), the window bias tables (Swin's gather, BEiT's bilinearly resampled
table, Swin V2's MLP on float32 log-spaced offsets; docs/bias-table.md), SAM's decomposed relative positions with
its float32 row coordinates (docs/decomposed.md), and the convolutional positions of the speech encoders as a
float32 grouped convolution (docs/conv-position.md).

The relative-position indices of the window tables are integer bookkeeping and come from refpos
(``swin_relative_index``, ``beit_relative_index``); every value is computed here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from refpos.encodings.bias_table_index import beit_relative_index, swin_relative_index
from spec_tests.float32_forms._base import F32, checked

_ERF = np.vectorize(math.erf, otypes=[np.float64])


# ------------------------------------------------------------------------------------------- resampling
def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel in float32."""
    t, a = np.abs(t), F32(a)
    near = ((a + F32(2)) * t - (a + F32(3))) * t * t + F32(1)
    far = ((a * t - F32(5) * a) * t + F32(8) * a) * t - F32(4) * a
    return np.where(t < 1, near, np.where(t < 2, far, F32(0))).astype(F32)


def _step(n_in: int, n_out: int, align_corners: bool, factor: float | None) -> F32:
    """torch's ``area_pixel_compute_scale`` in float32."""
    if align_corners:
        return F32(n_in - 1) / F32(n_out - 1) if n_out > 1 else F32(0)
    return F32(1.0 / factor) if factor is not None else F32(n_in) / F32(n_out)


def _axis_matrix(n_in: int, n_out: int, mode: str, align_corners: bool, antialias: bool, factor: float | None,
                 padding: str = "border") -> np.ndarray:
    """The float32 ``(n_out, n_in)`` map of one axis: taps and weights as torch's kernels form them."""
    out = np.zeros((n_out, n_in), dtype=F32)
    i = np.arange(n_out)
    if mode == "nearest":
        if n_out == n_in:
            index = i
        elif n_out == 2 * n_in:
            index = i // 2
        else:
            index = np.minimum(np.floor(i.astype(F32) * _step(n_in, n_out, False, factor)).astype(np.int64), n_in - 1)
        out[i, index] = 1
        return out
    cubic = mode == "bicubic"
    if n_in == n_out and (antialias or not cubic):
        return np.eye(n_in, dtype=F32)
    r = _step(n_in, n_out, align_corners, factor)
    if antialias:
        centre = r * (i.astype(F32) + F32(0.5))
        t = ((np.arange(n_in, dtype=F32)[None, :] - centre[:, None]) + F32(0.5)) * (F32(1) / r if r >= 1 else F32(1))
        weights = _cubic(t, -0.5) if cubic else np.maximum(F32(1) - np.abs(t), F32(0))
        return weights / weights.sum(axis=1, keepdims=True, dtype=F32)
    source = r * i.astype(F32) if align_corners else r * (i.astype(F32) + F32(0.5)) - F32(0.5)
    if not cubic and padding == "border":
        source = np.maximum(source, F32(0))
    floor = np.floor(source)
    if padding == "border":
        floor = np.minimum(floor, F32(n_in - 1))
    fraction = np.clip(source - floor, F32(0), F32(1))
    left = floor.astype(np.int64)
    if cubic:
        taps = [(left + o, _cubic(dist, -0.75)) for o, dist in
                zip((-1, 0, 1, 2), (fraction + F32(1), fraction, F32(1) - fraction, F32(2) - fraction), strict=True)]
    else:
        right = left + 1 if padding == "zeros" else np.where(left < n_in - 1, left + 1, left)
        taps = [(left, F32(1) - fraction), (right, fraction)]
    for index, weight in taps:
        inside = (index >= 0) & (index < n_in)
        weight = np.where(inside, weight, F32(0)) if padding == "zeros" else weight
        np.add.at(out, (i, np.clip(index, 0, n_in - 1)), weight.astype(F32))
    return out


def _per_axis(value: Any, n: int) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, Sequence) and not isinstance(value, str) else (value,) * n


def _resample(x: np.ndarray, size: Any, mode: str, align_corners: bool = False, antialias: bool = False,
              scale_factor: Any = None, recompute_scale_factor: bool = False, padding: str = "border") -> np.ndarray:
    """torch's ``F.interpolate`` of a float32 ``x`` along its trailing axes, one axis map after the other."""
    given = size if size is not None else scale_factor
    n_axes = {"linear": 1, "bilinear": 2, "bicubic": 2}.get(mode) or len(given)
    in_sizes = x.shape[x.ndim - n_axes:]
    if size is not None:
        out_sizes, factors = _per_axis(size, n_axes), (None,) * n_axes
    else:
        factors = tuple(float(s) for s in _per_axis(scale_factor, n_axes))
        out_sizes = tuple(math.floor(n * s) for n, s in zip(in_sizes, factors, strict=True))
        if recompute_scale_factor:
            factors = (None,) * n_axes
    for axis, (n_in, n_out, factor) in enumerate(zip(in_sizes, out_sizes, factors, strict=True)):
        matrix = _axis_matrix(n_in, int(n_out), mode, align_corners, antialias, factor, padding)
        position = x.ndim - n_axes + axis
        x = np.moveaxis(np.moveaxis(x, position, -1) @ matrix.T, -1, position)
    return x


@checked
def interpolate(x: Any, size: Any = None, mode: str = "bilinear", align_corners: bool = False,
                antialias: bool = False, scale_factor: Any = None, recompute_scale_factor: bool = False) -> np.ndarray:
    return _resample(np.asarray(x, dtype=F32), size, mode, align_corners, antialias, scale_factor,
                     recompute_scale_factor)


@checked
def resample_position_table(table: Any, grid: list[int], way: dict, prefix_tokens: int = 0,
                            suffix_tokens: int = 0) -> np.ndarray:
    """The table's square grid ``(M, M, d)`` resampled in float32 as the way says, the extra rows kept."""
    options = {"align_corners": False, "antialias": False, "scale_factor_offset": None, "padding": "border",
               "keep_extra": True, "axes": "hw", "read": "resample", **way}
    table = np.asarray(table, dtype=F32)
    n_grid = table.shape[0] - prefix_tokens - suffix_tokens
    side = math.isqrt(n_grid)
    target = tuple(grid)[::-1] if options["axes"] == "wh" else tuple(grid)
    image = np.moveaxis(table[prefix_tokens:prefix_tokens + n_grid].reshape(side, side, -1), -1, 0)  # (d, M, M)
    if options["read"] in ("buckets", "tile"):  # rows gathered in integer arithmetic, no rounding
        # buckets: row ⌊i·M/n⌋ of each axis; tile: row i mod M
        rows, cols = ((np.arange(n) * side // n) if options["read"] == "buckets" else np.arange(n) % side
                      for n in target)
        out = image[:, rows[:, None], cols[None, :]]
    else:
        crop = options["read"] == "square_crop"  # resampled to the longer side's square, its first rows and columns
        resampled = (max(target),) * 2 if crop else target
        if options["scale_factor_offset"] is None:
            size, factors = resampled, None
        else:
            size, factors = None, tuple((g + options["scale_factor_offset"]) / side for g in resampled)
        out = _resample(image, size, options["mode"], options["align_corners"], options["antialias"], factors,
                        padding=options["padding"])
        out = out[:, :target[0], :target[1]] if crop else out
    flat = np.moveaxis(out, 0, -1).reshape(grid[0] * grid[1], -1)
    if not options["keep_extra"]:
        return flat
    return np.concatenate([table[:prefix_tokens], flat, table[table.shape[0] - suffix_tokens:]], axis=0)


# ------------------------------------------------------------------------------------------- window bias
def _swinv2_coords(window: tuple[int, int], pretrained: tuple[int, int] | None) -> np.ndarray:
    """``sign(x)·log2(1 + |x|)/log2(8)``, ``x = 8Δ/(S − 1)``, in float32 (transformers' order)."""
    sides = window if pretrained is None else pretrained
    axes = []
    for side, norm in zip(window, sides, strict=True):
        delta = np.arange(-(side - 1), side, dtype=F32)
        scaled = delta * F32(8) / F32(norm - 1) if norm > 1 else delta
        axes.append(np.sign(scaled) * np.log2(np.abs(scaled) + F32(1)) / F32(math.log2(8)))
    h, w = np.meshgrid(axes[0], axes[1], indexing="ij")
    return np.stack([h, w], axis=-1).reshape(-1, 2)


@checked
def window_bias(form: str, window: list[int], table: Any = None, table_window: list[int] | None = None,
                w1: Any = None, b1: Any = None, w2: Any = None,
                pretrained_window: list[int] | None = None) -> np.ndarray:
    """Swin: rows of the float32 table; BEiT: of the table bilinearly resampled in float32 when the window
    differs; Swin V2: ``16·σ(relu(c·w1 + b1)·w2)`` in float32."""
    wh, ww = (window, window) if np.ndim(window) == 0 else tuple(window)
    if form == "swinv2":
        pretrained = None if pretrained_window is None else (
            (pretrained_window,) * 2 if np.ndim(pretrained_window) == 0 else tuple(pretrained_window))
        coords = _swinv2_coords((wh, ww), pretrained)
        w1, b1, w2 = (np.asarray(a, dtype=F32) for a in (w1, b1, w2))
        rows = F32(16) / (F32(1) + np.exp(-(np.maximum(coords @ w1 + b1, F32(0)) @ w2)))
        index = np.asarray(swin_relative_index((wh, ww)))
    elif form == "swin":
        rows, index = np.asarray(table, dtype=F32), np.asarray(swin_relative_index((wh, ww)))
    else:
        rows = np.asarray(table, dtype=F32)
        ph, pw = (table_window, table_window) if np.ndim(table_window) == 0 else tuple(table_window)
        if (ph, pw) != (wh, ww):
            r = (2 * ph - 1) * (2 * pw - 1)
            image = rows[:r].T.reshape(-1, 2 * ph - 1, 2 * pw - 1)
            resampled = _resample(image, (2 * wh - 1, 2 * ww - 1), "bilinear")
            rows = np.concatenate([resampled.reshape(rows.shape[1], -1).T, rows[r:]], axis=0)
        index = np.asarray(beit_relative_index((wh, ww)))
    return np.moveaxis(rows[index], -1, 0)


# ------------------------------------------------------------------------------------------- decomposed
def _relative_rows(table: np.ndarray, q: int, k: int) -> np.ndarray:
    """SAM's ``get_rel_pos``: the table linearly resampled to ``2·max(q, k) − 1`` rows, read at float32 row
    coordinates ``q·max(k/q, 1) − k·max(q/k, 1) + (k − 1)·max(q/k, 1)`` truncated."""
    rows = 2 * max(q, k) - 1
    if table.shape[0] != rows:
        table = _resample(table.T[None], (rows,), "linear")[0].T
    q_coords = np.arange(q, dtype=F32)[:, None] * F32(max(k / q, 1.0))
    k_coords = np.arange(k, dtype=F32)[None, :] * F32(max(q / k, 1.0))
    index = (q_coords - k_coords) + F32((k - 1) * max(q / k, 1.0))
    return table[index.astype(np.int64)]


@checked
def add_decomposed_rel_pos(attn: Any, q: Any, rel_pos_h: Any, rel_pos_w: Any, q_size: list[int],
                           k_size: list[int]) -> np.ndarray:
    """``attn + q·R_h[y, y'] + q·R_w[x, x']`` in float32 (SAM's ``add_decomposed_rel_pos``)."""
    (q_h, q_w), (k_h, k_w) = q_size, k_size
    r_h = _relative_rows(np.asarray(rel_pos_h, dtype=F32), q_h, k_h)  # (q_h, k_h, C)
    r_w = _relative_rows(np.asarray(rel_pos_w, dtype=F32), q_w, k_w)  # (q_w, k_w, C)
    attn, q = np.asarray(attn, dtype=F32), np.asarray(q, dtype=F32)
    lead = q.shape[:-2]
    r_q = q.reshape(*lead, q_h, q_w, q.shape[-1])
    rel_h = np.einsum("...hwc,hkc->...hwk", r_q, r_h)
    rel_w = np.einsum("...hwc,wkc->...hwk", r_q, r_w)
    out = attn.reshape(*lead, q_h, q_w, k_h, k_w) + rel_h[..., :, None] + rel_w[..., None, :]
    return out.reshape(attn.shape)


# ------------------------------------------------------------------------------------------- conv positions
def _activation(name: str, x: np.ndarray) -> np.ndarray:
    if name in ("gelu", "gelu_python"):
        return F32(0.5) * x * (F32(1) + _ERF(x / F32(math.sqrt(2))).astype(F32))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        inner = F32(math.sqrt(2 / math.pi)) * (x + F32(0.044715) * x * x * x)
        return F32(0.5) * x * (F32(1) + np.tanh(inner))
    if name == "relu":
        return np.maximum(x, F32(0))
    if name in ("silu", "swish"):
        return x / (F32(1) + np.exp(-x))
    return x


def _conv(h: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None, groups: int, stride: int) -> np.ndarray:
    """A grouped 1-D convolution over time of ``(B, T, C)`` frames in float32, zero padding ``⌊K/2⌋``, the last
    frame dropped when ``K`` is even."""
    b, t, c = h.shape
    k = kernel.shape[-1]
    pad = k // 2
    padded = np.concatenate([np.zeros((b, pad, c), F32), h, np.zeros((b, pad, c), F32)], axis=1)
    n_out = (t + 2 * pad - k) // stride + 1
    per = c // groups
    out = np.zeros((b, n_out, c), dtype=F32)
    for g in range(groups):
        channels = slice(g * per, (g + 1) * per)
        for tap in range(k):
            frames = padded[:, tap:tap + stride * (n_out - 1) + 1:stride, channels]  # (B, T', C/G)
            out[:, :, channels] += frames @ kernel[channels, :, tap].T
    if bias is not None:
        out = out + bias
    return out[:, :-1] if k % 2 == 0 else out


def _add(x: np.ndarray, e: np.ndarray, stride: int) -> np.ndarray:
    if stride > 1:
        windows = x.shape[1] // stride
        x = x[:, :windows * stride].reshape(x.shape[0], windows, stride, x.shape[2]).mean(axis=2, dtype=F32)
    length = min(x.shape[1], e.shape[1])
    return x[:, :length] + e[:, :length]


@checked
def conv_positions(x: Any, weight: Any, bias: Any, groups: int, activation: str, stride: int = 1,
                   weight_g: Any = None) -> np.ndarray:
    """``x + act(trim(conv(x)))`` in float32, the weight-normed kernel ``g_k·v/‖v[:, :, k]‖`` formed first."""
    x, kernel = np.asarray(x, dtype=F32), np.asarray(weight, dtype=F32)
    if weight_g is not None:
        norm = np.sqrt((kernel * kernel).sum(axis=(0, 1), dtype=F32))
        kernel = kernel * (np.asarray(weight_g, dtype=F32) / norm)
    e = _activation(activation, _conv(x, kernel, None if bias is None else np.asarray(bias, dtype=F32), groups,
                                      stride))
    return _add(x, e, stride)


@checked
def stacked_conv_positions(x: Any, weights: Any, biases: Any, groups: int, activation: str, eps: float) -> np.ndarray:
    """Data2Vec-audio: ``h ← act(LN(trim(conv(h))))`` per layer, then ``x + h``, in float32."""
    x = np.asarray(x, dtype=F32)
    h = x
    for kernel, bias in zip(np.asarray(weights, dtype=F32), np.asarray(biases, dtype=F32), strict=True):
        h = _conv(h, kernel, bias, groups, 1)
        centred = h - h.mean(axis=-1, keepdims=True, dtype=F32)
        h = _activation(activation, centred / np.sqrt((centred * centred).mean(axis=-1, keepdims=True, dtype=F32)
                                                      + F32(eps)))
    return _add(x, h, 1)
