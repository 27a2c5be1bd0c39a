r"""A document token's 2-D box positions: learned tables read at the corners, the height and the width of the
token's bounding box, their rows added to the token's input (LayoutLM's ``x_position_embeddings``,
``y_position_embeddings``, ``h_position_embeddings``, ``w_position_embeddings``; docs/box-tables.md#the-math).

Each token carries a box ``(x0, y0, x1, y1)`` of integer page coordinates (LayoutLM's ``bbox``, normalised to
0 … 1000 by the processor). Four tables ``X``, ``Y``, ``H``, ``W`` (each ``(R, D)``, ``R`` the config's
``max_2d_position_embeddings``) give what the token gains:

.. math:: e = X[x_0] + Y[y_0] + X[x_1] + Y[y_1] + H[y_1 - y_0] + W[x_1 - x_0]

both corners read from the one ``X`` table and the one ``Y`` table, the height and the width from tables of their
own. A coordinate, a height or a width outside its table (a negative extent included: ``x1 < x0``) is a
``ValueError`` naming ``bbox``; nothing is clipped into the table. This is the sum beside the 1-D learned table
(docs/learned.md): the stack adds both, with its word and token-type rows, before its layer norm.

LayoutLMv3 (``combine="concat"``) concatenates the six rows in that order instead of summing them, its x and y
tables of one width (``coordinate_size``) and its height and width tables of another (``shape_size``), and clips
each extent into ``[0, 1023]`` before reading it (``clip_extents=1023``): a box with ``x1 < x0`` reads the w table's
row 0 there.

The rows each table is read at are :func:`box_reads`; the rows summed or concatenated, :func:`box_positions`.

Examples
--------
>>> import numpy as np
>>> X = np.arange(8.0)[:, None]; Y = 10 * X; H = 100 * X; W = 1000 * X  # width-1 tables of 8 rows
>>> box_positions(X, Y, H, W, [[1, 2, 4, 3]])[:, 0].tolist()  # X[1] + Y[2] + X[4] + Y[3] + H[1] + W[3]
[3155.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.validation import check_choice, check_int, floating_array

#: the four tables, in the order of the contract function's parameters
TABLES = ("x", "y", "h", "w")
#: how the six rows of a box become what the token gains: summed (LayoutLM) or concatenated (LayoutLMv3)
COMBINES = ("sum", "concat")


def boxes(bbox: Any) -> np.ndarray:
    """``bbox`` as an int64 array ``(..., 4)`` of ``(x0, y0, x1, y1)``: a ``TypeError`` for non-integer values, a
    ``ValueError`` for another last axis, both naming ``bbox``."""
    array = np.asarray(bbox)
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
        raise TypeError(f"bbox must hold integer coordinates, got dtype {array.dtype}")
    if array.ndim < 1 or array.shape[-1] != 4:
        raise ValueError(f"bbox must have shape (..., 4) holding (x0, y0, x1, y1), got {array.shape}")
    return array.astype(np.int64)


def box_reads(bbox: Any, rows: dict[str, int], clip_extents: int | None = None) -> dict[str, tuple[np.ndarray, ...]]:
    r"""The rows each table is read at, ``{"x": (x0, x1), "y": (y0, y1), "h": (y1 − y0,), "w": (x1 − x0,)}``, each
    an index array of ``bbox``'s leading shape; ``rows``: each table's row count; ``clip_extents``: each extent
    clipped into ``[0, clip_extents]`` first (LayoutLMv3's 1023), else read as it is. An index outside its table is a
    ``ValueError`` naming ``bbox``, the coordinate and the table.

    See Also
    --------
    box_positions : the rows summed.
    """
    b = boxes(bbox)
    x0, y0, x1, y1 = (b[..., i] for i in range(4))
    # X at x0 and x1, Y at y0 and y1, H at y1 − y0, W at x1 − x0
    h, w = y1 - y0, x1 - x0
    if clip_extents is not None:
        limit = check_int("clip_extents", clip_extents, minimum=0)
        h, w = np.clip(h, 0, limit), np.clip(w, 0, limit)
    reads = {"x": (x0, x1), "y": (y0, y1), "h": (h,), "w": (w,)}
    names = {"x": ("x0", "x1"), "y": ("y0", "y1"), "h": ("y1 - y0",), "w": ("x1 - x0",)}
    for table, indices in reads.items():
        for name, index in zip(names[table], indices, strict=True):
            if index.size and (index.min() < 0 or index.max() >= rows[table]):
                raise ValueError(f"bbox: {name} must lie in [0, {rows[table]}) (the rows of the {table} table), got "
                                 f"{int(index.min())} … {int(index.max())}")
    return reads


def check_tables(x_table: Any, y_table: Any, h_table: Any, w_table: Any, combine: str = "sum"
                 ) -> dict[str, np.ndarray]:
    """The four tables as float64 ``(rows, width)``: one width for all (``combine="sum"``), else the y table of the
    x table's width and the w table of the h table's (``"concat"``); a ``ValueError`` naming the table."""
    check_choice("combine", combine, COMBINES)
    tables = {name: np.asarray(floating_array(t, name=f"{name}_table"), dtype=np.float64)
              for name, t in zip(TABLES, (x_table, y_table, h_table, w_table), strict=True)}
    for name, table in tables.items():
        if table.ndim != 2:
            raise ValueError(f"{name}_table must have shape (rows, D), got {table.shape}")
        like = "x" if combine == "sum" or name in "xy" else "h"
        if table.shape[1] != tables[like].shape[1]:
            raise ValueError(f"{name}_table must have {like}_table's width {tables[like].shape[1]}, got "
                             f"{table.shape[1]}")
    return tables


def summed_rows(tables: dict[str, np.ndarray], reads: dict[str, tuple[np.ndarray, ...]]) -> np.ndarray:
    """``Σ_table Σ_index T[index]`` over ``reads`` (float64), ``(..., D)``; the terms in the order of ``reads``."""
    shape = next(np.shape(index) for indices in reads.values() for index in indices)
    out = np.zeros((*shape, tables["x"].shape[1]))
    for table, indices in reads.items():
        for index in indices:
            out = out + tables[table][index]
    return out


def box_positions(x_table: Any, y_table: Any, h_table: Any, w_table: Any, bbox: Any, *, combine: str = "sum",
                  clip_extents: int | None = None) -> np.ndarray:
    r"""What each token gains from its box, ``(..., D)``, float64.

    Parameters
    ----------
    x_table, y_table, h_table, w_table : array ``(R, D)``
        The four learned tables (row counts may differ; one width ``D``).
    bbox : int array ``(..., 4)``
        Each token's ``(x0, y0, x1, y1)``.
    combine : ``"sum"`` or ``"concat"``
        The six rows summed (one width ``D``), or concatenated in the same order (LayoutLMv3: ``D = 4C + 2S``, the
        x and y tables ``C`` wide, the h and w tables ``S``).
    clip_extents : int or None
        Each extent clipped into ``[0, clip_extents]`` before it is read (LayoutLMv3: 1023).

    Returns
    -------
    numpy.ndarray ``(..., D)``
        :math:`X[x_0] + Y[y_0] + X[x_1] + Y[y_1] + H[y_1 - y_0] + W[x_1 - x_0]`, or the same rows concatenated.

    Raises
    ------
    ValueError
        A coordinate, height or width outside its table (``bbox``), a table that is not 2-D or of another width
        (named).
    TypeError
        Non-integer coordinates (``bbox``), non-numeric tables (named).

    See Also
    --------
    box_reads : the rows each table is read at.
    refpos.encodings.box_tables_mistakes.box_bound : a float32 port's bound.
    """
    tables = check_tables(x_table, y_table, h_table, w_table, combine)
    reads = box_reads(bbox, {name: t.shape[0] for name, t in tables.items()}, clip_extents)
    # e = X[x0] + Y[y0] + X[x1] + Y[y1] + H[y1 − y0] + W[x1 − x0], summed in that order (or concatenated)
    ordered = {"x0": ("x", reads["x"][0]), "y0": ("y", reads["y"][0]), "x1": ("x", reads["x"][1]),
               "y1": ("y", reads["y"][1]), "h": ("h", reads["h"][0]), "w": ("w", reads["w"][0])}
    if combine == "concat":
        return np.concatenate([tables[table][index] for table, index in ordered.values()], axis=-1)
    out = np.zeros((*reads["x"][0].shape, tables["x"].shape[1]))
    for table, index in ordered.values():
        out = out + tables[table][index]
    return out


__all__ = ["COMBINES", "TABLES", "box_positions", "box_reads", "boxes", "check_tables", "summed_rows"]
