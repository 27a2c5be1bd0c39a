"""The attention core in float32 (docs/conventions.md#scale-order): the softmax (max-subtracted or by
log-sum-exp, as configured), attention, the online softmax over key chunks, attention over nearby keys, and the
per-position query scale."""

from __future__ import annotations

from typing import Any

import numpy as np

from spec_tests.float32_forms._base import F32, FORM, checked, planted


def softmax(logits: Any, mask: Any = None, fully_masked: str = "zeros") -> np.ndarray:
    """float32 softmax over the last axis, max-subtracted or by log-sum-exp; a fully masked row is zeros or NaN."""
    if fully_masked not in ("zeros", "nan"):
        raise ValueError(f"fully_masked must be 'zeros' or 'nan', got {fully_masked!r}")
    z = planted("softmax", np.asarray(logits, dtype=F32))
    allowed = np.ones(z.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), z.shape)
    z = np.where(allowed, z, F32(-np.inf))
    top = z.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(top)
    top = np.where(empty, F32(0), top)
    with np.errstate(divide="ignore", invalid="ignore"):
        if FORM["softmax"] == "max":
            e = np.exp(z - top)
            p = e / e.sum(axis=-1, keepdims=True)
        else:
            lse = top + np.log(np.exp(z - top).sum(axis=-1, keepdims=True))
            p = np.exp(z - lse)
    return np.where(empty, F32(np.nan) if fully_masked == "nan" else F32(0), p)


def _logits(q: Any, k: Any, v: Any, bias: Any, mask: Any, scale: float | None, causal: bool,
            softcap: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(scale·q·kᵀ → softcap → + bias, allowed, v)`` in float32; kv heads shared by ``H/H_kv`` query heads."""
    q, k, v = (np.asarray(a, dtype=F32) for a in (q, k, v))
    if q.shape[-3] % k.shape[-3]:
        raise ValueError(f"q heads ({q.shape[-3]}) must be a multiple of kv heads ({k.shape[-3]})")
    n_rep = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, n_rep, axis=-3), np.repeat(v, n_rep, axis=-3)
    scale = F32(q.shape[-1] ** -0.5 if scale is None else scale)
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    if softcap is not None:
        s = F32(softcap) * np.tanh(s / F32(softcap))
    if bias is not None:
        s = s + np.asarray(bias, dtype=F32)
    t_q, t_k = s.shape[-2:]
    allowed = np.ones(s.shape[-2:], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        allowed = allowed & (np.arange(t_k)[None, :] <= np.arange(t_q)[:, None] + (t_k - t_q))
    return planted("attention", s), np.broadcast_to(allowed, s.shape), v


def attention(q: Any, k: Any, v: Any, bias: Any = None, mask: Any = None, scale: float | None = None,
              causal: bool = False, softcap: float | None = None) -> np.ndarray:
    """softmax(scale·q·kᵀ → softcap → + bias → mask)·v in float32."""
    s, allowed, v = _logits(q, k, v, bias, mask, scale, causal, softcap)
    return softmax(s, mask=allowed) @ v


@checked
def chunked_attention(q: Any, k: Any, v: Any, chunk_size: int, **options: Any) -> np.ndarray:
    """:func:`attention` with the online softmax over key blocks of ``chunk_size``, in float32: per block the
    running maximum ``m``, the rescale ``e^(m_old − m_new)`` of the sum ``ℓ`` and the accumulator, then
    ``acc/ℓ``; a row with no allowed key is 0."""
    s, allowed, v = _logits(q, k, v, options.get("bias"), options.get("mask"), options.get("scale"),
                            options.get("causal", False), options.get("softcap"))
    s = np.where(allowed, s, F32(-np.inf))
    shape = s.shape[:-1]
    top = np.full((*shape, 1), -np.inf, dtype=F32)
    total = np.zeros((*shape, 1), dtype=F32)
    acc = np.zeros((*shape, v.shape[-1]), dtype=F32)
    with np.errstate(invalid="ignore"):
        for start in range(0, s.shape[-1], chunk_size):
            block = s[..., start:start + chunk_size]
            new_top = np.maximum(top, block.max(axis=-1, keepdims=True))
            safe = np.where(np.isfinite(new_top), new_top, F32(0))
            rescale = np.where(np.isfinite(top), np.exp(top - safe), F32(0))
            e = np.exp(block - safe)
            total = total * rescale + e.sum(axis=-1, keepdims=True)
            acc = acc * rescale + e @ v[..., start:start + chunk_size, :]
            top = new_top
        out = acc / total
    return np.where(total > 0, out, F32(0))


@checked
def local_attention(q: Any, k: Any, v: Any, window: int | None = None, attention_chunk: int | None = None,
                    scale: float | None = None, softcap: float | None = None) -> np.ndarray:
    """Causal attention over keys ``0 <= i − j < window`` and/or of the query's chunk, queries at the end."""
    t_q, t_k = np.shape(q)[-2], np.shape(k)[-2]
    i = np.arange(t_q)[:, None] + (t_k - t_q)
    j = np.arange(t_k)[None, :]
    allowed = j <= i
    if window is not None:
        allowed = allowed & (i - j < window)
    if attention_chunk is not None:
        allowed = allowed & (j // attention_chunk == i // attention_chunk)
    return attention(q, k, v, mask=allowed, scale=scale, softcap=softcap)


@checked
def query_scale(positions: Any, scale: dict) -> np.ndarray:
    """``1 + a·ln(1 + ⌊(p + 1)/f⌋)`` (Llama 4) or ``1 + β·ln(1 + ⌊p/L0⌋)`` (Ministral-3) in float32, the floor of
    a float32 division as Llama 4's ``torch.floor((positions + 1) / floor_scale)``."""
    p = np.asarray(positions).astype(F32)
    if scale["rule"] == "llama4_temperature":
        steps = np.floor((p + F32(1)) / F32(scale["floor_scale"]))
        return F32(1) + F32(scale["attn_scale"]) * np.log1p(steps)
    steps = np.floor(p / F32(scale["original_max_position_embeddings"]))
    return F32(1) + F32(scale["beta"]) * np.log1p(steps)

