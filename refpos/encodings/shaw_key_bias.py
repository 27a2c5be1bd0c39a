r"""A learned per-head bias of clipped frame distances, as Phi-4-multimodal's audio encoder adds it to its logits,
with the streaming window the encoder adds beside it.

The bias is Shaw's key term of one-hot queries: head :math:`h` reads column :math:`h` of the table
:math:`B` (``(rows, H)``) at the row of each pair,

.. math::
    b_{h,ij} = B_{r_{ij},\,h} = u_h \cdot B_{r_{ij}}, \qquad
    r_{ij} = \operatorname{clip}\bigl(s\,(j - i), -L, R\bigr) + o,

:math:`u_h` the unit vector of head :math:`h` and the scale 1 (:func:`refpos.encodings.shaw_key.shaw_key_terms`).
Phi-4's encoder reads key minus query (:math:`s = +1`), clips to :math:`-M … M - 1` and shifts by :math:`M`
(``bias_max_distance``, a table of :math:`2M` rows).

The streaming window. The encoder cuts its frames into chunks of :math:`k` frames from frame 0 (the last one
shorter) and lets query :math:`i` see the keys of its chunk and of the :math:`\ell` chunks before it; it adds that
boolean window to the bias (``hs_mask + relative_attention_bias``: true is 1), so

.. math::
    w_{ij} = [\,\lfloor i/k \rfloor - \ell \le \lfloor j/k \rfloor \le \lfloor i/k \rfloor\,], \qquad
    e_{h,ij} = b_{h,ij} + w_{ij},

a logit of 1 more, not a mask: a key outside the window is attended too. A chunk size :math:`k < 0` is one chunk of
every frame (:math:`w = 1` at every pair: the softmax does not see it). Past :math:`c` frames (the encoder's
``max_seq_len = 500``) the frames are cut into blocks of :math:`c` attended one by one; both the rows and the window
are then the block's own (counted from the block's first frame).

See docs/relative.md#a-per-head-bias-of-clipped-distances.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.shaw_key import attended, shaw_key_terms
from refpos.validation import check_int, floating_array


def streaming_window(length: int, chunk: int, left: int, block: int | None = None) -> np.ndarray:
    r"""The 0/1 window ``(T, T)`` of chunks of ``chunk`` frames, each query seeing its chunk and ``left`` chunks
    before it, counted inside blocks of ``block`` frames (``None``: one block); 0 across blocks.

    Parameters
    ----------
    length : int
        The frames ``T``.
    chunk : int
        Frames per chunk ``k`` (``< 0``: one chunk of every frame; 0 is refused, as the encoder's ``np.arange``
        refuses a step of 0).
    left : int
        Chunks seen before the query's ``ℓ`` (≥ 0).
    block : int or None
        Frames per block.

    Returns
    -------
    numpy.ndarray
        ``w[i, j]`` float64.

    See Also
    --------
    shaw_bias_terms : the bias it is added to.

    Notes
    -----
    .. math:: w_{ij} = [\lfloor i/k \rfloor - \ell \le \lfloor j/k \rfloor \le \lfloor i/k \rfloor]
    """
    length = check_int("length", length, minimum=1)
    chunk = check_int("chunk", chunk)
    if chunk == 0:
        raise ValueError("chunk must be positive, or negative for one chunk of every frame, got 0")
    left = check_int("left", left, minimum=0)
    local = np.arange(length) if block is None else np.arange(length) % check_int("block", block, minimum=1)
    part = np.zeros(length, dtype=np.int64) if chunk < 0 else local // chunk
    seen = (part[None, :] <= part[:, None]) & (part[None, :] >= part[:, None] - left)
    return np.where(seen & attended(length, block), 1.0, 0.0)


def shaw_bias_terms(table: np.ndarray, length: int, *, left: int, right: int, offset: int, sign: str,
                    block: int | None = None, window: tuple[int, int] | None = None) -> np.ndarray:
    r"""The per-head bias of ``length`` frames, ``(H, T, T)``, plus the streaming window where given;
    :math:`-\infty` at pairs of two blocks.

    Parameters
    ----------
    table : array_like
        The learned table ``B`` ``(rows, H)``, a column per head.
    length : int
        The frames ``T``.
    left, right, offset, sign
        As :func:`refpos.encodings.shaw_key.shaw_key_rows`.
    block : int or None
        Frames per block (``None``: one block); rows and window are each block's own.
    window : (int, int) or None
        ``(k, ℓ)`` of :func:`streaming_window` (``None``: no window added).

    Returns
    -------
    numpy.ndarray
        ``e[h, i, j]`` float64.

    See Also
    --------
    refpos.encodings.shaw_key.shaw_key_terms : the key term this is of one-hot queries.
    streaming_window

    Notes
    -----
    .. math:: e_{h,ij} = B_{r_{ij},h} + w_{ij}
    """
    table = np.asarray(floating_array(table, name="table"), dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"table must be (rows, H), got {table.shape}")
    length = check_int("length", length, minimum=1)
    heads = table.shape[1]
    one_hot = np.broadcast_to(np.eye(heads)[:, None, :], (heads, length, heads))  # u_h at every frame
    terms = shaw_key_terms(one_hot, table, left=left, right=right, offset=offset, sign=sign, block=block, scale=1.0)
    if window is None:
        return terms
    chunk, chunks_left = window
    return terms + streaming_window(length, chunk, chunks_left, block)


#: the wrong windows a port may add, each ``(description, change)``: ``change(k, ℓ)`` the wrong ``(k, ℓ)``, or
#: ``None`` for no window added at all
WINDOW_MISTAKES: dict[str, tuple[str, object]] = {
    "window_dropped": ("the boolean window not added (a bias alone): 1 less at every pair it holds",
                       lambda chunk, left: None),
    "chunk_short": ("chunks one frame shorter (k - 1)", lambda chunk, left: (chunk - 1, left) if chunk > 1 else False),
    "chunk_long": ("chunks one frame longer (k + 1)", lambda chunk, left: (chunk + 1, left) if chunk > 0 else False),
    "left_fewer": ("one chunk fewer seen before the query's (ℓ - 1)",
                   lambda chunk, left: (chunk, left - 1) if left > 0 else False),
    "left_more": ("one chunk more seen before the query's (ℓ + 1)", lambda chunk, left: (chunk, left + 1)),
}


def wrong_windows(length: int, window: tuple[int, int], block: int | None = None) -> dict[str, np.ndarray]:
    """The window each of :data:`WINDOW_MISTAKES` adds at ``length`` frames (0 for ``window_dropped``), those that
    differ from the right one alone."""
    right = streaming_window(length, *window, block)
    out = {}
    for name, (_, change) in WINDOW_MISTAKES.items():
        changed = change(*window)
        if changed is False:
            continue
        wrong = np.zeros_like(right) if changed is None else streaming_window(length, *changed, block)
        if not np.array_equal(wrong, right):
            out[name] = wrong
    return out


__all__ = ["WINDOW_MISTAKES", "shaw_bias_terms", "streaming_window", "wrong_windows"]
