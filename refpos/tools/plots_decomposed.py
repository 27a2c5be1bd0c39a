"""The figure of decomposed relative positions (docs/decomposed.md), registered by :mod:`refpos.tools.plots`.

``decomposed-index``: the row of the resampled table each (query, key) pair of one axis reads, for equal grids
(14 and 14) and for queries on a grid twice as fine as the keys' (14 and 7).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
DECOMPOSED_PLOT = ("decomposed-index",
                   "the row of the resampled table each (query, key) pair reads: grids 14 and 14, 14 and 7",
        "With equal grids the row is the offset i − j + 13; with keys on a grid half as fine, each key step "
        "counts two rows, and the pairs read rows 0 to 25 of the 27.", (7.6, 3.3))


def plot_decomposed_index(fig: Any) -> None:
    from refpos.encodings.decomposed import decomposed_rel_pos_index

    for k, (q, keys) in enumerate(((14, 14), (14, 7))):
        index = to_numpy(decomposed_rel_pos_index(q, keys, xp=np))
        ax = fig.add_subplot(1, 2, k + 1)
        image = ax.imshow(index, cmap="viridis", vmin=0, vmax=2 * max(q, keys) - 2, interpolation="nearest",
                          aspect="auto")
        ax.set_title(f"{q} queries, {keys} keys")
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
        ax.set_xticks(range(0, keys, 2 if keys < 10 else 4))
        fig.colorbar(image, ax=ax, fraction=0.05, label="row of the table")
