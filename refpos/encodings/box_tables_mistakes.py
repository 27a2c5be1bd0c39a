r"""The bound of a float32 port of a token's box positions, and the mistakes a port can make
(docs/box-tables.md#mistakes).

**Bound.** A port holds the four tables in float32 (``u = 2⁻²⁴``); the rows given are those float32 values, so a
row read is exact and only the five additions of the six rows round. Summed one after another, the sum's error is
at most :math:`\gamma_5 \sum_i |a_i|` (:math:`\gamma_5 = 5u/(1 - 5u)`), per entry

.. math:: |\Delta e| \le 5u\,(|X[x_0]| + |Y[y_0]| + |X[x_1]| + |Y[y_1]| + |H[h]| + |W[w]|)\,(1 + 6u)

whatever the order of the additions. A mistake is a port reading other rows (:data:`MISTAKE_READS`): its output
is the same sum of other rows, matched within the same bound of its own terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from refpos.encodings.box_tables import box_positions, box_reads, boxes, check_tables, summed_rows
from refpos.mistake_match import KindMistake, identify_output

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24

Reads = dict[str, tuple[np.ndarray, ...]]


def _corners(b: np.ndarray) -> tuple[np.ndarray, ...]:
    return tuple(b[..., i] for i in range(4))


def _axes_swapped(b: np.ndarray) -> Reads:
    x0, y0, x1, y1 = _corners(b)
    return {"x": (y0, y1), "y": (x0, x1), "h": (y1 - y0,), "w": (x1 - x0,)}


def _x1_from_y_table(b: np.ndarray) -> Reads:
    x0, y0, x1, y1 = _corners(b)
    return {"x": (x0,), "y": (y0, x1, y1), "h": (y1 - y0,), "w": (x1 - x0,)}


def _height_width_missing(b: np.ndarray) -> Reads:
    x0, y0, x1, y1 = _corners(b)
    return {"x": (x0, x1), "y": (y0, y1)}


def _height_width_swapped(b: np.ndarray) -> Reads:
    x0, y0, x1, y1 = _corners(b)
    return {"x": (x0, x1), "y": (y0, y1), "h": (x1 - x0,), "w": (y1 - y0,)}


def _box_read_xxyy(b: np.ndarray) -> Reads:
    x0, x1, y0, y1 = _corners(b)  # the box read as (x0, x1, y0, y1)
    return {"x": (x0, x1), "y": (y0, y1), "h": (y1 - y0,), "w": (x1 - x0,)}


def _extent_plus_one(b: np.ndarray) -> Reads:
    x0, y0, x1, y1 = _corners(b)
    return {"x": (x0, x1), "y": (y0, y1), "h": (y1 - y0 + 1,), "w": (x1 - x0 + 1,)}


def _top_left_only(b: np.ndarray) -> Reads:
    x0, y0, x1, y1 = _corners(b)
    return {"x": (x0,), "y": (y0,), "h": (y1 - y0,), "w": (x1 - x0,)}


#: mistake -> (what the port did, the rows it reads at a box array ``(..., 4)``)
MISTAKE_READS: dict[str, tuple[str, Callable[[np.ndarray], Reads]]] = {
    "axes_swapped": ("x and y swapped: the X table read at y0 and y1, the Y table at x0 and x1", _axes_swapped),
    "x1_from_y_table": ("x1 read from the Y table: X[x0] + Y[y0] + Y[x1] + Y[y1] + H + W", _x1_from_y_table),
    "height_width_missing": ("the height and width tables left out: X[x0] + Y[y0] + X[x1] + Y[y1]",
                             _height_width_missing),
    "height_width_swapped": ("the H table read at the width x1 − x0 and the W table at the height y1 − y0",
                             _height_width_swapped),
    "box_read_xxyy": ("the box read as (x0, x1, y0, y1) instead of (x0, y0, x1, y1)", _box_read_xxyy),
    "extent_plus_one": ("the height and width counted inclusively: H[y1 − y0 + 1], W[x1 − x0 + 1]",
                        _extent_plus_one),
    "top_left_only": ("one corner only: X[x0] + Y[y0] + H + W, the bottom-right corner x1, y1 never read",
                      _top_left_only),
}


def reads_fit(reads: Reads, rows: dict[str, int]) -> bool:
    """Whether every index of ``reads`` is a row of its table."""
    return all(index.size == 0 or (index.min() >= 0 and index.max() < rows[t])
               for t, indices in reads.items() for index in indices)


def terms_bound(tables: dict[str, np.ndarray], reads: Reads) -> np.ndarray:
    """Per entry: ``5u·Σ|rows|·(1 + 6u)``, the bound of a float32 port summing the rows ``reads`` names."""
    magnitude = summed_rows({t: np.abs(v) for t, v in tables.items()}, reads)
    # 5u·Σ|a_i|·(1 + 6u)
    return 5 * U32 * magnitude * (1 + 6 * U32)


@dataclass(frozen=True)
class BoxInputs:
    """One call: the four tables (float64, checked) and the boxes ``(..., 4)``."""

    tables: dict[str, np.ndarray]
    bbox: np.ndarray

    @property
    def rows(self) -> dict[str, int]:
        return {name: table.shape[0] for name, table in self.tables.items()}

    def output(self) -> np.ndarray:
        return box_positions(*(self.tables[t] for t in ("x", "y", "h", "w")), self.bbox)

    def bound(self) -> np.ndarray:
        """Per entry: :func:`terms_bound` of the right rows (module docstring)."""
        return terms_bound(self.tables, box_reads(self.bbox, self.rows))

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        return self.output(), self.bound()

    @cached_property
    def wrong_outputs(self) -> dict[str, tuple[np.ndarray, np.ndarray] | None]:
        """Each mistake's output and bound at these inputs (``None`` where it reads past a table)."""
        out: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
        for name, (_, reads_of) in MISTAKE_READS.items():
            reads = reads_of(self.bbox)
            out[name] = ((summed_rows(self.tables, reads), terms_bound(self.tables, reads))
                         if reads_fit(reads, self.rows) else None)
        return out


def box_inputs(x_table: Any, y_table: Any, h_table: Any, w_table: Any, bbox: Any) -> BoxInputs:
    """The inputs of one call, checked (a ``ValueError``/``TypeError`` naming the parameter)."""
    inputs = BoxInputs(check_tables(x_table, y_table, h_table, w_table), boxes(bbox))
    inputs.output()  # every box checked against its tables, by name
    return inputs


def _mistake(name: str) -> Callable[[BoxInputs], tuple[np.ndarray, np.ndarray] | None]:
    def compute(inputs: BoxInputs) -> tuple[np.ndarray, np.ndarray] | None:
        return inputs.wrong_outputs[name]
    return compute


#: the mistakes :func:`identify_box_tables` names
BOX_TABLES_MISTAKES: tuple[KindMistake, ...] = tuple(KindMistake(name, text, _mistake(name))
                                                     for name, (text, _) in MISTAKE_READS.items())


def identify_box_tables(candidate: Any, inputs: BoxInputs) -> str | None:
    """The catalogued mistake ``candidate`` matches, or ``None`` (a correct port, or an output no mistake explains)."""
    return identify_output(candidate, inputs.reference(), BOX_TABLES_MISTAKES, inputs)


__all__ = ["BOX_TABLES_MISTAKES", "MISTAKE_READS", "U32", "BoxInputs", "box_inputs", "identify_box_tables",
           "reads_fit", "terms_bound"]
