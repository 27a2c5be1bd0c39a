"""Golden cases of Fourier features (docs/fourier.md).

* ``fourier/sam-points-…``: :func:`refpos.encodings.fourier.fourier_features` of points in [0, 1] with a seeded
  Gaussian matrix of float32 values (what a model holds);
* ``fourier/sam-grid-8x8``: the same map on the centres of an 8 × 8 grid (SAM's dense embedding);
* ``fourier/perceiver-…``: :func:`~refpos.encodings.fourier.perceiver_fourier_features` of a 6 × 9 grid of
  linear positions, 8 bands, positions concatenated.

Exact values: mpmath at :data:`refpos.golden.certify.DIGITS` digits from the float64 inputs as exact numbers (2π and
π exact). Tolerance: the kind's bound (refpos/encodings/fourier_mistakes.py) through
:func:`refpos.golden.angle_entries.angle_entry`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.fourier import grid_centre_coordinates, linear_positions
from refpos.encodings.fourier_mistakes import FourierInputs
from refpos.golden import certify as cert
from refpos.golden.angle_entries import angle_entry
from refpos.golden.cases import In, call, rng_for
from refpos.golden.manifest import Case, Output


def mp_sam(coords: np.ndarray, gaussian: np.ndarray) -> np.ndarray:
    """Exact ``[sin φ | cos φ]``, ``φ = 2π·(2c − 1)·G`` (docs/fourier.md#the-math)."""
    mp = cert.mp
    n, m = gaussian.shape
    out = np.empty((*coords.shape[:-1], 2 * m), dtype=object)
    for p in np.ndindex(coords.shape[:-1]):
        for j in range(m):
            phase = 2 * mp.pi * mp.fsum((2 * mp.mpf(float(coords[p][i])) - 1) * mp.mpf(float(gaussian[i, j]))
                                        for i in range(n))
            out[p][j], out[p][m + j] = mp.sin(phase), mp.cos(phase)
    return out


def mp_perceiver(positions: np.ndarray, num_bands: int, resolution: list[int]) -> np.ndarray:
    """Exact ``[x | sin(π f x) | cos(π f x)]`` with the bands ``1 + k·(r/2 − 1)/(K − 1)``."""
    mp = cert.mp
    rows = []
    for x in positions:
        angles = [mp.pi * (1 + mp.mpf(k) * (mp.mpf(r) / 2 - 1) / max(num_bands - 1, 1)) * mp.mpf(float(x[a]))
                  for a, r in enumerate(resolution) for k in range(num_bands)]
        rows.append([mp.mpf(float(v)) for v in x] + [mp.sin(t) for t in angles] + [mp.cos(t) for t in angles])
    return np.array(rows, dtype=object)


def fourier_cases() -> list[Case]:
    """Every Fourier-feature case."""
    cases: list[Case] = []
    gaussian = rng_for("fourier/gaussian").standard_normal((2, 16)).astype(np.float32).astype(np.float64)
    for cid, coords, what in [
        ("fourier/sam-points-8", rng_for("fourier/sam-points-8").random((8, 2)), "8 points in [0, 1]"),
        ("fourier/sam-grid-8x8", np.asarray(grid_centre_coordinates(8, 8, xp=np)), "the centres of an 8x8 grid"),
    ]:
        features, bound = FourierInputs("sam", coords, gaussian).reference()
        cases.append(Case(
            cid, "fourier", "fourier_features",
            f"SAM's random Fourier features of {what}, G (2, 16) of float32 values (docs/fourier.md#the-math)",
            {"call": call("fourier_features", ["features"], In("coords"), In("gaussian"))},
            {"coords": coords, "gaussian": gaussian},
            {"features": Output(features, angle_entry(float(bound)), lambda c=coords: (mp_sam(c, gaussian), 1.0))}))
    positions = np.reshape(np.asarray(linear_positions([6, 9], xp=np)), (-1, 2))
    setting = {"num_bands": 8, "max_resolution": [12, 16], "concat_pos": True, "sine_only": False}
    features, bound = FourierInputs("perceiver", positions, perceiver=setting).reference()
    cases.append(Case(
        "fourier/perceiver-6x9-b8", "fourier", "perceiver_fourier_features",
        "Perceiver's Fourier encoding of a 6x9 grid of positions in [-1, 1], 8 bands up to resolution (12, 16), "
        "positions concatenated (docs/fourier.md#the-math)",
        {"call": call("perceiver_fourier_features", ["features"], In("positions"), *setting.values())},
        {"positions": positions},
        {"features": Output(features, angle_entry(float(bound)),
                            lambda: (mp_perceiver(positions, 8, [12, 16]), 1.0))}))
    return cases


__all__: list[Any] = ["fourier_cases"]
