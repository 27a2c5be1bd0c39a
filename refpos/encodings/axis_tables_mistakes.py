r"""The catalogued mistakes of factorised tables read at per-patch indices, the kind's bound, and an identifier
(docs/axis-tables.md#mistakes).

**Bound.** A correct port may hold the tables in float32 (``u = 2⁻²⁴``) and compute there. Each read is a copy of
a stored row: the storage of the row entry ``a`` and the column entry ``b`` round once each (``u·|a|``, ``u·|b|``),
the one sum once more (``u·|fl(a) + fl(b)| ≤ u(1 + u)(|a| + |b|)``). Per entry

.. math:: |\Delta e| \le (2u + u^2)\,(m_r|a| + m_c|b|)

with the padding weights ``m`` of :func:`refpos.encodings.axis_tables.axis_table_positions` (a padding patch adds
exactly zero). A table already of float32 values has no storage error, and the bound still holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from refpos.encodings.axis_tables import AxisTableVariant, axis_table_positions, variant_of
from refpos.mistake_match import KindMistake, identify_output

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24


@dataclass(frozen=True)
class AxisTableInputs:
    """One call: the indices ``(..., 2)`` in the variant's order, the two tables and the variant."""

    indices: np.ndarray
    row_table: np.ndarray
    column_table: np.ndarray
    variant: AxisTableVariant

    def output(self) -> np.ndarray:
        return np.asarray(axis_table_positions(self.indices, self.row_table, self.column_table, self.variant))

    def bound(self) -> np.ndarray:
        """Per entry: ``(2u + u²)·(m_r|a| + m_c|b|)`` (module docstring)."""
        magnitude = axis_table_positions(self.indices, np.abs(self.row_table), np.abs(self.column_table),
                                         self.variant)
        return (2 * U32 + U32**2) * np.asarray(magnitude)

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        return self.output(), self.bound()


def axis_table_inputs(indices: Any, row_table: Any, column_table: Any, variant: Any) -> AxisTableInputs:
    """The inputs of one call, arrays as NumPy (integer indices, float64 tables)."""
    indices = np.asarray(indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got {indices.dtype}")
    return AxisTableInputs(indices, np.asarray(row_table, dtype=np.float64),
                           np.asarray(column_table, dtype=np.float64), variant_of(variant))


def _computed(inputs: AxisTableInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """The reference of changed inputs (``None`` where they are outside the formula's domain: an index past a
    table, a negative index of a variant without padding)."""
    try:
        return inputs.reference()
    except ValueError:
        return None


def _swapped(inputs: AxisTableInputs) -> tuple[np.ndarray, np.ndarray] | None:
    other = "column" if inputs.variant.first == "row" else "row"
    return _computed(replace(inputs, variant=replace(inputs.variant, first=other)))


def _shifted(step: int) -> Any:
    def compute(inputs: AxisTableInputs) -> tuple[np.ndarray, np.ndarray] | None:
        padding = inputs.indices == -1 if inputs.variant.padding != "none" else np.zeros(inputs.indices.shape, bool)
        shifted = np.where(padding, inputs.indices, np.maximum(inputs.indices + step, 0))
        if np.array_equal(shifted, inputs.indices):
            return None
        return _computed(replace(inputs, indices=shifted))
    return compute


def _padding_read(inputs: AxisTableInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """Padding indices clamped to row 0 and read, nothing zeroed."""
    if inputs.variant.padding == "none" or not np.any(inputs.indices == -1):
        return None
    return _computed(replace(inputs, indices=np.maximum(inputs.indices, 0),
                             variant=replace(inputs.variant, padding="none")))


def _other_padding(inputs: AxisTableInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """Gemma 4's rule (a patch adds nothing where both ids are −1) for Gemma 4 unified's (each id −1 adds nothing
    of its table), or the reverse."""
    other = {"patch": "axis", "axis": "patch"}.get(inputs.variant.padding)
    if other is None or not np.any((inputs.indices == -1).sum(axis=-1) == 1):  # the rules differ at one id −1 only
        return None
    return _computed(replace(inputs, variant=replace(inputs.variant, padding=other)))


def _halves(inputs: AxisTableInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """Each table's first ``D/2`` channels concatenated, ``[E_row[r] | E_col[c]]``, instead of the sum."""
    width = inputs.row_table.shape[1]
    if width % 2:
        return None
    half = width // 2
    zero = np.zeros((inputs.row_table.shape[0], half))
    rows = replace(inputs, row_table=np.concatenate([inputs.row_table[:, :half], zero], axis=1),
                   column_table=np.concatenate([np.zeros((inputs.column_table.shape[0], half)),
                                                inputs.column_table[:, :half]], axis=1))
    return _computed(rows)


def _one_table(inputs: AxisTableInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """The row table alone: the column table's rows never added."""
    return _computed(replace(inputs, column_table=np.zeros_like(inputs.column_table)))


AXIS_TABLES_MISTAKES: tuple[KindMistake, ...] = (
    KindMistake("axes_swapped", "row and column swapped: the first index read in the other table", _swapped),
    KindMistake("index_minus_one", "each index one too small (a row numbered from 1 read from 0; row 0 read at 0)",
                _shifted(-1)),
    KindMistake("index_plus_one", "each index one too large", _shifted(1)),
    KindMistake("padding_read", "padding patches (−1) read at row 0 of both tables instead of adding nothing",
                _padding_read),
    KindMistake("padding_rule_swapped", "Gemma 4's padding rule for Gemma 4 unified's or the reverse: a patch with "
                "one id −1 adding nothing, or its other table's row", _other_padding),
    KindMistake("tables_concatenated", "each table's first D/2 channels concatenated instead of the two rows "
                "summed", _halves),
    KindMistake("column_table_missing", "the row table alone: the column table's rows never added", _one_table),
)


def identify_axis_tables(candidate: Any, inputs: AxisTableInputs) -> str | None:
    """The catalogued mistake ``candidate`` matches, or ``None`` (a correct port, or an output no mistake explains)."""
    return identify_output(candidate, inputs.reference(), AXIS_TABLES_MISTAKES, inputs)


__all__ = ["AXIS_TABLES_MISTAKES", "U32", "AxisTableInputs", "axis_table_inputs", "identify_axis_tables"]
