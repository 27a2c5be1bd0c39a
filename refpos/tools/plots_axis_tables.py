"""The figure of factorised tables read at per-patch indices (docs/axis-tables.md), registered by
:mod:`refpos.tools.plots`.

``axis-tables``: channel 0 of what each patch of a 6 × 8 grid adds in Pix2Struct's variant (row and column
numbered from 1, a seeded row table and column table), and the same grid packed as Gemma 4's (x, y) ids with two
rows of padding patches (−1, −1), which add nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.tools.figures import heat_panels

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
AXIS_TABLES_PLOT = (
    "axis-tables", "channel 0 of E_row[r] + E_col[c] over a 6x8 patch grid: Pix2Struct's (from 1) and Gemma 4's with "
    "padding patches", "Every row of the grid adds the same row-table entry and every column the same column-table "
    "entry, so the map is a sum of a row profile and a column profile; Gemma 4's padding patches (the last two "
    "rows, ids −1) add exactly zero.", (8.4, 3.4))


def plot_axis_tables(fig: Any) -> None:
    from refpos.encodings.axis_tables import axis_table_positions

    rng = np.random.default_rng(0)
    rows, cols = rng.standard_normal((16, 4)), rng.standard_normal((16, 4))
    r, c = np.meshgrid(np.arange(6), np.arange(8), indexing="ij")
    pix2struct = np.stack([r.ravel() + 1, c.ravel() + 1], axis=1)  # (row, column) from 1
    gemma = np.stack([c.ravel(), r.ravel()], axis=1)  # (x, y) from 0
    gemma[-16:] = -1  # the last two rows of patches are padding
    panels = [(to_numpy(axis_table_positions(pix2struct, rows, cols, "pix2struct"))[:, 0],
               "Pix2Struct: (row, column) from 1"),
              (to_numpy(axis_table_positions(gemma, rows, cols, "gemma4"))[:, 0],
               "Gemma 4: (x, y), last 16 patches padding")]
    heat_panels(fig, [(values.reshape(6, 8), title) for values, title in panels], xlabel="patch column",
                ylabel="patch row")
