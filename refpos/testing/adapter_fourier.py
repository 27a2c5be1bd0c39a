"""The reference adapter's Fourier-feature functions (docs/fourier.md; the contract of ``spec_tests/README.md``).

NumPy in and out, the current backend inside. :mod:`refpos.testing.adapter` re-exports them;
``spec_tests/test_fourier.py`` is their spec.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from refpos.encodings import fourier
from refpos.testing.adapter_arrays import to_backend, to_host


def fourier_features(coords: np.ndarray, gaussian: np.ndarray) -> np.ndarray:
    """SAM's random Fourier features ``(..., 2m)`` of coordinates ``(..., n)`` in [0, 1]: ``φ = 2π·(2c − 1)·G``
    with ``G`` ``(n, m)``, then ``[sin φ | cos φ]``. A ``G`` of another row count, or non-finite coordinates:
    ValueError."""
    return to_host(fourier.fourier_features(to_backend(coords, np.float64), to_backend(gaussian, np.float64)))


def perceiver_fourier_features(positions: np.ndarray, num_bands: int, max_resolution: Sequence[int],
                               concat_pos: bool = True, sine_only: bool = False) -> np.ndarray:
    """Perceiver's Fourier encoding of positions ``(M, N)``: ``[x | sin(π f x) | cos(π f x)]`` with bands
    ``f_{a,k} = 1 + k·(r_a/2 − 1)/(K − 1)`` (``K = num_bands``; one band: 1) flattened axis-major; ``concat_pos``
    False leaves the positions out, ``sine_only`` the cosines. One resolution per axis (else ValueError)."""
    return to_host(fourier.perceiver_fourier_features(to_backend(positions, np.float64), num_bands,
                                                      list(max_resolution), concat_pos=concat_pos,
                                                      sine_only=sine_only))
