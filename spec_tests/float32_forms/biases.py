"""Relative encodings in float32: ALiBi (BLOOM's slopes as ``base^h`` in float32, ``m·distance``), T5's buckets
through a float32 log and its bias gather, KERPLE, FIRE, Sandwich, DeBERTa's float32 log buckets and logits,
CoPE, Shaw, Transformer-XL and xPos: each as the model's PyTorch code computes it in float32 (the formulas of
spec_tests/README.md, docs/alibi.md, docs/relative.md, docs/other-encodings.md, docs/deberta.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spec_tests.float32_forms._base import F32, angles, checked, planted
from spec_tests.float32_forms.attention import softmax


def _ints(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.int64)


# ------------------------------------------------------------------------------------------------ ALiBi
def _powers_of(exponent: float, count: int, step: int = 1) -> np.ndarray:
    """``base^h`` for ``h = 1, 1 + step, …`` (``count`` of them), ``base = 2^(−2^(−exponent))`` in float32."""
    base = F32(2 ** (-(2 ** -exponent)))
    return base ** np.arange(1, 1 + step * count, step, dtype=F32)


@checked
def alibi_slopes(n_heads: int) -> np.ndarray:
    """BLOOM's ``build_alibi_tensor``: ``c = 2^⌊log2 n⌋`` slopes ``b^h`` with ``b = 2^(−8/c)``, then the odd
    powers of ``2^(−4/c)`` for the heads past ``c``, in float32."""
    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = _powers_of(math.log2(closest) - 3, closest)
    if closest != n_heads:
        slopes = np.concatenate([slopes, _powers_of(math.log2(2 * closest) - 3, n_heads - closest, step=2)])
    return slopes


@checked
def alibi_bias(n_heads: int, q_len: int, k_len: int, form: str = "causal") -> np.ndarray:
    """``−m_h·(i − j)``, ``−m_h·|i − j|`` or ``m_h·j`` in float32, query ``i`` at ``k_len − q_len + i``."""
    m = alibi_slopes(n_heads)[:, None, None]
    i = (np.arange(q_len) + (k_len - q_len))[:, None]
    j = np.arange(k_len)[None, :]
    if form == "causal":
        return planted("alibi", -m * (i - j).astype(F32))
    if form == "symmetric":
        return planted("alibi", -m * np.abs(i - j).astype(F32))
    return planted("alibi", m * np.broadcast_to(j, (q_len, k_len)).astype(F32))


# ------------------------------------------------------------------------------------------------- T5
@checked
def t5_bucket(relative_position: Any, bidirectional: bool = True, num_buckets: int = 32,
              max_distance: int = 128) -> np.ndarray:
    """transformers' ``_relative_position_bucket``: the log part ``ln(n/e)/ln(D/e)·(B − e)`` in float32, then
    truncated (``e`` = max_exact, ``D`` = max_distance, ``B`` the buckets of one direction)."""
    rel = _ints(relative_position)
    offset = np.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        offset = (rel > 0).astype(np.int64) * num_buckets
        n = np.abs(rel)
    else:
        n = -np.minimum(rel, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        ratio = np.log(n.astype(F32) / F32(max_exact)) / F32(math.log(max_distance / max_exact)) \
            * F32(num_buckets - max_exact)
    ratio = planted("t5", np.where(n < max_exact, F32(0), ratio))
    large = np.minimum(max_exact + ratio.astype(np.int64), num_buckets - 1)
    return offset + np.where(n < max_exact, n, large)


@checked
def t5_bias(table: Any, q_positions: Any, k_positions: Any, bidirectional: bool = True,
            max_distance: int = 128) -> np.ndarray:
    """``table[bucket(k − q), h]`` ``(H, Tq, Tk)``, the table stored in float32."""
    table = np.asarray(table, dtype=F32)
    rel = _ints(k_positions)[None, :] - _ints(q_positions)[:, None]
    bucket = t5_bucket(rel, bidirectional=bidirectional, num_buckets=table.shape[0], max_distance=max_distance)
    return np.moveaxis(table[bucket], -1, 0)


# ------------------------------------------------------------------------------ KERPLE, FIRE, Sandwich
@checked
def kerple_bias(r1: Any, r2: Any, q_positions: Any, k_positions: Any, kind: str = "log") -> np.ndarray:
    """``−r1·log(1 + r2·n)`` or ``−r1·n^r2``, ``n = max(q − k, 0)``, r1, r2 clamped to ``>= 0.01`` (power: r2
    ``<= 2``), in float32."""
    n = np.maximum(_ints(q_positions)[:, None] - _ints(k_positions)[None, :], 0).astype(F32)
    a = np.maximum(np.asarray(r1, dtype=F32), F32(0.01))[:, None, None]
    b = np.maximum(np.asarray(r2, dtype=F32), F32(0.01))[:, None, None]
    if kind == "log":
        return -a * np.log1p(b * n)
    return -a * n ** np.minimum(b, F32(2))


@checked
def fire_bias(q_positions: Any, k_positions: Any, w1: Any, b1: Any, w2: Any, b2: Any, c: float = 0.1,
              L: float = 512.0, eps: float = 1e-6) -> np.ndarray:
    """``w2 @ relu(w1·φ + b1) + b2`` with ``φ = log(|c(i − j)| + 1)/(log(|c·max(i, |L|)| + 1) + eps)``, float32."""
    i = _ints(q_positions).astype(F32)
    dist = i[:, None] - _ints(k_positions).astype(F32)[None, :]
    norm = np.maximum(i, F32(abs(L)))[:, None]
    phi = np.log(np.abs(F32(c) * dist) + F32(1)) / (np.log(np.abs(F32(c) * norm) + F32(1)) + F32(eps))
    w1, b1, w2, b2 = (np.asarray(a, dtype=F32) for a in (w1, b1, w2, b2))
    hidden = np.maximum(phi[..., None] * w1 + b1, F32(0))  # (Tq, Tk, width)
    return np.moveaxis(hidden @ w2.T + b2, -1, 0)


@checked
def sandwich_bias(q_positions: Any, k_positions: Any, head_dim: int, n_heads: int, causal: bool = True) -> np.ndarray:
    """``(Σ_{k=1}^{d/2} cos(rel·10000^(−2k/d)) − d/2)/(8h/H)`` with float32 angles in the configured form."""
    rel = _ints(k_positions)[None, :] - _ints(q_positions)[:, None]
    if causal:
        rel = np.minimum(rel, 0)
    half = head_dim // 2
    raw = np.cos(angles(rel, 10000.0, half, np.ones(half, dtype=F32), start=1)).sum(axis=-1, dtype=F32)
    heads = (F32(8) * np.arange(1, n_heads + 1, dtype=F32) / F32(n_heads))[:, None, None]
    return (raw - F32(half)) / heads


# --------------------------------------------------------------------------------------------- DeBERTa
@checked
def deberta_log_buckets(relative: Any, position_buckets: int, max_relative_positions: int) -> np.ndarray:
    """transformers' ``make_log_bucket_position``: ``ceil(ln(|δ|/mid)/ln((m − 1)/mid)·(mid − 1))`` in float32."""
    delta = _ints(relative)
    mid = position_buckets // 2
    far = np.where(np.abs(delta) <= mid, mid, np.abs(delta)).astype(F32)
    log_part = np.ceil(np.log(far / F32(mid)) / np.log(F32((max_relative_positions - 1) / mid)) * F32(mid - 1))
    return np.where(np.abs(delta) <= mid, delta, np.sign(delta) * (mid + log_part.astype(np.int64)))


