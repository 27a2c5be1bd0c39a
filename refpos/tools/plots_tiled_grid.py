"""The figure of a tiled image's gated grid (docs/tiled-grid.md), registered by :mod:`refpos.tools.plots`.

``tiled-grid``: channel 0 of what the patches of an image cut into 2 × 2 tiles of 4 × 4 patches gain,
(1 − tanh g)·E + tanh g·G[a], drawn as the image they lie in, at the gate g = 0, 0.5 and 3 (seeded tables).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.tools.figures import heat_panels

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
TILED_GRID_PLOT = (
    "tiled-grid", "channel 0 of the gated grid over an image of 2x2 tiles of 4x4 patches, gate 0, 0.5 and 3",
    "At gate 0 every tile gains the same patch grid, so the image repeats it four times; as tanh g grows, each tile's "
    "own grid for the image's aspect ratio takes over and the tiles differ.", (10.5, 3.4))


def plot_tiled_grid(fig: Any) -> None:
    from refpos.encodings.tiled_grid import gated_tile_grid

    rng = np.random.default_rng(0)
    side, tiles = 4, 4
    grid = rng.standard_normal((side * side + 1, 1)).cumsum(axis=0) / 4  # the class row, then 16 patches
    table = rng.standard_normal((3, tiles * (side * side + 1)))
    panels = []
    for gate in (0.0, 0.5, 3.0):
        rows = gated_tile_grid(grid, table, gate, 1, tiles)[:, 1:, 0].reshape(2, 2, side, side)
        panels.append((rows.transpose(0, 2, 1, 3).reshape(2 * side, 2 * side), f"gate g = {gate:g}"))
    heat_panels(fig, panels, xlabel="patch column", ylabel="patch row")
    for ax in fig.axes[::2]:  # the panels (each followed by its colour bar): the tiles' edges
        ax.axhline(side - 0.5, color="k", linewidth=1)
        ax.axvline(side - 0.5, color="k", linewidth=1)


#: the plots this module draws, as :mod:`refpos.tools.plots` registers them
DRAWN = ((TILED_GRID_PLOT, plot_tiled_grid),)
