"""The figures of a document token's positions (docs/box-tables.md, docs/layout-bias.md), registered by
:mod:`refpos.tools.plots`.

``box-tables``: channel 0 of what a word gains from its box, X[x0] + Y[y0] + X[x1] + Y[y1] + H[y1 − y0] +
W[x1 − x0], for a word of 60 × 20 units moved over every place of a 1000 × 1000 page (seeded tables of 1024 rows).
``layout-bias``: head 0 of LayoutLMv3's bias between twelve words laid out in three lines of four, the 1-D part
alone and with the x and y parts (seeded tables over T5's buckets).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.tools.figures import heat_panels

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers each plot under
BOX_TABLES_PLOT = (
    "box-tables", "channel 0 of the six box tables' sum for a 60x20 word moved over a 1000x1000 page (seeded tables)",
    "The map is a sum of an x profile and a y profile (the word's size is fixed, so H and W add one constant): "
    "moving the word right changes only the X reads, moving it down only the Y reads.", (5.0, 4.2))
LAYOUT_BIAS_PLOT = (
    "layout-bias", "head 0 of LayoutLMv3's bias between 12 words in 3 lines of 4: the 1-D part, then with x and y",
    "The 1-D part depends only on the words' distance in the text (constant along each diagonal); the x and y parts "
    "add what the boxes say: words of one line share their y bucket, words of one column their x bucket.", (9.0, 3.8))


def plot_box_tables(fig: Any) -> None:
    from refpos.encodings.box_tables import box_positions

    rng = np.random.default_rng(0)
    x, y, h, w = (rng.standard_normal((1024, 4)).cumsum(axis=0) / 8 for _ in range(4))
    places = np.arange(0, 940, 20)
    x0, y0 = np.meshgrid(places, places, indexing="xy")
    bbox = np.stack([x0, y0, x0 + 60, y0 + 20], axis=-1)
    values = box_positions(x, y, h, w, bbox)[..., 0]
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(values, cmap="RdBu_r", origin="upper", extent=(0, 940, 940, 0), interpolation="nearest")
    ax.set_xlabel("the word's x0 (page units)")
    ax.set_ylabel("the word's y0 (page units)")
    ax.set_title("channel 0 of the box rows' sum")
    fig.colorbar(image, ax=ax, fraction=0.046)


def plot_layout_bias(fig: Any) -> None:
    from refpos.encodings.layout_bias import layout_bias

    rng = np.random.default_rng(0)
    rel, xs, ys = rng.standard_normal((32, 1)), rng.standard_normal((64, 1)), rng.standard_normal((64, 1))
    line, column = np.divmod(np.arange(12), 4)
    bbox = np.stack([column * 200, line * 60, column * 200 + 150, line * 60 + 40], axis=-1)
    panels = [(layout_bias(rel, None, None, np.arange(12), head_dim=64)[0], "the 1-D part alone"),
              (layout_bias(rel, xs, ys, np.arange(12), bbox, head_dim=64)[0], "with the x and y parts")]
    heat_panels(fig, panels, xlabel="key word", ylabel="query word")


#: the plots this module draws, as :mod:`refpos.tools.plots` registers them
DRAWN = ((BOX_TABLES_PLOT, plot_box_tables), (LAYOUT_BIAS_PLOT, plot_layout_bias))