@checked
def deberta_attention_logits(q: Any, k: Any, pos_key: Any, pos_query: Any, position_buckets: int,
                             max_relative_positions: int, pos_att_type: list[str],
                             positions: Any = None) -> np.ndarray:
    """``(q·kᵀ + c2p + p2c)/√(d(1 + n))`` in float32, c2p and p2c gathered from ``q·K_rᵀ`` and ``k·Q_rᵀ``."""
    q, k = np.asarray(q, dtype=F32), np.asarray(k, dtype=F32)
    t, d = q.shape[-2], q.shape[-1]
    pos = np.arange(t) if positions is None else _ints(positions)
    delta = pos[:, None] - pos[None, :]
    span = position_buckets if position_buckets > 0 else max_relative_positions
    bucket = deberta_log_buckets(delta, position_buckets, max_relative_positions) if position_buckets > 0 else delta
    idx = np.clip(bucket + span, 0, 2 * span - 1)  # (T, T)
    terms = list(pos_att_type)
    scale = F32(math.sqrt(d * (1 + len(terms))))
    score = (q @ np.swapaxes(k, -1, -2)) / scale
    rows = np.arange(t)[:, None]
    if "c2p" in terms:
        c2p = q @ np.swapaxes(np.asarray(pos_key, dtype=F32), -1, -2)  # (H, T, 2s)
        score = score + c2p[..., rows, idx] / scale
    if "p2c" in terms:
        p2c = k @ np.swapaxes(np.asarray(pos_query, dtype=F32), -1, -2)  # (H, T_k, 2s)
        score = score + p2c[..., rows.T, idx] / scale
    return score


# ------------------------------------------------------------------------------------------------ CoPE
@checked
def cope_positions(gates: Any, npos: int) -> np.ndarray:
    """``min(Σ_{t >= j} g_it, npos − 1)``: a float32 reverse cumulative sum."""
    g = np.asarray(gates, dtype=F32)
    suffix = np.flip(np.cumsum(np.flip(g, axis=-1), axis=-1, dtype=F32), axis=-1)
    return np.minimum(suffix, F32(npos - 1))


