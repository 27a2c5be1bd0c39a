"""The figure of convolutional positional embeddings (docs/conv-position.md), registered by
:mod:`refpos.tools.plots`.

``conv-position``: which input frames each output frame reads for an even and an odd kernel (the even one's
extra frame trimmed at the end), and the frames and channels one input impulse reaches in a grouped convolution.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
CONV_POSITION_PLOT = (
    "conv-position", "the frames each output frame reads (K = 4 and K = 5), and one impulse through 4 groups",
    "An even kernel reads ⌊K/2⌋ frames back and one fewer ahead (its extra frame is trimmed at the end); a "
    "grouped convolution keeps an impulse inside its group of channels, over the K frames around it.",
    (10.2, 3.4))


def _reads(frames: int, kernel: int) -> np.ndarray:
    """``reads[t, f]``: output frame t reads input frame f (from the embedding's response to each impulse)."""
    from refpos.encodings.conv_position import conv_position_embedding

    reads = np.zeros((frames, frames))
    weight = np.ones((1, 1, kernel))
    for f in range(frames):
        x = np.zeros((1, frames, 1))
        x[0, f, 0] = 1.0
        reads[:, f] = to_numpy(conv_position_embedding(x, weight, None, groups=1, activation="linear"))[0, :, 0]
    return reads


def plot_conv_position(fig: Any) -> None:
    from refpos.encodings.conv_position import conv_position_embedding

    for panel, kernel in enumerate((4, 5)):
        ax = fig.add_subplot(1, 3, panel + 1)
        ax.imshow(_reads(12, kernel), cmap="Greys", vmin=0, vmax=1.6, interpolation="nearest")
        ax.set_xlabel("input frame")
        ax.set_ylabel("output frame t")
        ax.set_title(f"K = {kernel}: frames t−{kernel // 2} … t+{kernel - 1 - kernel // 2}")
    ax = fig.add_subplot(1, 3, 3)
    rng = np.random.default_rng(4)
    x = np.zeros((1, 16, 16))
    x[0, 8, 5] = 1.0  # channel 5: the second of 4 groups of 4
    e = to_numpy(conv_position_embedding(x, rng.uniform(0.2, 1.0, (16, 4, 5)), None, groups=4, activation="gelu"))[0]
    image = ax.imshow(e.T, cmap="viridis", interpolation="nearest", aspect="auto")
    ax.set_xlabel("output frame")
    ax.set_ylabel("output channel")
    ax.set_title("impulse at frame 8, channel 5 (G = 4)")
    fig.colorbar(image, ax=ax, fraction=0.046)
