"""RoPE in float32: every scaling rule of docs/extrapolation.md, both placements, the three layouts, M-RoPE
(docs/mrope.md), the complex form, the rotation matrix, the rotation with given tables, the logits of rotated
q and k, transformers' stateful dynamic NTK, and the vision encoders' 2-D RoPE.

A pair's frequency is ``ω_j = b^(−j/n)·f_j``: the geometric part in the configured angle form
(:func:`spec_tests.float32_forms._base.ratio_powers`, at the rule's base ``b``: θ, NTK's ``θ·s^(d/(d−2))``,
dynamic NTK's ``θ'(L)``, …) and the rule's per-pair factor ``f_j`` formed in float32 (``1/s``; YaRN's blend
``(1 − γ_j) + γ_j/s``; log-space YaRN's ``s^(−(1 − μ_j))``; llama3's band blend; LongRoPE's ``1/λ_j``; vLLM's
mixed NTK ``1/exp(a(j + 1)^b)``). The scalars a port computes in Python floats before any tensor exists (the
resolved config, the NTK base, YaRN's ramp bounds, the attention factor A, the softmax multiplier) are
float64, as in transformers' init functions; every array is float32.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import refpos
from refpos.pairs import place_pairs, span_bounds, split_pairs
from refpos.rope.mrope import pair_axes
from refpos.rope.rules.step import step_alpha
from refpos.rope.scaling import attention_factor, softmax_multiplier, yarn_correction_range
from refpos.testing.adapter import DynamicNTKState
from spec_tests.float32_forms._base import F32, angles, checked, ratio_powers


# --------------------------------------------------------------------------------------- frequencies
def _scaled_base(theta: float, ratio: float, d: int) -> float:
    """``θ·ratio^(d/(d−2))``: the NTK family's base, a Python float."""
    return theta * ratio ** (d / (d - 2))


