"""The reference adapter's function for relative position bias tables (the contract of ``spec_tests/README.md``):
Swin v1, Swin v2's continuous bias and BEiT (docs/bias-table.md).

:mod:`refpos.testing.adapter` imports it, so ``REFPOS_IMPL=refpos.testing.adapter`` provides it.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.bias_table import window_bias as _window_bias
from refpos.testing.adapter_arrays import to_backend, to_host


def _window_or_none(window: object) -> object:
    return tuple(window) if isinstance(window, list) else window


def window_bias(form: str, window: list[int], table: np.ndarray | None = None, table_window: list[int] | None = None,
                w1: np.ndarray | None = None, b1: np.ndarray | None = None, w2: np.ndarray | None = None,
                pretrained_window: list[int] | None = None) -> np.ndarray:
    """The relative position bias ``(H, N, N)`` of a window ``(Wh, Ww)`` (``N = Wh·Ww``, tokens row-major; BEiT
    ``(H, N + 1, N + 1)`` with the CLS token first): ``form`` ``"swin"`` reads ``table`` ``((2Wh − 1)(2Ww − 1), H)``
    at row ``(Δh + Wh − 1)(2Ww − 1) + Δw + Ww − 1`` (Δ = query − key); ``"beit"`` reads ``table``
    ``((2Ph − 1)(2Pw − 1) + 3, H)`` made for ``table_window`` P, its patch rows resampled bilinearly
    (half-pixel, no antialias) when P differs from the window, rows R, R + 1, R + 2 for CLS→patch, patch→CLS,
    CLS→CLS; ``"swinv2"`` is ``16·σ(relu(c·w1 + b1)·w2)`` of the log-spaced offsets ``c = sign(x)·log2(1 + |x|)/3``,
    ``x = 8Δ/(S − 1)`` with S the ``pretrained_window`` (None: the window); ``w1`` ``(2, n)``, ``b1`` ``(n,)``,
    ``w2`` ``(n, H)``. An argument the form does not read, or a missing one: ValueError."""
    mlp = None if w1 is None and b1 is None and w2 is None else tuple(to_backend(a, np.float64) for a in (w1, b1, w2))
    return to_host(_window_bias(form, _window_or_none(window), table=to_backend(table, np.float64),
                                table_window=_window_or_none(table_window), mlp=mlp,
                                pretrained_window=_window_or_none(pretrained_window)))