@checked
def cope_logits(q: Any, k: Any, e: Any, gates: Any = None) -> np.ndarray:
    """``(q_i·k_j + pos_ij)/√d`` in float32: gates ``σ(q·kᵀ/√d)`` on the past (or the given ones), positions
    from :func:`cope_positions`, ``pos_ij`` interpolated between columns ``⌊p⌋`` and ``⌈p⌉`` of ``z = q e``."""
    q, k, e = (np.asarray(a, dtype=F32) for a in (q, k, e))
    t = q.shape[-2]
    past = np.tril(np.ones((t, t), dtype=bool))
    qk = q @ np.swapaxes(k, -1, -2)
    scale = F32(1 / math.sqrt(q.shape[-1]))
    g = F32(1) / (F32(1) + np.exp(-(qk * scale))) if gates is None else np.asarray(gates, dtype=F32)
    g = np.broadcast_to(np.where(past, g, F32(0)), qk.shape)
    p = cope_positions(g, e.shape[1])
    z = q @ e  # (H, T, npos)
    lo, hi = np.floor(p), np.ceil(p)
    w = p - lo
    pick = np.take_along_axis
    pos = pick(z, hi.astype(np.int64), axis=-1) * w + pick(z, lo.astype(np.int64), axis=-1) * (F32(1) - w)
    return np.where(past, (qk + pos) * scale, F32(-np.inf))


# ------------------------------------------------------------------------------- Shaw, Transformer-XL, xPos
@checked
def shaw_attention(q: Any, k: Any, v: Any, w_k: Any, w_v: Any, max_relative_position: int, positions: Any = None,
                   causal: bool = False) -> np.ndarray:
    """``softmax(q·(k + a^K)/√d)·(v + a^V)`` in float32, ``a`` the rows ``clip(p_j − p_i, −k, k) + k``."""
    q, k, v, w_k, w_v = (np.asarray(a, dtype=F32) for a in (q, k, v, w_k, w_v))
    t = q.shape[-2]
    pos = np.arange(t) if positions is None else _ints(positions)
    idx = np.clip(pos[None, :] - pos[:, None], -max_relative_position, max_relative_position) + max_relative_position
    a_k, a_v = w_k[idx], w_v[idx]  # (T, T, d), (T, T, dv)
    scale = F32(1 / math.sqrt(q.shape[-1]))
    e = (q @ np.swapaxes(k, -1, -2) + np.einsum("htd,tsd->hts", q, a_k)) * scale
    mask = (pos[None, :] <= pos[:, None]) if causal else None
    alpha = softmax(e, mask=mask)
    return alpha @ v + np.einsum("hts,tsd->htd", alpha, a_v)


@checked
def txl_scores(q: Any, k: Any, r_head_k: Any, u: Any, v: Any) -> np.ndarray:
    """``((q + u)·k + shift((q + v)·Rᵀ))/√d`` in float32, future keys ``-inf``."""
    q, k, r, u, v = (np.asarray(a, dtype=F32) for a in (q, k, r_head_k, u, v))
    qlen, klen = q.shape[-2], k.shape[-2]
    mlen = klen - qlen
    ac = (q + u[..., None, :]) @ np.swapaxes(k, -1, -2)
    bd_full = (q + v[..., None, :]) @ np.swapaxes(r, -1, -2)  # row t: distance klen − 1 − t
    i, j = np.arange(qlen)[:, None], np.arange(klen)[None, :]
    valid = j <= mlen + i
    row = np.where(valid, klen - 1 - (mlen + i - j), 0)
    bd = np.take_along_axis(bd_full, np.broadcast_to(row, bd_full.shape[:-2] + row.shape), axis=-1)
    return np.where(valid, (ac + bd) * F32(1 / math.sqrt(q.shape[-1])), F32(-np.inf))


@checked
def xpos(q: Any, k: Any, q_positions: Any, k_positions: Any, base: float = 10000.0,
         scale_base: float = 512.0) -> tuple[np.ndarray, np.ndarray]:
    """rotary-embedding-torch's xPos in float32: interleaved rotation, q times ``ζ^((m − c)/γ)``, k divided."""
    q, k = np.asarray(q, dtype=F32), np.asarray(k, dtype=F32)
    d = q.shape[-1]
    zeta = (np.arange(0, d, 2, dtype=F32) + F32(0.4 * d)) / F32(1.4 * d)
    center = len(k_positions) // 2

    def turned(x: np.ndarray, positions: Any, sign: int) -> np.ndarray:
        pos = _ints(positions)
        phase = angles(pos, base, d / 2, np.ones(d // 2, dtype=F32))
        cos, sin = np.cos(phase), np.sin(phase)
        power = (pos - center).astype(F32) / F32(scale_base)
        scale = zeta ** (F32(sign) * power[:, None])
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = (a * cos - b * sin) * scale, (b * cos + a * sin) * scale
        return out

    return turned(q, q_positions, 1), turned(k, k_positions, -1)
