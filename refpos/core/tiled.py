r"""The fast form of :func:`refpos.attention`: the same nine steps on tiles of query rows.

Softmax rows are independent, so steps 1-9 of :mod:`refpos.core.attention` can run on a block of query
rows of one key/value head's query heads at a time, with the same result bit for bit: each tile calls
:func:`~refpos.core.attention.attend_rows`, the readable form itself, on its rows. What changes is
memory: the :math:`T_q \times T_k` temporaries shrink to :math:`\text{rows} \times T_k` (cache, page
faults), and with NumPy the tiles run on every core (:mod:`refpos.parallel`). Under a causal mask the
keys after a tile's last query are masked in every row of it (exact zeros after the softmax), so they
are left out of the tile.

**float32 on NumPy** (:func:`fused_rows`). Where the steps allow it (nothing added before the scale, every
term float32), a tile takes two shortcuts that change rounding, not the result: the scale multiplies
the queries (rows × d products) instead of the logits (rows × Tk), and the softmax's division moves
after p·v (rows × dv quotients instead of rows × Tk):

.. math:: o_i = \frac{\sum_j e^{s_{ij} - m_i} v_j}{\sum_j e^{s_{ij} - m_i}},\qquad
    s_{ij} = (c\,q_i)\cdot k_j,\quad m_i = \max_j s_{ij}

(the stable softmax: the row maximum is still subtracted before ``exp``). It saves two of the six passes
over each tile's logits (docs/performance.md#attention-in-float32). Both forms are float32
evaluations of the same expression, and both are held to one bound against the float64 result
(docs/performance.md#attention-in-float32): with :math:`u = 2^{-24}`, :math:`\gamma_n = nu/(1-nu)`,
:math:`A_i = c \max_j \sum_l |q_{il} k_{jl}|` (× the temperature) and :math:`L_i = \max_j |s_{ij}|`, an
exponent is off by at most :math:`\Delta_i = \gamma_{d+2} A_i + \gamma_3 L_i + 2uL_i`, each weight by a
factor within :math:`\eta_i = e^{\Delta_i}(1 + 4u) - 1` (NumPy's float32 ``exp``: under 4 ulp), and

.. math:: |o_i - o_i^{\text{float64}}| \le \max_j |v_j| \left(\frac{4\eta_i}{1 - \eta_i}
    + 2\gamma_{T_k} + 2u\right).

float64 tiles are the readable steps themselves, bit for bit per row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace, is_numpy_namespace
from refpos.parallel import block_elements, run_blocks

#: elements of one block of logits on the CPU (2**20: 4 MiB of float32; larger on a GPU, see
#: parallel.block_elements). Blocks are (key/value head, query rows) tiles; smaller tiles mean more hand-offs,
#: larger ones less cache (the sweep: docs/performance.md#measured-intel).
_BLOCK_ELEMENTS = 2**20



def tiled_attention(q: Array, k: Array, v: Array, steps: Any, attend_rows: Callable[..., tuple[Array, Array]]) -> Array:
    """``attention(q, k, v, ...)`` for validated ``steps`` (an ``AttentionSteps``), tile by tile.

    ``attend_rows(q_tile, k_tile, v_tile, steps_tile, rows=rows)`` is the readable form of
    :mod:`refpos.core.attention`, handed over so that this module needs nothing from it (no import cycle).
    Returns ``(..., Hq, Tq, dv)``.
    """
    xp = array_namespace(q, k, v)
    *lead, h_q, t_q, _ = q.shape
    n_rep, t_k = steps.n_rep, steps.t_k
    terms = [term for term in (q, steps.bias, steps.qk_terms, steps.temperature) if term is not None]
    out = xp.empty((*lead, h_q, t_q, v.shape[-1]), dtype=xp.result_type(*terms))  # (..., Hq, Tq, dv)
    rows_per_block = max(1, block_elements(_BLOCK_ELEMENTS, xp) // max(1, math.prod(lead) * n_rep * t_k))
    fused = fuses(q, steps)  # float32 NumPy: the scale on the queries, the division after p·v

    def tile(group: int, rows: slice) -> None:
        """Query heads of key/value head ``group``, query rows ``rows``."""
        heads = slice(group * n_rep, (group + 1) * n_rep)
        keys = min(t_k, t_k - t_q + rows.stop) if steps.causal else t_k
        cut = {name: along(along(getattr(steps, name), -1, slice(0, keys), t_k), -3, heads, h_q)
               for name in ("bias", "mask", "qk_terms")}
        cut["temperature"] = along(steps.temperature, -2, heads, h_q)  # (..., Hq, Tq): heads on axis -2
        tile_steps = replace(steps, **cut)
        q_tile = q[..., heads, rows, :]  # (..., n_rep, rows, d)
        k_tile, v_tile = k[..., group : group + 1, :keys, :], v[..., group : group + 1, :keys, :]  # (..., 1, keys, ·)
        if fused:
            out[..., heads, rows, :] = fused_rows(q_tile, k_tile, v_tile, tile_steps, rows)
        else:
            out[..., heads, rows, :] = attend_rows(q_tile, k_tile, v_tile, tile_steps, rows=rows)[0]

    run_blocks([partial(tile, group, slice(i0, min(i0 + rows_per_block, t_q)))
                for i0 in range(0, t_q, rows_per_block) for group in range(h_q // n_rep)],
               numpy=is_numpy_namespace(xp), work=math.prod((*lead, h_q, t_q, t_k)))
    return out


def along(term: Array | None, axis: int, part: slice, length: int) -> Array | None:
    """``part`` of a term along ``axis`` (-3: heads, -2: query rows, -1: key columns) of size ``length``; a
    term of size 1 (or without that axis) broadcasts there and is returned as it is."""
    if term is None or term.ndim < -axis or term.shape[axis] == 1 or (part.start == 0 and part.stop == length):
        return term
    return term[(..., part, *[slice(None)] * (-axis - 1))]


def fuses(q: Array, steps: Any) -> bool:
    """Whether :func:`fused_rows` computes these steps: float32 NumPy, nothing added before the scale, every
    term float32 (a float64 bias would make the logits float64), at least one key."""
    terms = (steps.bias, steps.temperature)
    return (isinstance(q, np.ndarray) and q.dtype == np.float32 and steps.qk_terms is None and steps.t_k > 0
            and not (steps.bias is not None and steps.bias_scaled)
            and all(term is None or (isinstance(term, np.ndarray) and term.dtype == np.float32) for term in terms))


def fused_rows(q: np.ndarray, k: np.ndarray, v: np.ndarray, steps: Any, rows: slice) -> np.ndarray:
    r"""Steps 1-9 of one float32 tile with the scale on the queries and the division after p·v.

    ``q`` ``(..., n_rep, rows, d)`` holds the tile's query heads and rows, ``k`` ``(..., 1, keys, d)`` and
    ``v`` ``(..., 1, keys, dv)`` their key/value head (the keys a causal tile needs); the terms in ``steps``
    are cut to the tile's heads and keys, as for the readable ``attend_rows``. Returns ``(..., n_rep, rows, dv)``.

    Notes
    -----
    .. math:: o_i = \frac{\sum_j e^{s_{ij} - m_i} v_j}{\sum_j e^{s_{ij} - m_i}}, \qquad
        s_{ij} = (c\,q_i) \cdot k_j, \quad m_i = \max_j s_{ij}

    A row with no allowed key follows ``steps.fully_masked``, as the readable softmax.
    """
    t_q, t_k = steps.t_q, steps.t_k
    bias, mask = (along(term, -2, rows, t_q) for term in (steps.bias, steps.mask))
    temperature = along(steps.temperature, -1, rows, t_q)  # (..., Tq): its last axis is the query axis
    s = np.matmul(q * np.float32(steps.scale), np.swapaxes(k, -1, -2))  # (..., n_rep, rows, keys): 1-3, c on q
    if temperature is not None:  # 4
        s = s * temperature[..., None]
    if steps.softcap is not None:  # 5
        s = steps.softcap * np.tanh(s / steps.softcap)
    if bias is not None:  # 6 (a bias before the scale is not fused)
        s = s + bias
    allowed = mask  # 7 (causal: query row i sits at key position t_k - t_q + i)
    if steps.causal:
        q_pos = np.arange(rows.start, rows.stop, dtype=np.int64) + (t_k - t_q)
        causal = np.arange(k.shape[-2], dtype=np.int64)[None, :] <= q_pos[:, None]  # (rows, keys)
        allowed = causal if allowed is None else (allowed & causal)
    if allowed is not None:
        s = np.where(allowed, s, np.float32(-math.inf))
    row_max = s.max(axis=-1, keepdims=True)  # 8: the stable softmax, without its division
    dead = row_max == -math.inf  # every key masked
    e = np.exp(np.subtract(s, np.where(np.isfinite(row_max), row_max, np.float32(0.0)), out=s), out=s)
    z = e.sum(axis=-1, keepdims=True)  # (..., n_rep, rows, 1)
    o = np.matmul(e, v)  # 9: (..., n_rep, rows, dv), then normalised
    if not dead.any():
        o /= z
        return o
    o /= np.where(dead, np.float32(1.0), z)  # no 0/0 in dead rows
    return np.where(dead, np.float32(0.0 if steps.fully_masked == "zeros" else math.nan), o)
