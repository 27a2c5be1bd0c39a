"""The reference adapter's box positions (docs/box-tables.md; the contract of ``spec_tests/README.md``).

NumPy in and out: the kind's formula (:mod:`refpos.encodings.box_tables`) is table rows read at each token's box
and summed, in NumPy float64. :mod:`refpos.testing.adapter` re-exports it; ``spec_tests/test_box_tables.py`` is its
spec.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.box_tables_mistakes import box_inputs
from refpos.testing.adapter_arrays import to_host


def box_positions(x_table: np.ndarray, y_table: np.ndarray, h_table: np.ndarray, w_table: np.ndarray,
                  bbox: np.ndarray) -> np.ndarray:
    """What each token gains from its box ``(x0, y0, x1, y1)``, ``(..., D)``:
    ``X[x0] + Y[y0] + X[x1] + Y[y1] + H[y1 − y0] + W[x1 − x0]``. A coordinate, height or width outside its table
    (a negative extent too), tables of different widths: ValueError naming the parameter; non-integer boxes:
    TypeError naming ``bbox``."""
    arrays = [to_host(t) for t in (x_table, y_table, h_table, w_table)]
    return box_inputs(*arrays, to_host(bbox)).output()
