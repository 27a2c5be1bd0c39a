"""Absolute encodings in float32, every angle ``p·ω`` in the configured angle form: the sinusoid and its shift
matrix (docs/sinusoidal.md), the 1-D audio and time-series sinusoids (docs/sinusoid1d.md), the fixed 2-D sin–cos
grids and DETR's sine maps (docs/sincos2d.md), SAM's and Perceiver's Fourier features (docs/fourier.md), and the
learned table's lookup."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refpos.testing.adapter import learned_lookup as _checked_lookup
from spec_tests.float32_forms._base import F32, angles, checked, planted


def _pairs(first: np.ndarray, second: np.ndarray, layout: str) -> np.ndarray:
    """Per-pair values ``(..., m)`` at channels ``(2k, 2k + 1)`` (interleaved) or ``(k, k + m)`` (concat)."""
    if layout == "interleaved":
        return np.stack([first, second], axis=-1).reshape(*first.shape[:-1], 2 * first.shape[-1])
    return np.concatenate([first, second], axis=-1)


@checked
def sinusoidal(positions: Any, dim: int, base: float = 10000.0, layout: str = "interleaved",
               spacing: str = "paper") -> np.ndarray:
    """sin and cos of ``p·ω_k``: ``ω_k = base^(−2k/dim)`` (paper) or ``exp(−k·ln base/max(dim/2 − 1, 1))``
    (tensor2tensor), by the configured form."""
    half = dim // 2 if spacing == "paper" else max(dim // 2 - 1, 1)
    phase = angles(np.asarray(positions).astype(np.int64), base, half, np.ones(dim // 2, dtype=F32))
    return _pairs(np.sin(phase), np.cos(phase), layout)


@checked
def sinusoidal_shift_matrix(r: int, dim: int, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """``M_r``: per frequency the block ``[[cos ωr, sin ωr], [−sin ωr, cos ωr]]`` on the (sin, cos) channels."""
    m = dim // 2
    phase = angles(np.asarray(int(r)), base, m, np.ones(m, dtype=F32))
    cos, sin = np.cos(phase), np.sin(phase)
    k = np.arange(m)
    s_ch, c_ch = (2 * k, 2 * k + 1) if layout == "interleaved" else (k, k + m)
    out = np.zeros((dim, dim), dtype=F32)
    out[s_ch, s_ch], out[s_ch, c_ch], out[c_ch, s_ch], out[c_ch, c_ch] = cos, sin, -sin, cos
    return out


def learned_lookup(table: Any, positions: Any) -> np.ndarray:
    """Rows of the table stored in float32 (a gather: no arithmetic)."""
    _checked_lookup(table, positions)
    return np.asarray(table, dtype=F32)[np.asarray(positions).astype(np.int64)]


# ---------------------------------------------------------------------------------------- 1-D sinusoids
@checked
def sinusoid_1d(positions: Any, dim: int, spacing: str, layout: str, first: str = "sin", base: float = 10000.0,
                frequency_scale: float = 1.0, amplitude: float = 1.0) -> np.ndarray:
    """Pair k ``a·(sin pω'_k, cos pω'_k)`` (or cos first), ``ω'_k = s·ω_k``, in float32."""
    m = dim // 2
    denom = m if spacing == "paper" else max(m - 1, 1)  # one pair (dim 2): ω_0 = 1 whatever the denominator
    phase = angles(np.asarray(positions).astype(np.int64), base, denom, np.full(m, F32(frequency_scale)))
    sin, cos = np.sin(phase), np.cos(phase)
    if amplitude != 1.0:
        sin, cos = sin * F32(amplitude), cos * F32(amplitude)
    return _pairs(sin, cos, layout) if first == "sin" else _pairs(cos, sin, layout)


@checked
def padded_sinusoid(mask: Any, dim: int, padding_idx: int, past: int = 0) -> np.ndarray:
    """fairseq's table at ``padding_idx + (past + count so far)`` for real steps, the zero row for padding."""
    m = np.asarray(mask).astype(np.int64)
    positions = padding_idx + (np.cumsum(m, axis=-1) + past) * m
    table = sinusoid_1d.__wrapped__(positions, dim, "tensor2tensor", "concat")
    return np.where((positions == padding_idx)[..., None], F32(0), table)


