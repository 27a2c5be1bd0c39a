"""The figure of relative position bias tables (docs/bias-table.md), registered by :mod:`refpos.tools.plots`.

``bias-table``: Swin's row index over a 7 × 7 window, one head of a Swin v2 continuous bias as a function of the
offset, and a BEiT bias of a 3 × 3 window with its CLS row and column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import get_xp, to_numpy

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
BIAS_TABLE_PLOT = (
    "bias-table", "Swin's row index (7×7 window), a Swin v2 bias over the offsets, a BEiT bias with CLS",
    "Pairs of one offset share a row, so the index repeats in 7×7 blocks; Swin v2's bias is a smooth function "
    "of the log-spaced offset between 0 and 16; BEiT's CLS token has a row, a column and a corner of its own.",
    (10.2, 3.4))


def plot_bias_table(fig: Any) -> None:
    from refpos.encodings.bias_table import beit_bias, swinv2_log_coords, swinv2_table
    from refpos.encodings.bias_table_index import swin_relative_index

    numpy = get_xp("numpy")
    ax = fig.add_subplot(1, 3, 1)
    image = ax.imshow(to_numpy(swin_relative_index(7, xp=numpy)), cmap="viridis", interpolation="nearest")
    ax.set_xlabel("key b")
    ax.set_ylabel("query a")
    ax.set_title("Swin: row (Δh+6)·13 + (Δw+6)")
    fig.colorbar(image, ax=ax, fraction=0.046)

    ax = fig.add_subplot(1, 3, 2)
    rng = np.random.default_rng(2)
    w1, b1, w2 = rng.standard_normal((2, 64)), rng.standard_normal(64), rng.standard_normal((64, 1)) / 4
    coords = to_numpy(swinv2_log_coords(7, pretrained_window=None, xp=numpy))  # (13, 13, 2)
    z = to_numpy(swinv2_table(coords, w1, b1, w2))[..., 0]
    image = ax.imshow(16 / (1 + np.exp(-z)), cmap="magma", vmin=0, vmax=16, extent=(-6.5, 6.5, 6.5, -6.5))
    ax.set_xlabel("Δw")
    ax.set_ylabel("Δh")
    ax.set_title("Swin v2: 16·σ(MLP(c(Δ))), one head")
    fig.colorbar(image, ax=ax, fraction=0.046)

    ax = fig.add_subplot(1, 3, 3)
    table = np.concatenate([np.linspace(-1, 1, 25), [2.5, -2.5, 4.0]])[:, None]
    bias = to_numpy(beit_bias(table, 3, table_window=3))[0]
    image = ax.imshow(bias, cmap="coolwarm", vmin=-4, vmax=4, interpolation="nearest")
    ax.set_xticks([0, 1, 5, 9], ["CLS", "1", "5", "9"])
    ax.set_yticks([0, 1, 5, 9], ["CLS", "1", "5", "9"])
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title("BEiT (3×3): CLS→patch, patch→CLS, CLS→CLS")
    fig.colorbar(image, ax=ax, fraction=0.046)
