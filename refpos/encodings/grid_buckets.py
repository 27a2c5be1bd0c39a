r"""A learned grid read at bucketed fractional coordinates (NaViT; transformers' Idefics2, Idefics3, SmolVLM,
Phi-4-multimodal and MiniCPM vision towers).

Instead of resampling its ``M_h × M_w`` table, a NaViT-style tower gives each patch ``(i, j)`` of an ``n_h × n_w``
image its fractional coordinates ``(i/n_h, j/n_w) ∈ [0, 1)²`` and reads the table row of the bucket they fall
in, the buckets being the ``M`` equal intervals ``[k/M, (k+1)/M)`` of each axis (``torch.bucketize`` with
``right=True`` against the boundaries ``1/M, 2/M, …``):

.. math::
    \mathrm{row}(i) = \#\{k \in 1 \ldots M - 1 : k/M \le i/n\} = \left\lfloor \frac{i\,M}{n} \right\rfloor,
    \qquad \mathrm{id}(i, j) = \mathrm{row}_h(i)\cdot M_w + \mathrm{row}_w(j)

in exact arithmetic: the legacy nearest-neighbour rule read in integers. The row of patch ``i`` is a table row
itself, not a blend: the positions are gathered, exactly.

**Ties.** Where ``i/n = k/M`` exactly (``i·M`` a multiple of ``n``: every row of the native grid, ``n = M``), the
fraction lies on a boundary, and the model's floating-point arithmetic decides: transformers computes the
fractions as ``i · fl(1/n)`` (Idefics2 and its kin) or ``fl(i/n)`` (MiniCPM's
``get_vision_nearest_position_ids``) and the boundaries with ``torch.arange(1/M, 1, 1/M)``, whose rounding
depends on the CPU's vector width, so a fraction a rounding below its boundary reads row ``k − 1``.
:func:`bucket_rows` answers the exact row; ``at_ties="below"`` gives the row a port whose rounding fell below
the boundary reads, and :func:`bucket_ties` says where the two may differ. Off the ties a fraction is at least
``1/(n·M)`` from every boundary, far more than float32 rounds (``n·M < 10⁶``), so every port agrees there.

Batches: the Idefics2 family pads images into one frame and reads each image's grid from its
``patch_attention_mask`` (the padding reads row 0: :func:`bucketed_positions_padded`); MiniCPM packs them one
after another by ``target_sizes`` (:func:`bucketed_positions_packed`).
"""

from __future__ import annotations

import math

from refpos.backend import Array, array_namespace
from refpos.validation import check_choice, check_int, floating_array

#: what a row at a tie reads: the exact row, or the row below (a fraction rounded under its boundary)
AT_TIES = ("exact", "below")


