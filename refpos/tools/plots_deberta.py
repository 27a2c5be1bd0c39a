"""The figure of DeBERTa's relative positions (docs/deberta.md), registered by :mod:`refpos.tools.plots`.

``deberta-buckets``: DeBERTa-v3's log buckets (256 buckets, max_relative_positions 512) against the
relative position, and the row of the position table each (query, key) pair of a 1024-token sequence reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy

#: DeBERTa-v3's config (microsoft/deberta-v3-base: position_buckets 256, max_relative_positions -1 → 512)
V3 = {"position_buckets": 256, "max_relative_positions": 512}

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
PLOT = ("deberta-buckets", "DeBERTa-v3 log buckets (256 buckets, m = 512), the row each pair of 1024 tokens reads",
        "Distances up to 128 keep a row each, farther ones share logarithmic buckets up to 511; past keys from 511 "
        "on read the last row, future keys from 512 on the first.", (8.4, 3.3))


def plot_deberta_buckets(fig: Any) -> None:
    from refpos.encodings.deberta import deberta_log_buckets, deberta_relative_index

    span = V3["position_buckets"]
    ax = fig.add_subplot(1, 2, 1)
    delta = np.arange(-1200, 1201)
    buckets = to_numpy(deberta_log_buckets(delta, **V3))
    ax.plot(delta, buckets, lw=1.2, label="bucket b(δ)")
    ax.plot(delta, np.clip(buckets, -span, span - 1), lw=1.2, ls="--", label="row − 256 (clipped)")
    ax.axvspan(-128, 128, color="grey", alpha=0.15, lw=0)
    ax.set_xlabel("δ = query − key")
    ax.set_ylabel("bucket")
    ax.set_title("log buckets (exact within ±128, shaded)")
    ax.legend(loc="upper left", frameon=False)
    ax = fig.add_subplot(1, 2, 2)
    positions = np.arange(1024)
    index = to_numpy(deberta_relative_index(positions, positions, **V3))  # (T, T) in [0, 512)
    image = ax.imshow(index, cmap="viridis", vmin=0, vmax=2 * span - 1, interpolation="nearest")
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
    ax.set_title(r"row idx(i, j) of $K_r$ and $Q_r$")
    fig.colorbar(image, ax=ax, fraction=0.046, label="row of the position table")
