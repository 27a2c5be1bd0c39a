"""The figure of the 1-D audio sinusoids (docs/sinusoid1d.md), registered by :mod:`refpos.tools.plots`.

``sinusoid1d-audio``: the relative table of the ESPnet conformers (distances 31 … −31, dim 32) and the
frequencies of Whisper's increment over ``d/2 − 1`` against the paper's over ``d/2``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the plot under
SINUSOID1D_PLOT = (
    "sinusoid1d-audio", "the ESPnet relative sinusoid (distances 31 to -31, dim 32) and Whisper's frequencies "
    "against the paper's", "The relative table's sine columns change sign across distance 0 and its cosine "
    "columns mirror; Whisper's slowest pair turns at exactly 1/10000, the paper's at 10000^(-(d-2)/d).", (8.4, 3.4))


def plot_sinusoid1d(fig: Any) -> None:
    from refpos.encodings.sinusoid1d import relative_positions, sinusoid_1d
    from refpos.encodings.sinusoidal import sinusoidal_frequencies

    ax = fig.add_subplot(1, 2, 1)
    distances = to_numpy(relative_positions(31, 31, xp=np))
    table = to_numpy(sinusoid_1d(distances, 32, spacing="paper", layout="interleaved", xp=np))
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest",
                      extent=(-0.5, 31.5, -31.5, 31.5))
    ax.set_xlabel("channel (interleaved sin, cos)")
    ax.set_ylabel("distance query − key")
    ax.set_title("ESPnet relative table, dim 32")
    fig.colorbar(image, ax=ax, fraction=0.05)

    ax = fig.add_subplot(1, 2, 2)
    k = np.arange(32)
    for spacing, label, style in (("tensor2tensor", "Whisper: step ln(base)/(d/2 − 1)", "o-"),
                                  ("paper", r"paper: $\mathrm{base}^{-2k/d}$", "s--")):
        ax.semilogy(k, to_numpy(sinusoidal_frequencies(64, spacing=spacing, xp=np)), style, markersize=3,
                    label=label)
    ax.set_xlabel("pair k (d = 64)")
    ax.set_ylabel(r"$\omega_k$")
    ax.set_title("the two spacings")
    ax.set_ylim(3e-5, 30.0)  # room above the curves for the legend
    ax.legend(loc="upper right", frameon=False)
