"""The figure of SAM's random Fourier features (docs/fourier.md), registered by :mod:`refpos.tools.plots`.

``fourier-sam``: two channels of SAM's dense embedding of a 64 × 64 grid with a seeded Gaussian matrix: each
channel is a plane wave whose direction and spacing are one column of ``G``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
FOURIER_PLOT = ("fourier-sam", "two channels of SAM's dense Fourier embedding of a 64x64 grid (a seeded Gaussian G)",
        "Each channel is a plane wave across the image: its direction and wavelength are a column of G, so a "
        "larger entry gives a finer stripe.", (8.4, 3.4))


def plot_fourier_sam(fig: Any) -> None:
    from refpos.encodings.fourier import fourier_features, grid_centre_coordinates

    gaussian = np.random.default_rng(0).standard_normal((2, 8))  # SAM: scale · randn(2, m), scale 1
    features = to_numpy(fourier_features(grid_centre_coordinates(64, 64, xp=np), gaussian))  # (64, 64, 16)
    for panel, j in enumerate((0, 3)):
        ax = fig.add_subplot(1, 2, panel + 1)
        image = ax.imshow(features[:, :, j], cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
        ax.set_xlabel("grid column")
        ax.set_ylabel("grid row")
        g_x, g_y = gaussian[:, j]
        ax.set_title(rf"$\sin\varphi_{j}$, $G_{{\cdot {j}}} = ({g_x:.2f}, {g_y:.2f})$")
        fig.colorbar(image, ax=ax, fraction=0.046)
