r"""Chunked attention: the result of :func:`refpos.attention` without any ``Tq × Tk`` array.

Queries and keys are processed in blocks. For each query block the softmax is accumulated over key
blocks with the *online softmax* (Milakov & Gimelshein 2018; the idea behind FlashAttention): keep a
running row maximum ``m``, a running normaliser ``l`` and a running output ``acc``; a new block with
logits ``s`` updates them as

.. math::
    m' = \max(m, \max_j s_j), \quad
    l' = e^{m - m'} l + \sum_j e^{s_j - m'}, \quad
    \mathrm{acc}' = e^{m - m'} \mathrm{acc} + \sum_j e^{s_j - m'} v_j

and the output is ``acc / l``. Peak extra memory is ``O(query_chunk · chunk_size)`` per head and thread.
Under a causal mask, key blocks entirely in a query block's future are skipped. Query blocks are
independent; with NumPy they run on every core (:mod:`refpos.parallel`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from refpos.backend import Array, array_namespace, is_numpy_namespace
from refpos.core.attention import along, attention_steps, grouped_scores, grouped_values
from refpos.parallel import run_blocks
from refpos.validation import check_int

BlockTerm = Callable[[Array, Array], Array]  # f(query_index, key_index) -> (..., Hq, tq, tk)


def _block(term: Array | BlockTerm | None, q_idx: Array, k_idx: Array, q_sl: slice, k_sl: slice,
           t_q: int, t_k: int) -> Array | None:
    """The (query block, key block) part of an additive term given as an array or as a function."""
    if callable(term):
        return term(q_idx, k_idx)
    return along(along(term, -2, q_sl, t_q), -1, k_sl, t_k)


def chunked_attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    bias: Array | BlockTerm | None = None,
    mask: Array | BlockTerm | None = None,
    causal: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
    bias_scaled: bool = False,
    chunk_size: int = 1024,
    query_chunk_size: int | None = None,
    fully_masked: str = "zeros",
) -> Array:
    """Attention computed block by block with an online softmax; equal to :func:`refpos.attention`.

    Parameters
    ----------
    q, k, v, causal, scale, softcap, bias_scaled, fully_masked
        As in :func:`refpos.attention`.
    bias, mask : array or callable, optional
        As in :func:`refpos.attention`, or a function ``f(query_index, key_index)`` of two integer
        arrays (the rows and columns of one block) returning that block, so that no ``Tq × Tk`` array
        ever exists (e.g. ``lambda i, j: alibi(i, j)``).
    chunk_size : int
        Keys per block (>= 1).
    query_chunk_size : int, optional
        Queries per block (>= 1); default ``chunk_size``.

    Returns
    -------
    out : array ``(..., Hq, Tq, dv)``

    Notes
    -----
    Agrees with :func:`refpos.attention` to a few ulps (the sums are regrouped); the tests use
    ``rtol=1e-12`` in float64.
    """
    steps = attention_steps(q, k, v, bias=bias, mask=mask, causal=causal, scale=scale, softcap=softcap,
                            bias_scaled=bias_scaled, fully_masked=fully_masked, block_terms=True)
    chunk_size = check_int("chunk_size", chunk_size, minimum=1)
    query_chunk_size = chunk_size if query_chunk_size is None else check_int(
        "query_chunk_size", query_chunk_size, minimum=1
    )
    xp = array_namespace(q, k, v)
    *lead, h_q, t_q, _ = q.shape
    t_k, d_v = k.shape[-2], v.shape[-1]
    n_rep, scale, softcap = steps.n_rep, steps.scale, steps.softcap
    causal, bias_scaled = steps.causal, steps.bias_scaled
    logits_shape = (*lead, h_q, t_q, t_k)

    offset = t_k - t_q  # query i sits at key position offset + i (end-aligned, as causal_mask)

    def query_block(q0: int, q1: int) -> Array:
        """The output rows ``q0:q1``: one online softmax over the key blocks."""
        q_idx = xp.arange(q0, q1, dtype=xp.int64)
        q_blk = q[..., q0:q1, :]  # (..., Hq, tq, d)
        row_shape = (*lead, h_q, q1 - q0, 1)
        m = xp.full(row_shape, -math.inf, dtype=q.dtype)  # running max
        l = xp.zeros(row_shape, dtype=q.dtype)  # running normaliser
        acc = xp.zeros((*lead, h_q, q1 - q0, d_v), dtype=q.dtype)  # running output
        k_end = min(t_k, offset + q1) if causal else t_k  # later keys are in every row's future
        for k0 in range(0, k_end, chunk_size):
            k1 = min(k0 + chunk_size, k_end)
            k_idx = xp.arange(k0, k1, dtype=xp.int64)
            q_sl, k_sl = slice(q0, q1), slice(k0, k1)
            s = grouped_scores(q_blk, k[..., k0:k1, :], n_rep)  # (..., Hq, tq, tk)
            b = _block(bias, q_idx, k_idx, q_sl, k_sl, t_q, t_k)
            if b is not None and bias_scaled:
                s = s + b
            s = s * scale
            if softcap is not None:
                s = softcap * xp.tanh(s / softcap)
            if b is not None and not bias_scaled:
                s = s + b
            allowed = _block(mask, q_idx, k_idx, q_sl, k_sl, t_q, t_k)
            if causal:
                cm = k_idx[None, :] <= (q_idx[:, None] + offset)  # (tq, tk)
                allowed = cm if allowed is None else (allowed & cm)
            if allowed is not None:
                s = xp.where(allowed, s, -math.inf)
            m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))
            m_safe = xp.where(xp.isfinite(m_new), m_new, xp.zeros_like(m_new))
            alpha = xp.exp(m - m_safe)  # rescales what was accumulated so far
            p = xp.exp(s - m_safe)  # (..., Hq, tq, tk)
            l = alpha * l + xp.sum(p, axis=-1, keepdims=True)
            acc = alpha * acc + grouped_values(p, v[..., k0:k1, :], n_rep)
            m = m_new
        dead = m == -math.inf  # no allowed key in the whole row
        o = acc / xp.where(dead, xp.ones_like(l), l)
        fill = 0.0 if fully_masked == "zeros" else math.nan
        return xp.where(dead, xp.full_like(o, fill), o)

    # query blocks are independent: with NumPy they run on every core (refpos.parallel)
    starts = list(range(0, t_q, query_chunk_size))
    out_blocks: list[Array] = [None] * len(starts)

    def store(i: int) -> None:
        out_blocks[i] = query_block(starts[i], min(starts[i] + query_chunk_size, t_q))

    run_blocks([partial(store, i) for i in range(len(starts))], numpy=is_numpy_namespace(xp),
               work=math.prod(logits_shape))
    if not out_blocks:
        return xp.zeros((*lead, h_q, 0, d_v), dtype=q.dtype)
    return xp.concat(out_blocks, axis=-2)  # (..., Hq, Tq, dv)
