"""The figure of the fixed 2-D sin–cos embeddings (docs/sincos2d.md), registered by :mod:`refpos.tools.plots`.

``sincos2d-detr``: MAE's table of an 8 × 8 grid (dim 32, columns first, the CLS row of zeros on top) and one
channel of DETR's embedding of an image padded on the right: the valid pixels span the whole angle range, the
padding repeats the last column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
SINCOS2D_PLOT = (
    "sincos2d-detr", "MAE's 2-D sin-cos table (8x8 grid, dim 32) and one channel of DETR's embedding of a padded "
    "image", "MAE's rows repeat the column pattern in the first half and step once per row in the second; DETR's "
    "valid pixels cover a whole turn of the sine and the padding keeps the last column's value.", (8.4, 3.4))


def plot_sincos2d(fig: Any) -> None:
    from refpos.encodings.sincos2d_variants import SINE_VARIANTS

    ax = fig.add_subplot(1, 2, 1)
    table = to_numpy(SINE_VARIANTS["mae"].build(height=8, width=8, dim=32, xp=np))  # (65, 32)
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
    ax.axvline(15.5, color="black", lw=0.8)
    ax.set_xlabel("channel: [sin x | cos x | sin y | cos y]")
    ax.set_ylabel("row: CLS, then token t = 8y + x")
    ax.set_title("MAE, 8 × 8 grid, dim 32")
    fig.colorbar(image, ax=ax, fraction=0.05)

    ax = fig.add_subplot(1, 2, 2)
    mask = np.zeros((1, 12, 16), dtype=bool)
    mask[0, :, :11] = True  # an image 11 pixels wide in a batch 16 wide
    embedding = to_numpy(SINE_VARIANTS["detr"].build(mask=mask, num_features=16))  # (1, 12, 16, 32)
    channel = embedding[0, :, :, 16]  # the x block's first sine: sin(x) with x in (0, 2π]
    image = ax.imshow(channel, cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
    ax.axvline(10.5, color="black", lw=0.8, ls="--")
    ax.set_xlabel("pixel column (padding right of the dashes)")
    ax.set_ylabel("pixel row")
    ax.set_title(r"DETR: $\sin(2\pi\, x/x_{last})$")
    fig.colorbar(image, ax=ax, fraction=0.046)
