r"""Shaw's key term alone, as speech encoders use it: a learned table of clipped frame distances read by each query
and added to the logits, over the whole sequence or inside blocks of frames.

Frames :math:`t = 0 … T-1` are cut into blocks of :math:`c` frames, the last one shorter where :math:`c` does not
divide :math:`T` (:math:`c \ge T`: one block, the whole sequence). A query :math:`i` attends only to the keys
:math:`j` of its own block, and each such pair reads row

.. math::
    r_{ij} = \operatorname{clip}\bigl(s\,(j - i),\; -L,\; R\bigr) + o

of the table :math:`E` (``(rows, d)``): the distance key minus query (:math:`s = +1`, wav2vec2-BERT) or query minus
key (:math:`s = -1`, Granite Speech), clipped to :math:`L` below and :math:`R` above (an asymmetric clip), shifted
by the offset :math:`o` (the row of distance 0). The logit of the pair gains

.. math::
    e_{ij} = \sigma\, q_i \cdot E_{r_{ij}}, \qquad \sigma = d^{-1/2} \text{ (the softmax scale)},

a pair of two blocks is not attended (:math:`-\infty`). Inside a block the local distance equals :math:`j - i`, so
the blocks change which pairs attend, not the rows they read. The value side of Shaw et al. is absent.

See docs/relative.md#shaw-key-term.
"""

from __future__ import annotations

import numpy as np

from refpos.validation import check_choice, check_int, floating_array

#: the distance a pair reads: key minus query (``+1``) or query minus key (``-1``)
SIGNS = {"key_minus_query": 1, "query_minus_key": -1}


def shaw_key_rows(length: int, *, left: int, right: int, offset: int, sign: str) -> np.ndarray:
    r"""The table row each (query, key) pair of ``length`` frames reads, ``(T, T)`` integers.

    Parameters
    ----------
    length : int
        The frames ``T``.
    left, right : int
        The clip below and above (``L``, ``R`` ≥ 0).
    offset : int
        The row of distance 0 (``o``).
    sign : str
        ``"key_minus_query"`` or ``"query_minus_key"`` (:data:`SIGNS`).

    Returns
    -------
    numpy.ndarray
        ``r[i, j]``, shape ``(T, T)``.

    See Also
    --------
    shaw_key_terms : the logit terms of these rows.

    Notes
    -----
    .. math:: r_{ij} = \operatorname{clip}(s\,(j - i), -L, R) + o
    """
    length = check_int("length", length, minimum=1)
    left, right = check_int("left", left, minimum=0), check_int("right", right, minimum=0)
    offset = check_int("offset", offset, minimum=0)
    s = SIGNS[check_choice("sign", sign, tuple(SIGNS))]
    t = np.arange(length)
    distance = s * (t[None, :] - t[:, None])  # (T, T): s·(j − i)
    return np.clip(distance, -left, right) + offset


def attended(length: int, block: int | None) -> np.ndarray:
    r"""Which (query, key) pairs of ``length`` frames attend, ``(T, T)`` booleans: those of one block of ``block``
    frames (every pair where ``block`` is ``None``).

    See Also
    --------
    shaw_key_terms : the terms, :math:`-\infty` where this is false.

    Notes
    -----
    .. math:: \lfloor i / c \rfloor = \lfloor j / c \rfloor
    """
    length = check_int("length", length, minimum=1)
    if block is None:
        return np.ones((length, length), dtype=bool)
    part = np.arange(length) // check_int("block", block, minimum=1)
    return part[:, None] == part[None, :]


def shaw_key_terms(q: np.ndarray, table: np.ndarray, *, left: int, right: int, offset: int, sign: str,
                   block: int | None = None, scale: float | None = None) -> np.ndarray:
    r"""The logit terms of a query's product with the rows of clipped distances, ``(..., H, T, T)``; :math:`-\infty`
    at pairs of two blocks.

    Parameters
    ----------
    q : array_like
        Queries ``(..., H, T, d)`` (one block of every head, or the whole sequence).
    table : array_like
        The learned table ``E`` ``(rows, d)``, shared by the heads.
    left, right, offset, sign
        As :func:`shaw_key_rows`.
    block : int or None
        Frames per block (``None``: one block).
    scale : float or None
        :math:`\sigma`; ``None`` for the softmax scale :math:`d^{-1/2}`.

    Returns
    -------
    numpy.ndarray
        ``e[..., h, i, j]``, float64.

    See Also
    --------
    shaw_key_rows, attended
    refpos.encodings.shaw.shaw_key_terms : the symmetric, unscaled term of Shaw et al.

    Notes
    -----
    .. math:: e_{ij} = \sigma\, q_i \cdot E_{r_{ij}} \text{ within a block}, \quad -\infty \text{ across blocks}
    """
    q = np.asarray(floating_array(q, name="q"), dtype=np.float64)
    table = np.asarray(floating_array(table, name="table"), dtype=np.float64)
    if q.ndim < 3 or table.ndim != 2 or table.shape[1] != q.shape[-1]:
        raise ValueError(f"q must be (..., H, T, d) and table (rows, d) of the same d, got q {q.shape} and table "
                         f"{table.shape}")
    length, dim = q.shape[-2], q.shape[-1]
    rows = shaw_key_rows(length, left=left, right=right, offset=offset, sign=sign)
    if rows.min() < 0 or rows.max() >= table.shape[0]:
        raise ValueError(f"table has {table.shape[0]} rows; {length} frames clipped to [-{left}, {right}] from row "
                         f"{offset} read rows {rows.min()} … {rows.max()}")
    sigma = dim**-0.5 if scale is None else float(scale)
    gathered = table[rows]  # (T, T, d): E[r_ij]
    terms = sigma * np.einsum("...id,ijd->...ij", q, gathered)  # σ·q_i·E[r_ij]
    return np.where(attended(length, block), terms, -np.inf)


__all__ = ["SIGNS", "attended", "shaw_key_rows", "shaw_key_terms"]
