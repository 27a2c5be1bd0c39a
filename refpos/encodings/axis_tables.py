r"""Factorised learned positions read at per-patch indices: each patch adds one row of a learned row table and
one row of a learned column table, at the indices its input carries (docs/axis-tables.md#the-math).

A vision tower fed patches of any image size and aspect keeps two 1-D tables ``E_row`` ``(P, D)`` and ``E_col``
``(P, D)`` instead of one 2-D grid, and each patch says where it lies: Pix2Struct's flattened patches carry their
row and column in their first two values, Gemma 4's towers take ``(x, y)`` position ids beside the pixels. The
patch at row ``r`` and column ``c`` gains

.. math:: e(r, c) = E_{\text{row}}[r] + E_{\text{col}}[c],

nothing resampled: a table row is read as it is stored. What differs between the models is a
:class:`AxisTableVariant` of :data:`AXIS_TABLE_VARIANTS`: which table the first index reads, and how a padding patch
is marked and what it adds.

Examples
--------
>>> import numpy as np
>>> rows, cols = np.array([[0.0, 0.0], [1.0, 2.0]]), np.array([[0.0, 10.0], [0.0, 20.0]])
>>> axis_table_positions(np.array([[1, 0], [0, 1]]), rows, cols, "pix2struct").tolist()
[[1.0, 12.0], [0.0, 20.0]]
>>> axis_table_positions(np.array([[1, 0], [-1, -1]]), rows, cols, "gemma4").tolist()  # (x, y); a padding patch
[[0.0, 20.0], [0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.validation import array_of_kind, check_choice, check_memory, element_count, floating_array

#: which table the first of a patch's two indices reads
FIRST_INDEX = ("row", "column")
#: how a padding patch is marked and what it adds: ``none`` (no index marks it: every index is a table row),
#: ``patch`` (a patch whose two indices are both −1 adds nothing), ``axis`` (each index −1 adds nothing of its
#: table)
PADDING = ("none", "patch", "axis")
#: how a checkpoint stores the two tables: two modules, one parameter ``(2, P, D)`` (table first) or ``(P, 2, D)``
STORAGE = ("two_tables", "axis_first", "axis_second")


@dataclass(frozen=True)
class AxisTableVariant:
    """One model's way of reading its two tables (module docstring).

    ``first``: the table the first index reads (:data:`FIRST_INDEX`); ``padding``: :data:`PADDING`; ``storage``:
    :data:`STORAGE` (the first stored table is the one the first index reads); ``indices``: where the indices come
    from; ``models``: transformers 5.25 model types; ``source``: the code.
    """

    name: str
    first: str
    padding: str
    storage: str
    indices: str
    models: tuple[str, ...]
    source: str

    def __post_init__(self) -> None:
        check_choice("first", self.first, FIRST_INDEX)
        check_choice("padding", self.padding, PADDING)
        check_choice("storage", self.storage, STORAGE)


#: variant name -> its record
AXIS_TABLE_VARIANTS: Mapping[str, AxisTableVariant] = MappingProxyType({v.name: v for v in (
    AxisTableVariant("pix2struct", "row", "none", "two_tables",
                     "the first two values of each flattened patch, truncated to integers (the processor numbers "
                     "rows and columns from 1; a padding patch is all zeros and reads row 0 of both tables)",
                     ("pix2struct_vision_model", "kosmos_2_5_vision_model"),
                     "pix2struct/modeling_pix2struct.py: Pix2StructVisionEmbeddings.forward; "
                     "kosmos2_5/modeling_kosmos2_5.py: Kosmos2_5VisionEmbeddings.forward"),
    AxisTableVariant("gemma4", "column", "patch", "axis_first",
                     "pixel_position_ids (x, y) per patch; a patch whose ids are both −1 is padding",
                     ("gemma4_vision",), "gemma4/modeling_gemma4.py: Gemma4VisionPatchEmbedder._position_embeddings"),
    AxisTableVariant("gemma4_unified", "column", "axis", "axis_second",
                     "image_position_ids (x, y) per patch; an id −1 adds nothing of its table",
                     ("gemma4_unified_vision",), "gemma4_unified/modeling_gemma4_unified.py: "
                     "Gemma4UnifiedVisionEmbedder.forward"),
)})


def variant_of(variant: str | AxisTableVariant) -> AxisTableVariant:
    """The record of ``variant`` (a name of :data:`AXIS_TABLE_VARIANTS` or a record)."""
    if isinstance(variant, AxisTableVariant):
        return variant
    return AXIS_TABLE_VARIANTS[check_choice("variant", variant, tuple(AXIS_TABLE_VARIANTS))]


def split_tables(stored: Array, variant: str | AxisTableVariant) -> tuple[Array, Array]:
    """``(row table, column table)`` of one stored parameter ``(2, P, D)`` (``axis_first``) or ``(P, 2, D)``
    (``axis_second``), the first stored table the one the first index reads (:class:`AxisTableVariant`)."""
    record = variant_of(variant)
    stored = floating_array(stored, name="stored")
    axis = {"axis_first": 0, "axis_second": 1}.get(record.storage)
    if axis is None or stored.ndim != 3 or stored.shape[axis] != 2:
        raise ValueError(f"stored: variant {record.name!r} stores its tables as {record.storage}, got shape "
                         f"{tuple(stored.shape)}")
    first, second = (stored[0], stored[1]) if axis == 0 else (stored[:, 0], stored[:, 1])
    return (first, second) if record.first == "row" else (second, first)


def _indices(indices: Any) -> Any:
    xp = array_of_kind("indices", indices, "integral", "an integer array (..., 2)")
    if indices.ndim < 1 or indices.shape[-1] != 2:
        raise ValueError(f"indices must have shape (..., 2), got {tuple(indices.shape)}")
    return xp


def _read(table: Array, index: Array, adds: Array | None, xp: Any) -> Array:
    """``table[index]`` of every patch (``index`` any shape), zero where ``adds`` is False."""
    rows = xp.reshape(xp.take(xp.astype(table, xp.float64), xp.reshape(index, (-1,)), axis=0),
                      (*index.shape, table.shape[1]))
    return rows if adds is None else xp.where(adds[..., None], rows, xp.zeros_like(rows))


def axis_table_positions(indices: Array, row_table: Array, column_table: Array,
                         variant: str | AxisTableVariant) -> Array:
    r"""The position each patch adds, ``(..., D)``: one row of each table at the indices it carries.

    Parameters
    ----------
    indices : integer array ``(..., 2)``
        Each patch's two indices in the model's order (:attr:`AxisTableVariant.first`: Pix2Struct's (row, column),
        Gemma 4's (x, y) = (column, row)).
    row_table, column_table : real floating arrays ``(P_row, D)``, ``(P_col, D)``
        The learned tables (:func:`split_tables` for one stored parameter).
    variant : str or AxisTableVariant
        A name of :data:`AXIS_TABLE_VARIANTS`.

    Notes
    -----
    With ``(r, c)`` the patch's row and column index (the pair in the variant's order),

    .. math:: e = m_r\,E_{\text{row}}[\max(r, 0)] + m_c\,E_{\text{col}}[\max(c, 0)]

    where ``m_r = m_c = 1`` (``padding = "none"``: every index must be a row of its table), ``m_r = m_c = 0`` at a
    patch whose indices are both −1 (``"patch"``; another negative index reads row 0, as the code's clamp does),
    ``m_r = [r ≠ −1]``, ``m_c = [c ≠ −1]`` (``"axis"``). The sum is taken once, in float64.

    See Also
    --------
    split_tables : one stored ``(2, P, D)`` or ``(P, 2, D)`` parameter as the two tables.
    refpos.encodings.axis_tables_mistakes : the bound of a float32 port and the catalogued mistakes.

    Examples
    --------
    >>> import numpy as np
    >>> axis_table_positions(np.array([[0, 1]]), np.eye(2), 2 * np.eye(2), "pix2struct").tolist()
    [[1.0, 2.0]]
    """
    record = variant_of(variant)
    xp = _indices(indices)
    row_table = floating_array(row_table, name="row_table")
    column_table = floating_array(column_table, name="column_table")
    array_namespace(indices, row_table, column_table)
    for name, table in (("row_table", row_table), ("column_table", column_table)):
        if table.ndim != 2:
            raise ValueError(f"{name} must have shape (P, D), got {tuple(table.shape)}")
    if row_table.shape[1] != column_table.shape[1]:
        raise ValueError(f"row_table and column_table must have the same width D, got {row_table.shape[1]} and "
                         f"{column_table.shape[1]}")
    check_memory("the patches' positions, float64", 3 * element_count(indices) // 2 * row_table.shape[1] * 8,
                 f"{element_count(indices) // 2} patches of width {row_table.shape[1]}")
    first, second = indices[..., 0], indices[..., 1]
    row, column = (first, second) if record.first == "row" else (second, first)
    if record.padding == "none":
        low = xp.min(indices) if element_count(indices) else 0
        if int(low) < 0:
            raise ValueError(f"indices: variant {record.name!r} marks no padding, every index is a table row; got "
                             f"{int(low)}")
        row_adds = column_adds = None
    elif record.padding == "patch":
        row_adds = column_adds = ~((first == -1) & (second == -1))
    else:
        row_adds, column_adds = row != -1, column != -1
    for name, index, table in (("row", row, row_table), ("column", column, column_table)):
        if element_count(index) and int(xp.max(index)) >= table.shape[0]:
            raise ValueError(f"indices: a {name} index {int(xp.max(index))} is past the {name} table's "
                             f"{table.shape[0]} rows")
    zero = xp.zeros_like(row)
    return (_read(row_table, xp.where(row < 0, zero, row), row_adds, xp)
            + _read(column_table, xp.where(column < 0, zero, column), column_adds, xp))


def flattened_patch_indices(flattened_patches: Array) -> Array:
    """Pix2Struct's indices ``(..., 2)``: the first two values of each flattened patch, truncated toward zero
    (``.long()``), in the order (row, column)."""
    patches = floating_array(flattened_patches, name="flattened_patches")
    if patches.ndim < 1 or patches.shape[-1] < 2:
        raise ValueError(f"flattened_patches must have shape (..., 2 + C·p²), got {tuple(patches.shape)}")
    xp = array_namespace(patches)
    return xp.astype(xp.trunc(patches[..., :2]), xp.int64)


__all__ = ["AXIS_TABLE_VARIANTS", "FIRST_INDEX", "PADDING", "STORAGE", "AxisTableVariant", "axis_table_positions",
           "flattened_patch_indices", "split_tables", "variant_of"]
