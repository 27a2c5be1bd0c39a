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

The tables are the readable form's own float64 tables (:func:`refpos.rope.core.rope_pair_tables`, computed
once per set of positions: :mod:`refpos.rope.table_cache`): this module only casts them to x's dtype and lays
them out as ``C`` and ``S``, block by block, so a change to the tables reaches every path.

Each slab of rows is first copied whole from x into the output: one streaming copy (NumPy's copy of
contiguous memory, the fastest pass over memory it has) that also writes the channels outside the rotated
span, final. The slab's pairs, now in the core's cache, are then rotated there: ``x·C``, the partners and
``·S`` into scratch memory, and the sum written over the slab's pairs in the output while they are still
cached, so memory sees one read of x and one write of the output. The measurements behind these choices,
and the forms tried and not taken, are in docs/performance.md#fast-forms.

Blocks of rows are independent, so they run on threads (:mod:`refpos.parallel`). Each thread keeps its
scratch arrays (tables, partners, results) from one block to the next
(:class:`refpos.parallel.ThreadScratch`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from refpos.parallel import ThreadScratch, run_blocks, threads_for

#: bytes per NumPy call (256 KiB): one head's slab of rows. The slab in the output, its products and the
#: block's tables (1.25 MiB) stay in a 2 MiB L2 cache between the five calls on them; each call costs a few µs
#: whatever its size (the sizes measured: docs/performance.md#slab-size)
SLAB_BYTES = 2**18


def signed_tables(cos: np.ndarray, sin: np.ndarray, written: tuple[slice, slice], dtype: np.dtype,
                  scratch: ThreadScratch) -> tuple[np.ndarray, np.ndarray]:
    r"""``C`` and ``S`` of one block of rows, ``(..., rows, 2m)`` in x's ``dtype``: scratch memory of this thread.

    ``cos`` and ``sin`` are the readable form's float64 tables of the block's rows
    (:func:`refpos.rope.core.rope_pair_tables`), ``(..., rows, m)``; each pair's values go where
    ``written = (u_out, v_out)`` places its two channels, rounded to ``dtype`` by the assignment (the cast
    :func:`refpos.rope.core.rotate_pairs` makes):

    .. math:: C_u = C_v = \mathrm{rd}(A\cos\varphi),\qquad S_v = \mathrm{rd}(A\sin\varphi),\quad S_u = -S_v

    (negation is exact and rounding is symmetric, so ``u·C_u + v·S_u`` rounds as the readable ``u·c − v·s``).
    """
    u, v = written
    shape = (*cos.shape[:-1], 2 * cos.shape[-1])  # (..., rows, 2m)
    table_c = scratch.take("table_c", shape, dtype)
    table_s = scratch.take("table_s", shape, dtype)
    table_c[..., u], table_c[..., v] = cos, cos  # rounded to x's dtype here
    table_s[..., v] = sin
    np.negative(table_s[..., v], out=table_s[..., u])
    return table_c, table_s


def rotate_span(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, out: np.ndarray,
                pairs: tuple[slice, slice, slice, slice]) -> None:
    """Write the rotated pairs of ``x`` into ``out`` (same bits as the readable form).

    The span rotation behind the dispatch line of :func:`refpos.rope.core.apply_rope`: its output equals
    the readable :func:`refpos.rope.core.rotate_pairs`'s, bit for bit.

    Parameters
    ----------
    x : ndarray ``(..., T, D)``
    cos, sin : ndarray ``(..., T, m)`` float64
        The readable form's ``A·cos φ`` and ``A·sin φ`` (:func:`refpos.rope.core.rope_pair_tables`),
        broadcastable against ``x.shape[:-1]``; read, never written (they may be the cache's,
        :mod:`refpos.rope.table_cache`)
    out : ndarray ``(..., T, D)``, the broadcast shape of x and the tables' leading axes: written whole, slab
        by slab (the channels outside the rotated span are x's)
    pairs : ``(u_in, v_in, u_out, v_out)`` channel slices of the head (:func:`refpos.rope.core.rope_pair_slices`);
        the rotated span is ``[u_in.start, v_in.stop)``
    """
    start, stop = pairs[0].start, pairs[1].stop
    m = (stop - start) // 2
    u_in, v_in, u_out, v_out = (slice(s.start - start, s.stop - start, s.step) for s in pairs)  # inside the span
    if out.ndim == 2:  # (T, D): one leading axis of one, so that every slab is (heads, rows, 2m)
        x, out = x[None], out[None]
    lead, t = out.shape[:-2], out.shape[-2]
    x_b = np.broadcast_to(x, (*lead, t, x.shape[-1]))  # (..., T, D), a view
    # slabs of rows, and at least one per thread: each block lays out the tables of its own rows once
    slab_rows = max(1, SLAB_BYTES // (x.itemsize * x.shape[-1]))
    rows_per_block = min(slab_rows, -(-t // threads_for(math.prod(out.shape))))
    # each NumPy call takes one slab: a block's rows of one head, or of several heads
    heads_per_call = max(1, slab_rows // rows_per_block)
    slabs = [(*index, slice(h0, h0 + heads_per_call)) for index in np.ndindex(*lead[:-1])
             for h0 in range(0, lead[-1], heads_per_call)]
    cols = slice(start, stop)
    swap = _swapper(u_out, v_out, m, x)
    reorder = (u_in, v_in) != (u_out, v_out)  # deinterleaved: pairs read as (2j, 2j + 1), written half-split
    scratch = ThreadScratch()  # this call's per-thread memory, released when the call returns

    def block(rows: slice) -> None:
        table_c, table_s = signed_tables(cos[..., rows, :], sin[..., rows, :], (u_out, v_out), x.dtype, scratch)
        shape = (*lead, rows.stop - rows.start, 2 * m)
        c_b, s_b = np.broadcast_to(table_c, shape), np.broadcast_to(table_s, shape)  # (..., rows, 2m) views
        shared = table_c.ndim == 2  # one table for every head and batch (positions (T,)): no view per slab
        full = (min(heads_per_call, lead[-1]), rows.stop - rows.start, 2 * m)
        # (heads, rows, 2m) each, in this core's cache: x·C, each channel's pair (then times S), the pairs reordered
        result, partner = scratch.take("result", full, x.dtype), scratch.take("partner", full, x.dtype)
        ordered = scratch.take("span", full, x.dtype) if reorder else None
        for slab in slabs:
            target = out[(*slab, rows)]  # (heads, rows, D): the output's rows of this slab
            np.copyto(target, x_b[(*slab, rows)])  # one streaming copy: x in, the pass-through channels final
            span = target[..., cols]  # (heads, rows, 2m): x's pairs, now in this core's cache
            heads = span.shape[0]
            res, par = (result, partner) if heads == full[0] else (result[:heads], partner[:heads])
            if ordered is not None:
                ordered[:heads, ..., u_out], ordered[:heads, ..., v_out] = span[..., u_in], span[..., v_in]
                span_in = ordered[:heads]
            else:
                span_in = span
            np.multiply(span_in, table_c if shared else c_b[slab], out=res)
            swap(span_in, par)
            np.multiply(par, table_s if shared else s_b[slab], out=par)
            np.add(res, par, out=span)  # over x's values, in the cache: written back to memory once

    run_blocks([partial(block, slice(t0, min(t0 + rows_per_block, t))) for t0 in range(0, t, rows_per_block)],
               numpy=True, work=math.prod(out.shape))


def _swapper(u: slice, v: slice, m: int, x: np.ndarray) -> Callable[[np.ndarray, np.ndarray], None]:
    """``swap(span, partner)``: ``partner[u], partner[v] = span[v], span[u]``, each channel's pair moved next
    to it.

    Half-split pairs on contiguous channels are swapped as whole halves: each half row is viewed as one
    opaque item of ``m`` channels, so NumPy copies two items per row instead of looping over channels row
    by row (1.5× faster on (1024, 128) float32 rows).
    """
    if u == slice(0, m) and x.strides[-1] == x.itemsize:
        half = np.dtype((np.void, m * x.itemsize))  # one half row as one item

        def swap_halves(span: np.ndarray, partner: np.ndarray) -> None:
            np.copyto(partner.view(half), span.view(half)[..., ::-1])  # (heads, rows, 2) items of m channels

        return swap_halves

    def swap_channels(span: np.ndarray, partner: np.ndarray) -> None:
        partner[..., u], partner[..., v] = span[..., v], span[..., u]

    return swap_channels


def is_fast_input(x: object) -> bool:
    """Whether the fast form applies: a NumPy array with at least one row."""
    return isinstance(x, np.ndarray) and math.prod(x.shape) > 0
