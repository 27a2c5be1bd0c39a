"""``refpos check box_tables``: a token's box positions from a call of ``box_positions`` (the x, y, height and width
tables, the boxes), against :mod:`refpos.encodings.box_tables` within the bound of a float32 port per entry
(:meth:`refpos.encodings.box_tables_mistakes.BoxInputs.bound`), the mistake named by
:func:`~refpos.encodings.box_tables_mistakes.identify_box_tables` (docs/box-tables.md#mistakes).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.encodings.box_tables_mistakes import BOX_TABLES_MISTAKES, BoxInputs, box_inputs, identify_box_tables


def box_positions(x_table: Any, y_table: Any, h_table: Any, w_table: Any, bbox: Any) -> BoxInputs:
    """The inputs of a ``box_positions`` call: what each token gains from its box, ``(..., D)``."""
    return box_inputs(x_table, y_table, h_table, w_table, bbox)


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """LayoutLM's layout at a small size: four tables of 40 rows and 5 channels of float32 values, six boxes whose
    corners, heights and widths all differ (every mistake moves a row), then the same tables at a page-wide box."""
    rng = np.random.default_rng(31)
    tables = {f"{t}_table": rng.standard_normal((40, 5)).astype(np.float32).astype(np.float64) for t in "xyhw"}
    boxes = np.array([[1, 3, 9, 20], [4, 2, 30, 6], [7, 11, 12, 37], [0, 5, 21, 8], [15, 16, 33, 28],
                      [2, 9, 6, 30]])
    ordered = np.array([[1, 3, 9, 20], [2, 9, 6, 30], [0, 5, 21, 28]])  # x0 ≤ y0, x1 ≤ y1: box_read_xxyy fits
    return [("box_positions", {**tables, "bbox": boxes[None]}), ("box_positions", {**tables, "bbox": ordered})]


BOX_TABLES_CHECK = KindCheck(
    kind="box_tables", calls=(box_positions,), reference=BoxInputs.reference, identify=identify_box_tables,
    mistakes={m.name: m.description for m in BOX_TABLES_MISTAKES}, wrong=partial(mistake_output, BOX_TABLES_MISTAKES),
    examples=_examples)

__all__ = ["BOX_TABLES_CHECK", "box_positions"]
