"""``refpos check axis_tables``: factorised learned positions from a call of ``axis_table_positions`` (each patch's
two indices, the row table, the column table, the variant), against :mod:`refpos.encodings.axis_tables` within the
bound of a float32 port per entry (:meth:`refpos.encodings.axis_tables_mistakes.AxisTableInputs.bound`), the
mistake named by :func:`~refpos.encodings.axis_tables_mistakes.identify_axis_tables` (docs/axis-tables.md#mistakes).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.encodings.axis_tables_mistakes import (
    AXIS_TABLES_MISTAKES,
    AxisTableInputs,
    axis_table_inputs,
    identify_axis_tables,
)


def axis_table_positions(indices: Any, row_table: Any, column_table: Any, variant: str) -> AxisTableInputs:
    """The inputs of an ``axis_table_positions`` call (integer indices ``(..., 2)``)."""
    return axis_table_inputs(indices, row_table, column_table, variant)


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """Pix2Struct's 3 × 5 grid numbered from 1 with a padding patch of zeros, and Gemma 4's and Gemma 4 unified's
    (x, y) ids of a 3 × 4 grid with a patch of one id −1 and a padding patch, tables of float32 values."""
    rng = np.random.default_rng(11)
    rows, cols = (rng.standard_normal((8, 6)).astype(np.float32).astype(np.float64) for _ in range(2))
    r, c = np.meshgrid(np.arange(1, 4), np.arange(1, 6), indexing="ij")
    pix2struct = np.concatenate([np.stack([r.ravel(), c.ravel()], axis=1), [[0, 0]]])
    gemma = np.array([[x, y] for y in range(3) for x in range(4)] + [[-1, 5], [-1, -1]])
    return [("axis_table_positions", {"indices": pix2struct, "row_table": rows, "column_table": cols,
                                      "variant": "pix2struct"}),
            *[("axis_table_positions", {"indices": gemma, "row_table": rows, "column_table": cols,
                                        "variant": variant}) for variant in ("gemma4", "gemma4_unified")]]


AXIS_TABLES_CHECK = KindCheck(
    kind="axis_tables", calls=(axis_table_positions,), reference=AxisTableInputs.reference,
    identify=identify_axis_tables, mistakes={m.name: m.description for m in AXIS_TABLES_MISTAKES},
    wrong=partial(mistake_output, AXIS_TABLES_MISTAKES), examples=_examples)

__all__ = ["AXIS_TABLES_CHECK", "axis_table_positions"]
