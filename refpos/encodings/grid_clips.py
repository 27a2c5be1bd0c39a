r"""Position rows of a video clip's tokens from a learned grid: TimeSformer's grid and time table, ViViT's 3-D table.

A video tower cuts a clip of ``F`` frames into patches (TimeSformer: ``h × w`` per frame) or tubelets (ViViT:
``F_t × h × w``, each ``s`` frames deep, ``F_t = F / s``) and adds to each token a learned position. Two layouts:

**patch by patch, a time table per frame** (``"patch_major"``, TimeSformer under divided or joint space–time
attention): one CLS token, then every patch ``p = i·w + j`` of the grid with its ``F`` frames in turn. The patch
reads the grid ``G'`` (the table's grid read at ``(h, w)`` by the way of its record), the frame ``f`` reads a
learned time table ``T`` of ``N`` rows resampled nearest to ``F`` rows, the CLS token its own row ``c`` and no time:

.. math::
    P = \big[\,c;\ G'_0 + T'_0;\ \dots;\ G'_0 + T'_{F-1};\ G'_1 + T'_0;\ \dots;\ G'_{hw-1} + T'_{F-1}\big],
    \qquad T'_f = T_{\lfloor f \cdot N / F \rfloor}

(row ``1 + p·F + f``). The grid is resampled only when the patch count ``h·w`` differs from the table's
``M_h·M_w``: at the same count the table's rows are read as they are, in the new grid's raster order.

**a grid per tubelet frame** (``"tubelets"``, ViViT): the table holds ``c`` and one grid for each of the
``F_t`` tubelet frames, ``1 + F_t·M_h·M_w`` rows, in the raster order of ``(t, i, j)``; token
``1 + (t·h + i)·w + j`` reads row ``1 + (t·M_h + i)·M_w + j``, the table as it is. Its code resamples the table
by reading all its rows as one square grid, which gives ``h·w`` rows for the ``F_t·h·w`` tokens: only a table
of one tubelet frame (``F_t = 1``) can be resampled, and it is then an image's grid (:mod:`refpos.encodings.grid`).

**factorised: a grid per frame, then a table along the frames** (VideoPrism's tower, two stacks): the spatial
stack's sequences are the clip's frames, each its ``h × w`` patches, and every frame adds the same rows, the grid
``G`` of ``M_h × M_w`` rows without a CLS row read at ``(h, w)`` (``"frame_grid"``); the temporal stack's sequences
are the patches, each its ``F`` frames, and every patch adds the same rows, a learned table ``T`` of ``N`` rows
read as a grid of ``N × 1`` at ``(F, 1)`` by the record's way (``"frame_table"``):

.. math::
    P^{\text{spatial}}_{f,\,i w + j} = \mathcal{R}_{h,w}(G)_{i,j}, \qquad
    P^{\text{temporal}}_{p,\,f} = \mathcal{R}_{F,1}(T)_{f,0}
"""

from __future__ import annotations

from refpos.backend import Array, array_namespace
from refpos.encodings.grid import resample_position_sequence
from refpos.validation import check_int, floating_array

#: how a clip's tokens read the grid: patch by patch with a time table per frame, a grid per tubelet frame, or
#: factorised (each frame's patches read an image's grid; each patch's frames read a table along the frames)
CLIP_LAYOUTS = ("patch_major", "tubelets", "frame_grid", "frame_table")
#: the factorised layouts, whose sequences are each frame's patches or each patch's frames, without a CLS row
FACTORISED = ("frame_grid", "frame_table")


def patch_major_rows(cls_row: Array, grid_rows: Array, frames: int, time_table: Array | None = None) -> Array:
    r"""The rows of a clip laid out patch by patch (TimeSformer; module docstring): ``(1 + h·w·F, d)``.

    ``cls_row`` ``(d,)`` is the CLS token's row, ``grid_rows`` ``(h·w, d)`` the grid read at the input's patch
    grid, ``time_table`` ``(N, d)`` the learned time table (``None``: no time table, the rows of the grid alone).

    Notes
    -----
    .. math:: P_0 = c, \qquad P_{1 + pF + f} = G'_p + T_{\lfloor f N / F \rfloor}

    See Also
    --------
    refpos.encodings.grid.resample_position_sequence : the time table resampled nearest (``mode="nearest"``).
    refpos.models.kinds.grid.GridLayer.clip_rows : the record that reads the grid and calls this.

    References
    ----------
    transformers, ``models/timesformer/modeling_timesformer.py``: ``TimesformerEmbeddings.forward``.

    Examples
    --------
    >>> import numpy as np
    >>> rows = patch_major_rows(np.zeros(1), np.array([[10.0], [20.0]]), 3, np.array([[1.0], [2.0]]))
    >>> rows[:, 0].tolist()
    [0.0, 11.0, 11.0, 12.0, 21.0, 21.0, 22.0]
    """
    grid_rows = floating_array(grid_rows, name="grid_rows")
    xp = array_namespace(grid_rows)
    if grid_rows.ndim != 2:
        raise ValueError(f"grid_rows must have shape (patches, dim), got {tuple(grid_rows.shape)}")
    width = grid_rows.shape[1]
    cls_row = floating_array(cls_row, name="cls_row")
    if tuple(cls_row.shape) != (width,):
        raise ValueError(f"cls_row must have shape ({width},), the grid's width, got {tuple(cls_row.shape)}")
    frames = check_int("frames", frames, minimum=1)
    if time_table is None:
        times = xp.zeros((frames, width), dtype=grid_rows.dtype)
    else:
        time_table = floating_array(time_table, name="time_table")
        if time_table.ndim != 2 or time_table.shape[1] != width:
            raise ValueError(f"time_table must have shape (rows, {width}), got {tuple(time_table.shape)}")
        times = resample_position_sequence(time_table, frames, mode="nearest")  # T'_f = T_⌊f·N/F⌋
    patches = grid_rows.shape[0]
    # P_{1 + p·F + f} = G'_p + T'_f: patch p's frames in turn
    body = xp.reshape(grid_rows[:, None, :] + times[None, :, :], (patches * frames, width))
    return xp.concat([xp.reshape(cls_row, (1, width)), body], axis=0)


def frame_major_order(patches: int, frames: int) -> list[int]:
    """The index, in patch-by-patch order (row ``p·F + f``), of each token listed frame by frame (row ``f·P + p``):
    the tokens of :func:`patch_major_rows` read in the other layout (a mistake the checks tell apart).

    >>> frame_major_order(2, 3)
    [0, 3, 1, 4, 2, 5]
    """
    patches = check_int("patches", patches, minimum=1)
    frames = check_int("frames", frames, minimum=1)
    return [p * frames + f for f in range(frames) for p in range(patches)]


__all__ = ["CLIP_LAYOUTS", "FACTORISED", "frame_major_order", "patch_major_rows"]
