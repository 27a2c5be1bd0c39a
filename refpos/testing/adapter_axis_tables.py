"""The reference adapter's factorised tables read at per-patch indices (docs/axis-tables.md; the contract of
``spec_tests/README.md``).

NumPy in and out, the current backend inside. :mod:`refpos.testing.adapter` re-exports it;
``spec_tests/test_axis_tables.py`` is its spec.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings import axis_tables
from refpos.testing.adapter_arrays import to_backend, to_host


def axis_table_positions(indices: np.ndarray, row_table: np.ndarray, column_table: np.ndarray,
                         variant: str) -> np.ndarray:
    """What each patch adds, ``(..., D)``: ``m_r·E_row[r] + m_c·E_col[c]`` at its two integer indices ``(..., 2)``
    in the variant's order (``"pix2struct"``: (row, column), every index a table row; ``"gemma4"``: (x, y), a patch
    whose ids are both −1 adding zero; ``"gemma4_unified"``: (x, y), each id −1 adding nothing of its table; other
    negative ids read row 0). An index past its table, float indices, tables of different widths: ValueError /
    TypeError naming the parameter."""
    return to_host(axis_tables.axis_table_positions(to_backend(indices), to_backend(row_table, np.float64),
                                                    to_backend(column_table, np.float64), variant))