def bucket_rows(n: int, m: int, *, at_ties: str = "exact") -> list[int]:
    r"""The table row ``⌊i·M/n⌋`` of each of ``n`` patches along an axis whose table has ``m`` rows.

    ``at_ties="below"`` reads ``k − 1`` where ``i·M/n = k`` exactly (``i > 0``; the module docstring).

    >>> bucket_rows(5, 3), bucket_rows(3, 3), bucket_rows(3, 3, at_ties="below")
    ([0, 0, 1, 1, 2], [0, 1, 2], [0, 0, 1])
    """
    n, m = check_int("n", n, minimum=1), check_int("m", m, minimum=1)
    below = check_choice("at_ties", at_ties, AT_TIES) == "below"
    return [(i * m) // n - (1 if below and i > 0 and (i * m) % n == 0 else 0) for i in range(n)]


def bucket_ties(n: int, m: int) -> list[bool]:
    """Whether patch ``i`` of ``n`` sits on a bucket boundary of a table of ``m`` rows (``i·m ≡ 0 mod n``, ``i > 0``).

    >>> bucket_ties(4, 2)
    [False, False, True, False]
    """
    n, m = check_int("n", n, minimum=1), check_int("m", m, minimum=1)
    return [i > 0 and (i * m) % n == 0 for i in range(n)]


def bucketed_position_ids(grid: tuple[int, int], source_grid: tuple[int, int], *,
                          at_ties: str = "exact") -> list[int]:
    r"""The table row ``row_h(i)·M_w + row_w(j)`` of each patch of the grid ``(n_h, n_w)`` in raster order, for a
    table of ``source_grid = (M_h, M_w)`` (:func:`bucket_rows` per axis).

    >>> bucketed_position_ids((2, 3), (4, 4))
    [0, 1, 2, 8, 9, 10]
    """
    (n_h, n_w), (m_h, m_w) = grid, source_grid
    rows, cols = bucket_rows(n_h, m_h, at_ties=at_ties), bucket_rows(n_w, m_w, at_ties=at_ties)
    return [r * check_int("source_grid[1]", m_w, minimum=1) + c for r in rows for c in cols]


def position_id_choices(grid: tuple[int, int], source_grid: tuple[int, int]) -> list[tuple[int, ...]]:
    """The rows each patch of ``grid`` may read, the exact one first: at a tie along an axis that axis may read the
    row below, each axis on its own (up to four rows where both axes tie).

    >>> position_id_choices((2, 2), (2, 2))
    [(0,), (1, 0), (2, 0), (3, 2, 1, 0)]
    """
    (n_h, n_w), (m_h, m_w) = grid, source_grid
    axes = [list(zip(bucket_rows(n, m), bucket_rows(n, m, at_ties="below"), strict=True))
            for n, m in ((n_h, m_h), (n_w, m_w))]
    return [tuple(dict.fromkeys(r * m_w + c for r in (r0, r1) for c in (c0, c1)))
            for r0, r1 in axes[0] for c0, c1 in axes[1]]


def read_buckets(grid: Array, size: tuple[int, int], *, at_ties: str = "exact") -> Array:
    r"""A position grid ``(M_h, M_w, d)`` read at the bucketed fractional coordinates of ``size = (n_h, n_w)``:
    ``(n_h, n_w, d)``, ``G'[i, j] = G[⌊i·M_h/n_h⌋, ⌊j·M_w/n_w⌋]`` (module docstring).

    >>> import numpy as np
    >>> np.asarray(read_buckets(np.arange(4.0).reshape(2, 2, 1), (3, 2)))[:, :, 0].tolist()
    [[0.0, 1.0], [0.0, 1.0], [2.0, 3.0]]
    """
    grid = floating_array(grid, name="grid")
    xp = array_namespace(grid)
    if grid.ndim != 3:
        raise ValueError(f"grid must have shape (rows, columns, dim), got {tuple(grid.shape)}")
    n_h, n_w = size
    rows = xp.asarray(bucket_rows(n_h, grid.shape[0], at_ties=at_ties), dtype=xp.int64)
    cols = xp.asarray(bucket_rows(n_w, grid.shape[1], at_ties=at_ties), dtype=xp.int64)
    return xp.take(xp.take(grid, rows, axis=0), cols, axis=1)


def _side(table: Array) -> int:
    """The side ``M`` of a square table ``(M², d)``; a ``ValueError`` naming ``table`` otherwise."""
    side = math.isqrt(table.shape[0]) if table.ndim == 2 else 0
    if table.ndim != 2 or side * side != table.shape[0]:
        raise ValueError(f"table must have shape (side², dim), got {tuple(table.shape)}")
    return side


def _gather(table: Array, ids: list[int]) -> Array:
    xp = array_namespace(table)
    return xp.take(table, xp.asarray(ids, dtype=xp.int64), axis=0)


def _sizes(sizes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for index, size in enumerate(sizes):
        if not isinstance(size, tuple | list) or len(size) != 2:
            raise TypeError(f"sizes[{index}] must be a pair (rows, columns), got {size!r}")
        out.append((check_int(f"sizes[{index}][0]", size[0], minimum=1),
                    check_int(f"sizes[{index}][1]", size[1], minimum=1)))
    return out


def bucketed_positions_padded(table: Array, sizes: list[tuple[int, int]], frame: tuple[int, int], *,
                              at_ties: str = "exact") -> Array:
    r"""The Idefics2 family's batch: image ``b`` of patch grid ``sizes[b] = (n_h, n_w)`` fills the top-left of a
    padded ``frame = (F_h, F_w)`` (its ``patch_attention_mask``); its patches read the square ``table``
    ``(M², d)`` at their buckets, the padding reads row 0. Returns ``(B, F_h·F_w, d)`` in the frame's raster order.

    References
    ----------
    transformers, ``models/idefics2/modeling_idefics2.py``: ``Idefics2VisionEmbeddings.forward``.
    """
    table = floating_array(table, name="table")
    xp = array_namespace(table)
    side = _side(table)
    f_h, f_w = (check_int("frame[0]", frame[0], minimum=1), check_int("frame[1]", frame[1], minimum=1))
    images = []
    for index, (n_h, n_w) in enumerate(_sizes(sizes)):
        if n_h > f_h or n_w > f_w:
            raise ValueError(f"sizes[{index}] = {(n_h, n_w)} does not fit the frame {(f_h, f_w)}")
        ids = bucketed_position_ids((n_h, n_w), (side, side), at_ties=at_ties)
        frame_ids = [ids[r * n_w + c] if r < n_h and c < n_w else 0 for r in range(f_h) for c in range(f_w)]
        images.append(_gather(table, frame_ids))
    return xp.stack(images, axis=0)


def bucketed_positions_packed(table: Array, sizes: list[tuple[int, int]], *, at_ties: str = "exact") -> Array:
    r"""MiniCPM's batch: the images of patch grids ``sizes`` one after another, each reading the square ``table``
    ``(M², d)`` at its buckets: ``(Σ n_h·n_w, d)``.

    References
    ----------
    transformers, ``vision_utils.py``: ``get_vision_nearest_position_ids``.
    """
    table = floating_array(table, name="table")
    xp, side = array_namespace(table), _side(table)
    return xp.concat([_gather(table, bucketed_position_ids(size, (side, side), at_ties=at_ties))
                      for size in _sizes(sizes)], axis=0)
