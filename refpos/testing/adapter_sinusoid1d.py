"""The reference adapter's 1-D audio and time-series sinusoids (docs/sinusoid1d.md; the contract of
``spec_tests/README.md``).

NumPy in and out, the current backend inside. :mod:`refpos.testing.adapter` re-exports them;
``spec_tests/test_sinusoid1d.py`` is their spec.
"""

from __future__ import annotations

import numpy as np

from refpos.backend import get_xp
from refpos.encodings import sinusoid1d
from refpos.testing.adapter_arrays import to_backend, to_host


def sinusoid_1d(positions: np.ndarray, dim: int, spacing: str, layout: str, first: str = "sin",
                base: float = 10000.0, frequency_scale: float = 1.0, amplitude: float = 1.0) -> np.ndarray:
    """The sinusoid of integer positions, negative ones included, ``(*positions.shape, dim)``: pair k is
    ``a·(sin pω'_k, cos pω'_k)`` (``first="sin"``) or ``a·(cos, sin)`` (``"cos"``), ``ω'_k = s·ω_k`` with
    ``ω_k = base^(−2k/dim)`` (``spacing="paper"``) or ``exp(−k·ln(base)/(dim/2 − 1))`` (``"tensor2tensor"``),
    placed at channels ``(2k, 2k+1)`` (``layout="interleaved"``) or ``(k, k + dim/2)`` (``"concat"``); ``s =
    frequency_scale``, ``a = amplitude``. Odd ``dim``, float positions: ValueError / TypeError."""
    return to_host(sinusoid1d.sinusoid_1d(to_backend(positions), dim, spacing=spacing, layout=layout, first=first,
                                          base=base, frequency_scale=frequency_scale, amplitude=amplitude,
                                          xp=get_xp()))


def padded_sinusoid(mask: np.ndarray, dim: int, padding_idx: int, past: int = 0) -> np.ndarray:
    """fairseq's sinusoid of a step mask ``(..., T)`` (True = a real step), ``(..., T, dim)``: real steps at
    ``padding_idx + past + (their count so far)``, tensor2tensor spacing, ``[sin | cos]``; padded steps the zero
    row. A mask of other values than 0 and 1: ValueError."""
    return to_host(sinusoid1d.padded_sinusoid(to_backend(mask), dim, padding_idx, past=past))
