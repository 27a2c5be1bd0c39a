r"""The fast form of :func:`refpos.attention`: the same nine steps on tiles of query rows.

Softmax rows are independent, so steps 1-9 of :mod:`refpos.core.attention` can run on a block of query
rows of one key/value head's query heads at a time, with the same result bit for bit: each tile calls
:func:`~refpos.core.attention.attend_rows`, the readable form itself, on its rows. What changes is
memory: the :math:`T_q \times T_k` temporaries shrink to :math:`\text{rows} \times T_k` (cache, page
faults), and with NumPy the tiles run on every core (:mod:`refpos.parallel`). Under a causal mask the
keys after a tile's last query are masked in every row of it (exact zeros after the softmax), so they
are left out of the tile.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from refpos.backend import array_namespace, is_numpy_namespace
from refpos.parallel import block_elements, run_blocks

Array = Any

#: elements of one block of logits on the CPU (2**20: 4 MiB of float32; larger on a GPU, see
#: parallel.block_elements). Blocks are (key/value head, query rows) tiles; on (1, 8, 2048, 128) 2**19 and
#: 2**21 measured slower (more hand-offs; less cache).
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

    def tile(group: int, rows: slice) -> None:
        """Query heads of key/value head ``group``, query rows ``rows``."""
        heads = slice(group * n_rep, (group + 1) * n_rep)
        keys = min(t_k, t_k - t_q + rows.stop) if steps.causal else t_k
        cut = {name: along(along(getattr(steps, name), -1, slice(0, keys), t_k), -3, heads, h_q)
               for name in ("bias", "mask", "qk_terms")}
        cut["temperature"] = along(steps.temperature, -2, heads, h_q)  # (..., Hq, Tq): heads on axis -2
        o, _ = attend_rows(q[..., heads, rows, :], k[..., group : group + 1, :keys, :],
                           v[..., group : group + 1, :keys, :], replace(steps, **cut), rows=rows)
        out[..., heads, rows, :] = o

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
