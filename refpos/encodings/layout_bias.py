r"""A document model's relative attention bias: T5 buckets of the token distance and of the boxes' x and y distances,
each read from a learned table per head, summed and divided by :math:`\sqrt{d}` (LayoutLMv3's ``rel_pos_bias``,
``rel_pos_x_bias``, ``rel_pos_y_bias``; docs/layout-bias.md#the-math).

Every token carries a place ``p`` in the sequence (its index) and a box ``(x0, y0, x1, y1)``. With
:math:`b_n^m` T5's bidirectional bucket of a relative position for ``n`` buckets and largest distance ``m``
(:func:`refpos.encodings.t5.t5_bucket`, the one bucket function of refpos), ``x`` the box coordinate the x table is
read at (LayoutLMv3: the left edge ``x0``) and ``y`` the one the y table is read at (the bottom edge ``y1``), the bias
of query ``i`` and key ``j`` in head ``h`` is

.. math::
    B_{hij} = \frac{R\left[b_{n_1}^{m_1}(p_j - p_i),\, h\right] + X\left[b_{n_2}^{m_2}(x_j - x_i),\, h\right]
             + Y\left[b_{n_2}^{m_2}(y_j - y_i),\, h\right]}{\sqrt{d}}

``R`` is ``(n_1, H)`` (``rel_pos_bins`` rows), ``X`` and ``Y`` are ``(n_2, H)`` (``rel_2d_pos_bins``), ``m_1`` is
``max_rel_pos``, ``m_2`` ``max_rel_2d_pos`` and ``d`` the head width. Without the spatial part (``X`` and ``Y``
``None``) only the first term is read. The bias is computed once and added, after ``q·kᵀ/√d``, to every layer's
logits.

With an image, LayoutLMv3 appends a class token and one token per patch after the text: their places restart at 0
(:func:`joint_positions`) and their boxes are the patch grid's (:func:`visual_boxes`).

Examples
--------
>>> import numpy as np
>>> R = np.arange(32.0)[:, None]; X = 100 * np.arange(64.0)[:, None]; Y = 1000 * np.arange(64.0)[:, None]
>>> box = [[0, 0, 5, 5], [3, 0, 8, 10]]               # the second box 3 to the right, its bottom 5 lower
>>> layout_bias(R, X, Y, [0, 1], box, max_distance=128, max_2d_distance=256, head_dim=1)[0].tolist()
[[0.0, 40517.0], [5301.0, 0.0]]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refpos.encodings.box_tables import boxes
from refpos.encodings.t5 import check_bucket_args, t5_bucket
from refpos.validation import check_int, floating_array

#: the box coordinate LayoutLMv3 reads each axis at: x0 (index 0) for x, y1 (index 3) for y
X_CORNER, Y_CORNER = 0, 3
#: the page coordinates LayoutLMv3's processor normalises boxes to, and its patch grid's boxes span
PAGE = 1000


def relative(values: np.ndarray) -> np.ndarray:
    """``values[..., j] − values[..., i]`` as ``(..., T, T)`` (key minus query), int64."""
    v = np.asarray(values, dtype=np.int64)
    return v[..., None, :] - v[..., :, None]


def layout_buckets(positions: Any, bbox: Any = None, *, num_buckets: int = 32, max_distance: int = 128,
                   num_2d_buckets: int = 64, max_2d_distance: int = 256, x_corner: int = X_CORNER,
                   y_corner: int = Y_CORNER) -> dict[str, np.ndarray]:
    r"""The bucket of every (query, key) pair: ``{"1d": b(p_j − p_i)}`` and, with ``bbox``, ``"x"`` and ``"y"``,
    each ``(..., T, T)`` int64.

    Parameters
    ----------
    positions : int array ``(T,)`` or ``(B, T)``
        Each token's place in the sequence.
    bbox : int array ``(..., T, 4)`` or None
        Each token's ``(x0, y0, x1, y1)``; None: no spatial buckets.
    num_buckets, max_distance : int
        The 1-D buckets (``rel_pos_bins``, ``max_rel_pos``).
    num_2d_buckets, max_2d_distance : int
        The x and y buckets (``rel_2d_pos_bins``, ``max_rel_2d_pos``).
    x_corner, y_corner : int
        The box coordinate (0 … 3) the x and the y buckets read.

    See Also
    --------
    refpos.encodings.t5.t5_bucket : the bucket of one relative position.
    layout_bias : the tables read at these buckets.
    """
    pos = np.asarray(positions)
    if pos.dtype == bool or not np.issubdtype(pos.dtype, np.integer) or pos.ndim not in (1, 2):
        raise ValueError(f"positions must be integers of shape (T,) or (B, T), got {pos.dtype} {pos.shape}")
    out = {"1d": np.asarray(t5_bucket(relative(pos), num_buckets=num_buckets, max_distance=max_distance))}
    if bbox is None:
        return out
    b = boxes(bbox)
    if b.shape[-2] != pos.shape[-1]:
        raise ValueError(f"bbox must hold one box per position ({pos.shape[-1]}), got {b.shape[-2]}")
    for name, corner in (("x", x_corner), ("y", y_corner)):
        corner = check_int(f"{name}_corner", corner, minimum=0, maximum=3)
        out[name] = np.asarray(t5_bucket(relative(b[..., corner]), num_buckets=num_2d_buckets,
                                         max_distance=max_2d_distance))
    return out


def _table(table: Any, name: str) -> np.ndarray:
    t = np.asarray(floating_array(table, name=name), dtype=np.float64)
    if t.ndim != 2:
        raise ValueError(f"{name} must have shape (buckets, heads), got {t.shape}")
    return t


def _heads(rows: np.ndarray) -> np.ndarray:
    """``(..., T, T, H)`` -> ``(..., H, T, T)``."""
    return np.moveaxis(rows, -1, -3)


def layout_bias(rel_table: Any, x_table: Any, y_table: Any, positions: Any, bbox: Any = None, *,
                max_distance: int = 128, max_2d_distance: int = 256, head_dim: int,
                x_corner: int = X_CORNER, y_corner: int = Y_CORNER) -> np.ndarray:
    r"""The bias every layer adds to its logits, ``(..., H, T, T)``, float64 (the module docstring's :math:`B`).

    Parameters
    ----------
    rel_table : array ``(n_1, H)``
        The 1-D bucket table (transformers' ``rel_pos_bias.weight`` transposed); its rows are the bucket count.
    x_table, y_table : array ``(n_2, H)`` or None
        The x and y bucket tables (``rel_pos_x_bias.weight``, ``rel_pos_y_bias.weight`` transposed); None for both:
        no spatial part.
    positions : int array ``(T,)`` or ``(B, T)``
        Each token's place (LayoutLMv3: its index).
    bbox : int array ``(..., T, 4)``
        Each token's box; needed with the spatial tables.
    max_distance, max_2d_distance : int
        The largest distances of the 1-D and of the x and y buckets.
    head_dim : int
        ``d``: the bias is divided by :math:`\sqrt{d}`.
    x_corner, y_corner : int
        The box coordinate each axis reads.

    Returns
    -------
    numpy.ndarray ``(..., H, T, T)``

    Raises
    ------
    ValueError
        A table not 2-D, tables of other head counts, one spatial table without the other, spatial tables without
        ``bbox``, a bucket count or distance T5's buckets refuse (each named).

    See Also
    --------
    layout_buckets : the buckets read.
    refpos.encodings.layout_bias_mistakes.layout_bias_bound : a float32 port's bound.
    """
    rel = _table(rel_table, "rel_table")
    head_dim = check_int("head_dim", head_dim, minimum=1)
    spatial = x_table is not None or y_table is not None
    if spatial and (x_table is None or y_table is None):
        raise ValueError("x_table and y_table go together: pass both or neither")
    if spatial and bbox is None:
        raise ValueError("bbox is needed with the spatial tables x_table and y_table")
    tables = {"1d": rel}
    if spatial:
        tables["x"], tables["y"] = _table(x_table, "x_table"), _table(y_table, "y_table")
        if tables["x"].shape != tables["y"].shape:
            raise ValueError(f"y_table must have x_table's shape {tables['x'].shape}, got {tables['y'].shape}")
        if tables["x"].shape[1] != rel.shape[1]:
            raise ValueError(f"x_table must have rel_table's {rel.shape[1]} heads, got {tables['x'].shape[1]}")
    for name, distance in (("1d", max_distance), *((("x", max_2d_distance),) if spatial else ())):
        try:  # a table's rows are its bucket count: T5's bidirectional buckets' rules
            check_bucket_args(True, tables[name].shape[0], distance)
        except ValueError as exc:
            raise ValueError(f"{'rel' if name == '1d' else name}_table ({tables[name].shape[0]} bucket rows): {exc}"
                             ) from None
    buckets = layout_buckets(positions, bbox if spatial else None, num_buckets=rel.shape[0], max_distance=max_distance,
                             num_2d_buckets=tables["x"].shape[0] if spatial else 64, max_2d_distance=max_2d_distance,
                             x_corner=x_corner, y_corner=y_corner)
    # B = (R[b1(Δp)] + X[b2(Δx)] + Y[b2(Δy)]) / √d
    total = sum(tables[name][index] for name, index in buckets.items())
    return _heads(total) / math.sqrt(head_dim)


def visual_boxes(size: int, page: int = PAGE) -> np.ndarray:
    r"""The boxes of LayoutLMv3's class token and ``size × size`` patches, ``(1 + size², 4)``: the class token
    ``(1, 1, page − 1, page − 1)``, then patch ``(r, c)`` (row-major) spanning
    :math:`(e_c, e_r, e_{c+1}, e_{r+1})`, :math:`e_k = \lfloor k \cdot page / size \rfloor`.

    See Also
    --------
    joint_positions : the places of the same tokens.
    """
    size = check_int("size", size, minimum=1)
    page = check_int("page", page, minimum=2)
    edges = (np.arange(size + 1) * page) // size
    rows, cols = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    grid = np.stack([edges[cols], edges[rows], edges[cols + 1], edges[rows + 1]], axis=-1).reshape(-1, 4)
    return np.concatenate([[[1, 1, page - 1, page - 1]], grid]).astype(np.int64)


def joint_positions(tokens: int, patches: int) -> np.ndarray:
    """The places LayoutLMv3 buckets when an image joins ``tokens`` text tokens: ``0 … tokens − 1`` for the text,
    then ``0 … patches`` for the class token and the ``patches`` patches (the count restarts).

    See Also
    --------
    visual_boxes : the boxes of the same tokens.
    """
    tokens = check_int("tokens", tokens, minimum=0)
    patches = check_int("patches", patches, minimum=0)
    return np.concatenate([np.arange(tokens), np.arange(patches + 1)]).astype(np.int64)


__all__ = ["PAGE", "X_CORNER", "Y_CORNER", "joint_positions", "layout_bias", "layout_buckets", "relative",
           "visual_boxes"]
