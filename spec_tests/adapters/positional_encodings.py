"""Adapter: the ``positional-encodings`` package (``PositionalEncoding1D``, torch), float32, CPU.

Run the suite on it (``tox -e positional-encodings`` installs it)::

    REFPOS_IMPL=spec_tests.adapters.positional_encodings python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/positional_encodings.xfails.txt

What the package implements, and what is wired: ``positional_encodings.torch_encodings.PositionalEncoding1D
(channels)`` builds the table of positions ``0 … x − 1`` for an input ``(batch, x, channels)``: float32
``inv_freq = 1 / 10000^(2k/channels)`` (paper spacing, base 10000 fixed), angles ``p·inv_freq`` in float32
and ``stack(sin, cos)`` per pair, so sin on the even and cos on the odd channels (the interleaved layout).
``sinusoidal`` builds that table for ``max(positions) + 1`` rows and indexes it with the positions; any
other base, the concat layout or tensor2tensor spacing is ``NotImplementedError``. The package's 2-D and
3-D tables (``PositionalEncoding2D``/``3D``) have no contract function. This file is the adapter written by
following docs/write-an-adapter.md from scratch (the page reports the time it took).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np
import torch
from positional_encodings.torch_encodings import PositionalEncoding1D

from spec_tests.adapters._contract import integer_positions

INFO: dict[str, Any] = {
    "name": f"positional-encodings {importlib.metadata.version('positional-encodings')} + torch {torch.__version__}",
    "dtype": "float32",  # float32 inv_freq and angles
    "rope_layout": "half",  # no RoPE: informational only
    "description": "spec_tests/adapters/positional_encodings.py: PositionalEncoding1D",
}


def sinusoidal(positions, dim, base=10000.0, layout="interleaved", spacing="paper") -> np.ndarray:
    """Rows of ``PositionalEncoding1D(dim)(zeros(1, max(positions) + 1, dim))`` at the positions."""
    if dim < 2 or dim % 2:
        raise ValueError(f"dim must be even and >= 2, got {dim}")
    if layout not in ("interleaved", "concat"):
        raise ValueError(f"layout must be 'interleaved' or 'concat', got {layout!r}")
    if spacing not in ("paper", "tensor2tensor"):
        raise ValueError(f"spacing must be 'paper' or 'tensor2tensor', got {spacing!r}")
    if (layout, spacing, float(base)) != ("interleaved", "paper", 10000.0):
        raise NotImplementedError("PositionalEncoding1D is interleaved with paper spacing and base 10000 only")
    pos = integer_positions(positions, reject_negative=True)  # the table starts at position 0
    length = int(pos.max()) + 1 if pos.size else 1
    table = PositionalEncoding1D(dim)(torch.zeros(1, length, dim))[0]  # (length, dim)
    return table.double().numpy()[pos]