def _ramp(rope: Any, truncate: bool | None = None) -> np.ndarray:
    """YaRN's ``γ_j = clip((j − lo)/(hi − lo), 0, 1)`` in float32 (``lo``, ``hi`` Python floats)."""
    lo, hi = yarn_correction_range(rope, truncate=truncate)
    if lo == hi:
        hi += 0.001
    j = np.arange(rope.rotary_dim // 2, dtype=F32)
    return np.clip((j - F32(lo)) / F32(hi - lo), F32(0), F32(1))


def _llama3_factors(rope: Any, inv: np.ndarray) -> np.ndarray:
    """ω_scaled/ω per pair, as transformers computes llama3 in float32: 1/s beyond L0/low, 1 below L0/high, the
    smooth blend between."""
    s, low, high, l0 = (F32(v) for v in (rope.factor, rope.low_freq_factor, rope.high_freq_factor,
                                         rope.original_max_position_embeddings))
    wavelen = F32(2 * math.pi) / inv
    factors = np.ones_like(inv)
    factors[wavelen > l0 / low] = F32(1) / s
    middle = ~((wavelen > l0 / low) | (wavelen < l0 / high))
    smooth = (l0 / wavelen[middle] - low) / (high - low)
    factors[middle] = (F32(1) - smooth) / s + smooth
    return factors


def _frequency_parts(rope: Any, seq_len: int | None) -> tuple[float, float, np.ndarray, float]:
    """``(base, n, factors, A)`` of a resolved config: ``ω_j = base^(−j/n)·factors_j``."""
    kind, d, theta = rope.rope_type, rope.rotary_dim, float(rope.theta)
    m, n = d // 2, d / 2
    ones = np.ones(m, dtype=F32)
    factor = None if rope.factor is None else float(rope.factor)
    a = float(attention_factor(rope, seq_len))
    if kind == "default":
        return theta, n, ones, a
    if kind == "linear":
        return theta, n, ones / F32(factor), a
    if kind == "proportional":  # exponent over the whole head; pairs past the rotated ones do not turn
        half = rope.head_dim // 2
        factors = np.zeros(half, dtype=F32)
        factors[:m] = F32(1) / F32(factor)
        return theta, rope.head_dim / 2, factors, a
    if kind == "ntk":
        if rope.ntk_rule == "vllm_fixed":
            return theta * factor, n, ones / F32(factor ** (2 / d)), a
        if rope.ntk_rule == "vllm_mixed":
            b = float(rope.mixed_b)
            scale = F32(math.log(factor) / (d / 2) ** b)
            return theta, n, F32(1) / np.exp(scale * np.arange(1, m + 1, dtype=F32) ** F32(b)), a
        return _scaled_base(theta, factor, d), n, ones, a
    if kind == "dynamic":
        l_max = rope.max_position_embeddings
        length = factor * l_max if rope.dynamic_rule == "vllm_static" else seq_len
        l_eff = l_max if length is None else max(length, l_max)
        return _scaled_base(theta, factor * l_eff / l_max - (factor - 1), d), n, ones, a
    if kind == "dynamic_step":
        return _scaled_base(theta, step_alpha(seq_len, rope.original_max_position_embeddings), d), n, ones, a
    if kind == "yarn":
        gamma = _ramp(rope)
        return theta, n, (F32(1) - gamma) + gamma / F32(factor), a
    if kind == "yarn_log":
        mu = (F32(1) - _ramp(rope, truncate=True)) * F32(rope.extrapolation_factor)
        return theta, n, F32(factor) ** (-(F32(1) - mu)), a
    if kind == "llama3":
        return theta, n, _llama3_factors(rope, ratio_powers(theta, n, m)), a
    if kind == "longrope":
        long = bool(seq_len) and seq_len > rope.original_max_position_embeddings
        return theta, n, F32(1) / np.asarray(rope.long_factor if long else rope.short_factor, dtype=F32), a
    raise NotImplementedError(f"rope_type {kind!r}")


def _config(rope: dict) -> Any:
    """The resolved config (defaults, checks: configuration bookkeeping, no array arithmetic)."""
    return refpos.rope_config_from_params(rope)


def _positions(positions: Any) -> np.ndarray:
    return np.asarray(positions).astype(np.int64)


def _pair_angles(positions: np.ndarray, rope: Any, seq_len: int | None) -> tuple[np.ndarray, float]:
    """Angles ``(..., T, m)`` per pair (M-RoPE: pair j at its row's position) and A."""
    if seq_len is None and rope.rope_type in ("dynamic", "dynamic_step", "longrope") and positions.size:
        seq_len = int(positions.max()) + 1
    base, n, factors, a = _frequency_parts(rope, seq_len)
    if rope.mrope_section is None:
        return angles(positions, base, n, factors), a
    sections = tuple(rope.mrope_section)
    rows = len(sections)
    if positions.ndim == 1 or positions.shape[0] != rows:
        positions = np.broadcast_to(positions, (rows, *positions.shape))
    per_row = angles(positions, base, n, factors)  # (R, ..., T, m)
    axes = np.asarray(pair_axes(sections, rope.mrope_scheme))
    return np.stack([per_row[axes[j], ..., j] for j in range(axes.size)], axis=-1), a  # φ_j = p_{a(j)}·ω_j


def _tables(positions: np.ndarray, rope: Any, seq_len: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``(A·cos φ, A·sin φ)`` per pair, float32."""
    phase, a = _pair_angles(positions, rope, seq_len)
    cos, sin = np.cos(phase), np.sin(phase)
    if a != 1.0:
        cos, sin = cos * F32(a), sin * F32(a)
    return cos, sin


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, rope: Any) -> np.ndarray:
    """The rotated span's pairs ``u' = u·cos − v·sin``, ``v' = v·cos + u·sin``; other channels unchanged."""
    width = 2 * cos.shape[-1]
    start, stop = span_bounds(rope.head_dim, width, rope.placement)
    u, v = split_pairs(x[..., start:stop], rope.layout)
    rotated = place_pairs(u * cos - v * sin, v * cos + u * sin, rope.layout)
    shape = np.broadcast_shapes(x.shape[:-1], rotated.shape[:-1])
    parts = [np.broadcast_to(x[..., :start], (*shape, start)), rotated,
             np.broadcast_to(x[..., stop:], (*shape, x.shape[-1] - stop))]
    return np.concatenate([np.broadcast_to(p, (*shape, p.shape[-1])) for p in parts], axis=-1).astype(F32)


@checked
def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    cfg = _config(rope)
    base, n, factors, a = _frequency_parts(cfg, seq_len)
    return angles(np.ones((), dtype=np.int64), base, n, factors), a  # ω_j: the angle at p = 1


@checked
def rope_cos_sin(positions: Any, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    cfg = _config(rope)
    cos, sin = _tables(_positions(positions), cfg, seq_len)
    layout = cfg.layout
    return place_pairs(cos, cos, layout), place_pairs(sin, sin, layout)


@checked
def apply_rope(x: Any, positions: Any, rope: dict, seq_len: int | None = None) -> np.ndarray:
    cfg = _config(rope)
    x = np.asarray(x, dtype=F32)
    cos, sin = _tables(_positions(positions), cfg, seq_len)
    while cos.ndim < x.ndim and cos.ndim > 2:  # (B, T) positions with x (B, H, T, D): broadcast over the heads
        cos, sin = np.expand_dims(cos, -3), np.expand_dims(sin, -3)
    return _rotate(x, cos, sin, cfg)


@checked
def apply_rope_complex(x: Any, positions: Any, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``z' = A·exp(iφ)·z`` in complex64, ``z = u + iv`` per pair (Meta's ``torch.polar`` form)."""
    cfg = _config(rope)
    x = np.asarray(x, dtype=F32)
    phase, a = _pair_angles(_positions(positions), cfg, seq_len)
    while phase.ndim < x.ndim and phase.ndim > 2:
        phase = np.expand_dims(phase, -3)
    turn = (F32(a) * (np.cos(phase) + np.complex64(1j) * np.sin(phase))).astype(np.complex64)
    start, stop = span_bounds(cfg.head_dim, 2 * phase.shape[-1], cfg.placement)
    u, v = split_pairs(x[..., start:stop], cfg.layout)
    z = (u + np.complex64(1j) * v).astype(np.complex64) * turn
    rotated = place_pairs(z.real.astype(F32), z.imag.astype(F32), cfg.layout)
    shape = rotated.shape[:-1]
    return np.concatenate([np.broadcast_to(x[..., :start], (*shape, start)), rotated,
                           np.broadcast_to(x[..., stop:], (*shape, x.shape[-1] - stop))], axis=-1)


@checked
def rope_rotation_matrix(position: int, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``M`` with ``M @ x = apply_rope(x, [p])``: the rotation of each basis vector, one column each."""
    cfg = _config(rope)
    d = cfg.head_dim
    cos, sin = _tables(np.full(d, int(position), dtype=np.int64), cfg, position + 1 if seq_len is None else seq_len)
    return _rotate(np.eye(d, dtype=F32), cos, sin, cfg).T


@checked
def apply_rope_tables(x: Any, positions: Any, cos: Any, sin: Any, rope: dict) -> np.ndarray:
    """The rotation alone: row ``p`` of the given tables (stored in float32) per token; M-RoPE pair j at row
    ``p_{a(j)}``."""
    cfg = _config(rope)
    x, pos = np.asarray(x, dtype=F32), _positions(positions)
    cos, sin = np.asarray(cos, dtype=F32), np.asarray(sin, dtype=F32)
    if cfg.mrope_section is None:
        c, s = cos[pos], sin[pos]
    else:
        sections = tuple(cfg.mrope_section)
        if pos.ndim == 1 or pos.shape[0] != len(sections):
            pos = np.broadcast_to(pos, (len(sections), *pos.shape))
        axes = pair_axes(sections, cfg.mrope_scheme)
        c = np.stack([cos[pos[a], j] for j, a in enumerate(axes)], axis=-1)
        s = np.stack([sin[pos[a], j] for j, a in enumerate(axes)], axis=-1)
    while c.ndim < x.ndim and c.ndim > 2:
        c, s = np.expand_dims(c, -3), np.expand_dims(s, -3)
    return _rotate(x, c, s, cfg)


@checked
def rope_softmax_multiplier(rope: dict) -> float:
    return float(softmax_multiplier(_config(rope)))


@checked
def rope_attention_logits(q: Any, k: Any, q_positions: Any, k_positions: Any, rope: dict,
                          seq_len: int | None = None) -> np.ndarray:
    """``(R q)·(R k)ᵀ·D^(−1/2)`` (× the DeepSeek multiplier when ``softmax_mscale``) in float32."""
    cfg = _config(rope)
    qp, kp = _positions(q_positions), _positions(k_positions)
    if seq_len is None:
        seq_len = int(max(qp.max(initial=0), kp.max(initial=0))) + 1
    q_rot = _rotate(np.asarray(q, dtype=F32), *_tables(qp, cfg, seq_len), cfg)
    k_rot = _rotate(np.asarray(k, dtype=F32), *_tables(kp, cfg, seq_len), cfg)
    scale = q_rot.shape[-1] ** -0.5 * (float(softmax_multiplier(cfg)) if cfg.softmax_mscale else 1.0)
    return (q_rot @ np.swapaxes(k_rot, -1, -2)) * F32(scale)


@checked
def rope_dynamic_ntk_frequencies(rope: dict, seq_lens: list[int]) -> np.ndarray:
    """The ω of each call: the length each call computes at is transformers' cache bookkeeping (integers,
    :class:`refpos.rope.DynamicNTKState`); the frequencies at that length are float32 here."""
    cfg = _config(rope)
    state, out = DynamicNTKState(cfg), []
    for length in seq_lens:
        state.update(int(length))
        base, n, factors, _ = _frequency_parts(cfg, state.length_used)
        out.append(angles(np.ones((), dtype=np.int64), base, n, factors))
    return np.stack(out) if out else np.zeros((0, 0), dtype=F32)


# --------------------------------------------------------------------------------------- vision
@checked
def apply_vision_rope(x: Any, positions: Any, rope: dict) -> np.ndarray:
    """Block ``a``'s pair ``k`` turns by ``p_a·θ^(−k/s_a)`` (axial), or the named forms' frequencies: Qwen2-VL
    and Llama 4 ``θ^(−j'/(D/4))`` per coordinate (Llama 4 w first), Pixtral ``θ^(−(2j' + b)/(D/2))``."""
    form, d = rope["form"], int(rope["head_dim"])
    theta = float(rope.get("rope_theta", 10000.0))
    pos = np.asarray(positions).astype(np.int64)
    x = np.asarray(x, dtype=F32)
    if form == "axial":
        sections, layout = [int(s) for s in rope["sections"]], rope.get("layout") or "half"
        blocks = [angles(pos[..., a], theta, s, np.ones(s, dtype=F32)) for a, s in enumerate(sections)]
        phase = np.concatenate(blocks, axis=-1)
    else:
        quarter = d // 4
        layout = "interleaved" if form == "llama4" else "half"
        if form == "pixtral":
            full = angles(pos, theta, d / 2, np.ones(2 * quarter, dtype=F32))  # (..., N, 2, D/2)
            phase = np.concatenate([full[..., 0, 0::2], full[..., 1, 1::2]], axis=-1)
        else:
            per_axis = angles(pos, theta, d / 4, np.ones(quarter, dtype=F32))  # (..., N, 2, D/4)
            first, second = (1, 0) if form == "llama4" else (0, 1)
            phase = np.concatenate([per_axis[..., first, :], per_axis[..., second, :]], axis=-1)
    cos, sin = np.cos(phase), np.sin(phase)
    u, v = split_pairs(x, layout)
    return place_pairs(u * cos - v * sin, v * cos + u * sin, layout)
