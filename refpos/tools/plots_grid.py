"""The figure of resampled position grids (docs/grid.md), registered by :mod:`refpos.tools.plots`.

``grid-resample``: one channel of a 14 × 14 position grid, resampled bicubic to 37 × 28 (a 518 × 392 image at
patch 14, DINOv2's size), the difference from resampling it bilinear, and the weights one output row of a
14 → 5 shrink gives the source rows with and without antialias.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
GRID_PLOT = ("grid-resample", "a 14 × 14 position grid resampled bicubic to 37 × 28, bicubic − bilinear, and the "
             "weights of shrinking 14 → 5 with and without antialias",
        "Bicubic and bilinear differ by up to 0.1 on a grid spanning 2.3; shrinking 14 → 5 with antialias, an output "
        "row reads up to 12 source rows (the filter widened 2.8 times) where plain bicubic reads 4.", (10.0, 3.1))


def source_grid(side: int = 14) -> np.ndarray:
    """A smooth channel like a learned position embedding's: two waves across the grid, ``(side, side)``."""
    y, x = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    return np.sin(2 * np.pi * y / 12.0) * np.cos(2 * np.pi * x / 16.0) + 0.3 * np.sin(2 * np.pi * (x + y) / 9.0)


def plot_grid_resample(fig: Any) -> None:
    from refpos.encodings.resample import interpolate, resample_matrix

    grid = source_grid()
    bicubic = to_numpy(interpolate(grid, (37, 28), mode="bicubic"))
    bilinear = to_numpy(interpolate(grid, (37, 28), mode="bilinear"))
    panels = [(grid, "a 14 × 14 grid (one channel)", "RdBu_r", (-1.4, 1.4)),
              (bicubic, "bicubic to 37 × 28", "RdBu_r", (-1.4, 1.4)),
              (bicubic - bilinear, "bicubic − bilinear", "PuOr", (-0.1, 0.1))]
    for k, (values, title, cmap, (low, high)) in enumerate(panels):
        ax = fig.add_subplot(1, 4, k + 1)
        image = ax.imshow(values, cmap=cmap, vmin=low, vmax=high, interpolation="nearest")
        ax.set_title(title)
        ax.set_xlabel("column w")
        ax.set_ylabel("row h")
        fig.colorbar(image, ax=ax, fraction=0.05)
    ax = fig.add_subplot(1, 4, 4)
    rows = np.arange(14)
    for antialias, style in ((False, "o-"), (True, "s--")):
        weights = to_numpy(resample_matrix(14, 5, mode="bicubic", antialias=antialias, xp=np))[2]
        ax.plot(rows, weights, style, markersize=3, label="antialias" if antialias else "no antialias")
    ax.axhline(0.0, color="grey", lw=0.6)
    ax.set_ylim(-0.15, 0.95)
    ax.set_xlabel("source row j")
    ax.set_ylabel("weight of output row 2")
    ax.set_title("shrinking 14 → 5")
    ax.legend(loc="upper right", frameon=False)
