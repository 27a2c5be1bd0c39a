r"""The NumPy fast form of :func:`refpos.apply_rope`: same bits, full-row passes, on every core.

:func:`refpos.apply_rope` states the rotation as it is written on paper, pair by pair:

.. math:: u' = u\cos\varphi - v\sin\varphi,\qquad v' = v\cos\varphi + u\sin\varphi .

NumPy evaluates that on half rows (``u`` and ``v`` are each every other group of channels), and its
loops are slow on short strided rows: about 4–6× a memory copy. This module computes the same numbers
on whole contiguous rows, with the partner of each channel moved next to it once:

.. math:: y = x \odot C + \operatorname{partner}(x) \odot S,\qquad
    C = [\cos\varphi, \cos\varphi],\quad S = [-\sin\varphi, \sin\varphi]

(interleaved: ``C = [c_0, c_0, c_1, c_1, …]``, ``S = [-s_0, s_0, -s_1, s_1, …]``). Because
``u·c + v·(−s)`` and ``u·c − v·s`` round identically in IEEE arithmetic (negation is exact), the result
is **bit for bit** the readable form's; the tests assert equality, not closeness. The readable form in
:mod:`refpos.rope.core` stays the reference and runs on every other backend.

Blocks of rows are independent, so they run on threads (:mod:`refpos.parallel`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.parallel import run_blocks, threads_for

#: bytes per NumPy call (512 KiB): one head's slab of rows. Each call costs a few µs whatever its size, so
#: calls must be large; one head's rows are contiguous, so they stream from memory. On (1, 32, 4096, 128)
#: on a 2-core machine, 32 KiB per call was 2.4x slower, 256 KiB 1.3x, 1 MiB no faster (float64 slower).
SLAB_BYTES = 2**19


def rotate_span(x: np.ndarray, signed_tables: Callable[[slice], tuple[np.ndarray, np.ndarray]],
                out: np.ndarray, layout: str, start: int, stop: int) -> None:
    """Write the rotated channels ``[start, stop)`` of ``x`` into ``out`` (same bits as the readable form).

    Parameters
    ----------
    x : ndarray ``(..., T, D)``
    signed_tables : callable
        ``signed_tables(rows)`` returns ``C`` and ``S`` for the rows ``rows`` of T: the readable form's
        float64 ``A·cos φ`` and ``∓A·sin φ`` in the order the output is written (``(..., rows, 2m)``,
        broadcastable against ``x.shape[:-1]``). They are cast to x's dtype here, as the readable form
        casts its tables; negation commutes with the cast exactly.
    out : ndarray ``(..., T, D)``, the broadcast shape of x and the tables
    layout : {"half", "interleaved", "deinterleaved"}
    start, stop : the rotated span, ``stop - start = 2m``
    """
    m = (stop - start) // 2
    lead, t = out.shape[:-2], out.shape[-2]
    x_b = np.broadcast_to(x, (*lead, t, x.shape[-1]))  # (..., T, D), a view
    # slabs of rows, and at least one per thread: each block computes the tables of its own rows once
    slab_rows = max(1, SLAB_BYTES // (x.itemsize * x.shape[-1]))
    rows_per_block = min(slab_rows, -(-t // threads_for(math.prod(out.shape))))
    # each NumPy call takes one slab: the rows of one head, or of several heads when the rows are few
    heads_per_call = max(1, slab_rows // rows_per_block)
    slabs = [(*index, slice(h0, h0 + heads_per_call)) for index in np.ndindex(*lead[:-1])
             for h0 in range(0, lead[-1], heads_per_call)] if lead else [()]

    def block(rows: slice) -> Callable[[], None]:
        def run() -> None:
            table_c, table_s = (table.astype(x.dtype, copy=False) for table in signed_tables(rows))
            shape = (*lead, rows.stop - rows.start, 2 * m)
            c_b, s_b = np.broadcast_to(table_c, shape), np.broadcast_to(table_s, shape)  # (..., rows, 2m) views
            for slab in slabs:
                span = x_b[slab][..., rows, start:stop]  # (heads, rows, 2m)
                if layout == "deinterleaved":  # read pairs (2j, 2j + 1), write them half-split
                    span = np.concatenate([span[..., 0::2], span[..., 1::2]], axis=-1)  # (heads, rows, 2m)
                target = out[slab][..., rows, start:stop]  # (heads, rows, 2m), a view into out
                np.multiply(span, c_b[slab], out=target)  # first: streams x in, contiguously
                partner = np.empty_like(span)  # (heads, rows, 2m): the channel each one is paired with
                if layout == "interleaved":
                    partner[..., 0::2], partner[..., 1::2] = span[..., 1::2], span[..., 0::2]
                else:
                    partner[..., :m], partner[..., m:] = span[..., m:], span[..., :m]
                np.multiply(partner, s_b[slab], out=partner)
                np.add(target, partner, out=target)
        return run

    run_blocks([block(slice(t0, min(t0 + rows_per_block, t))) for t0 in range(0, t, rows_per_block)],
               numpy=True, work=math.prod(out.shape))


def is_fast_input(x: Any) -> bool:
    """Whether the fast form applies: a NumPy array with at least one row."""
    return isinstance(x, np.ndarray) and math.prod(x.shape) > 0