# ---------------------------------------------------------------------------------------- 2-D sin–cos
def _sine_block(values: np.ndarray, width: int, temperature: float, layout: str, rule: str = "paired") -> np.ndarray:
    """The ``width`` channels of float32 values ``(...,)``: ``(sin vω, cos vω)`` per frequency."""
    half = width // 2
    if rule == "paired":  # ω_j = T^(−2j/W) = T^(−j/(W/2))
        phase = angles(values, temperature, half, np.ones(half, dtype=F32))
    else:  # ω_k = T^(−2⌊k/2⌋/(W/2)) = T^(−⌊k/2⌋/(W/4))
        distinct = angles(values, temperature, width / 4, np.ones((half + 1) // 2, dtype=F32))
        phase = distinct[..., np.arange(half) // 2]
    return _pairs(np.sin(phase), np.cos(phase), layout)


@checked
def sincos_2d_grid(height: int, width: int, dim: int, temperature: float = 10000.0, axes: str = "yx",
                   flatten: str = "row_major", cls_rows: int = 0) -> np.ndarray:
    """``[sin aω | cos aω | sin bω | cos bω]`` per token, ``ω_j = T^(−j/(dim/4))``, float32 angles."""
    t = np.arange(height * width)
    y, x = (t // width, t % width) if flatten == "row_major" else (t % height, t // height)
    a, b = (y, x) if axes == "yx" else (x, y)
    quarter = dim // 4
    blocks = []
    for coordinate in (a, b):
        phase = planted("sincos2d", angles(coordinate, temperature, quarter, np.ones(quarter, dtype=F32)))
        blocks += [np.sin(phase), np.cos(phase)]
    return np.concatenate([np.zeros((cls_rows, dim), dtype=F32), np.concatenate(blocks, axis=-1)], axis=0)


@checked
def sine_position_map(mask: Any, num_features: int, temperature: float | list = 10000.0, normalize: bool = True,
                      scale: float | None = None, offset: float = 0.0, eps: float = 1e-6) -> np.ndarray:
    """DETR's ``PositionEmbeddingSine`` in float32: cumulative sums, normalised, then interleaved sin/cos."""
    m = np.asarray(mask).astype(F32)
    y, x = np.cumsum(m, axis=-2, dtype=F32), np.cumsum(m, axis=-1, dtype=F32)
    if normalize:
        s = F32(2 * math.pi if scale is None else scale)
        y = (y + F32(offset)) / (y[..., -1:, :] + F32(eps)) * s
        x = (x + F32(offset)) / (x[..., :, -1:] + F32(eps)) * s
    t_y, t_x = (temperature, temperature) if np.ndim(temperature) == 0 else tuple(temperature)
    return np.concatenate([_sine_block(y, num_features, float(t_y), "interleaved"),
                           _sine_block(x, num_features, float(t_x), "interleaved")], axis=-1)


@checked
def sine_coordinates(coords: Any, num_features: int, temperature: float = 10000.0, scale: float = 2 * math.pi,
                     swap_xy: bool = True, layout: str = "interleaved", rule: str = "paired") -> np.ndarray:
    """One float32 sine block per coordinate of ``scale·c`` (the first two exchanged when ``swap_xy``)."""
    c = np.asarray(coords, dtype=F32) * F32(scale)
    order = list(range(c.shape[-1]))
    if swap_xy and len(order) >= 2:
        order[0], order[1] = 1, 0
    return np.concatenate([_sine_block(c[..., a], num_features, temperature, layout, rule) for a in order], axis=-1)


# ---------------------------------------------------------------------------------------- Fourier features
@checked
def fourier_features(coords: Any, gaussian: Any) -> np.ndarray:
    """SAM's ``PositionEmbeddingRandom``: ``2π·((2c − 1) @ G)``, then ``[sin | cos]``, in float32."""
    c = F32(2) * np.asarray(coords, dtype=F32) - F32(1)
    phase = F32(2 * math.pi) * (c @ np.asarray(gaussian, dtype=F32))
    return np.concatenate([np.sin(phase), np.cos(phase)], axis=-1)


@checked
def perceiver_fourier_features(positions: Any, num_bands: int, max_resolution: list, concat_pos: bool = True,
                               sine_only: bool = False) -> np.ndarray:
    """``[x | sin(π f x) | cos(π f x)]``, bands ``linspace(1, r_a/2, K)`` in float32, flattened axis-major."""
    pos = np.asarray(positions, dtype=F32)
    k = np.arange(num_bands, dtype=F32)
    steps = [F32((r / 2 - 1) / (num_bands - 1)) if num_bands > 1 else F32(0) for r in max_resolution]
    bands = np.stack([F32(1) + k * step for step in steps])  # (N, K)
    features = (pos[:, :, None] * bands[None]).reshape(pos.shape[0], -1)  # (M, N·K)
    phase = F32(math.pi) * features
    parts = [pos] if concat_pos else []
    parts += [np.sin(phase)] if sine_only else [np.sin(phase), np.cos(phase)]
    return np.concatenate(parts, axis=-1)
