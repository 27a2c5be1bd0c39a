"""The reference adapter's fixed 2-D sin–cos functions (docs/sincos2d.md; the contract of ``spec_tests/README.md``).

NumPy in and out, the current backend inside. :mod:`refpos.testing.adapter` re-exports them, so
``REFPOS_IMPL=refpos.testing.adapter`` provides them; ``spec_tests/test_sincos2d.py`` is their spec.
"""

from __future__ import annotations

import math

import numpy as np

from refpos.backend import get_xp
from refpos.encodings import sincos2d
from refpos.testing.adapter_arrays import to_backend, to_host


def sincos_2d_grid(height: int, width: int, dim: int, temperature: float = 10000.0, axes: str = "yx",
                   flatten: str = "row_major", cls_rows: int = 0) -> np.ndarray:
    """The fixed 2-D sin–cos table of a patch grid, ``(cls_rows + height·width, dim)`` (docs/sincos2d.md#the-math):
    ``cls_rows`` zero rows, then token t at ``(y, x) = (t // width, t % width)`` (``flatten="row_major"``) or
    ``(t % height, t // height)`` (``"column_major"``) as ``[sin a·ω | cos a·ω | sin b·ω | cos b·ω]``,
    ``ω_j = T^(−j/(dim/4))``, ``(a, b) = (y, x)`` for ``axes="yx"``, ``(x, y)`` for ``"xy"``. ``dim`` a multiple of 4;
    a bad size, ``axes`` or ``flatten``: ValueError naming it."""
    return to_host(sincos2d.sincos_2d_grid(height, width, dim, temperature=temperature, axes=axes, flatten=flatten,
                                           cls_rows=cls_rows, xp=get_xp()))


def sine_position_map(mask: np.ndarray, num_features: int, temperature: float | list[float] = 10000.0,
                      normalize: bool = True, scale: float | None = None, offset: float = 0.0,
                      eps: float = 1e-6) -> np.ndarray:
    """DETR's sine embedding of a pixel mask ``(..., H, W)`` (bool, True = valid), channels last:
    ``(..., H, W, 2·num_features)``. Coordinates ``y, x`` are the mask's cumulative sums down the columns and along
    the rows (1-based; padding repeats the last count); with ``normalize`` ``(c + offset)/(c_last + eps)·scale``
    (``scale`` None: 2π). Channels ``[s(y; T_y) | s(x; T_x)]``, ``s`` interleaved ``(sin cω_j, cos cω_j)`` with
    ``ω_j = T^(−2j/num_features)``; ``temperature`` a number or ``[T_y, T_x]``. ``offset`` or ``scale`` without
    ``normalize``: ValueError."""
    temperature = tuple(temperature) if isinstance(temperature, list | tuple) else temperature
    return to_host(sincos2d.sine_position_map(to_backend(mask), num_features, temperature=temperature,
                                              normalize=normalize, scale=scale, offset=offset, eps=eps))


def sine_coordinates(coords: np.ndarray, num_features: int, temperature: float = 10000.0, scale: float = 2 * math.pi,
                     swap_xy: bool = True, layout: str = "interleaved", rule: str = "paired") -> np.ndarray:
    """Sine features of given coordinates ``(..., n)`` → ``(..., n·num_features)``: one block per coordinate of
    ``scale·c``, the first two exchanged when ``swap_xy`` and ``n >= 2``; ``layout`` ``interleaved`` (pairs
    ``(2j, 2j+1)``) or ``concat``; ``rule`` ``paired`` (``ω_j = T^(−2j/F)``) or ``doubled``
    (``ω_k = T^(−2⌊k/2⌋/(F/2))``, SAM 2's pointers)."""
    return to_host(sincos2d.sine_coordinates(to_backend(coords, np.float64), num_features, temperature=temperature,
                                             scale=scale, swap_xy=swap_xy, layout=layout, rule=rule))
