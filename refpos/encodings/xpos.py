r"""xPos: RoPE with an exponential decay per pair (Sun et al. 2022; lucidrains/rotary-embedding-torch).

See docs/other-encodings.md#xpos. Queries are rotated and multiplied by ``ζ^{(m-c)/γ}``, keys rotated and
divided by ``ζ^{(n-c)/γ}``, so ``q̃_m · k̃_n`` carries ``ζ_i^{(m-n)/γ}`` in pair ``i`` and depends only on
``m - n``. Anchor conventions: interleaved pairs ``(2i, 2i+1)``, paper frequencies ``base^(-2i/d)``,
``ζ_i = (2i + 0.4 d) / (1.4 d)`` (all < 1), ``γ = scale_base = 512``, exponent centred at ``c = T // 2``
(it cancels in ``q·k``; centring keeps ``ζ^{±m/γ}`` inside the float range for longer).
"""

from __future__ import annotations

import math
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.validation import (
    as_positions,
    check_bool,
    check_float,
    check_int,
    check_width,
    floating_array,
    same_libraries,
)


def xpos_decay(dim: int, *, xp: Any) -> Array:
    r"""The per-pair decay bases ``ζ_i = (2i + 0.4 d)/(1.4 d)``, shape ``(d/2,)``."""
    dim = check_width("dim", dim, what="float64 per position")
    two_i = xp.arange(0, dim, 2, dtype=xp.float64)  # (d/2,)
    return (two_i + 0.4 * dim) / (1.4 * dim)


def xpos(
    x: Array,
    positions: Array,
    *,
    is_query: bool,
    base: float = 10000.0,
    scale_base: float = 512.0,
    center: int = 0,
) -> Array:
    r"""Rotate ``x`` ``(..., T, d)`` by its positions and scale it by ``ζ^{±(p - center)/γ}``.

    ``is_query=True`` multiplies by the decay power, ``False`` divides (keys). ``positions`` is
    ``(T,)`` or ``(B, T)`` for ``x`` ``(B, H, T, d)``. ``scale_base=inf`` gives plain interleaved RoPE.

    Notes
    -----
    .. math::
        \tilde x_{2i} = s_i (x_{2i}\cos p\theta_i - x_{2i+1}\sin p\theta_i), \quad
        \tilde x_{2i+1} = s_i (x_{2i+1}\cos p\theta_i + x_{2i}\sin p\theta_i), \quad
        s_i = \zeta_i^{\pm (p - c)/\gamma}, \quad \theta_i = \text{base}^{-2i/d}
    """
    same_libraries(x=x, positions=positions)
    x = floating_array(x, name="x")
    xp = array_namespace(x)
    check_bool("is_query", is_query)
    base = check_float("base", base, positive=True)
    scale_base = check_float("scale_base", scale_base, positive=True, allow_inf=True)
    center = check_int("center", center)
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"the last axis of x (head dim) must be even, got {dim}")
    positions = as_positions(positions, xp=xp)
    if positions.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions has {positions.shape[-1]} entries but x has {x.shape[-2]} time steps")
    p = xp.astype(positions, xp.float64)[..., None]  # (..., T, 1)
    if positions.ndim == 2:
        p = p[:, None, ...]  # (B, 1, T, 1): shared by the heads
    theta = base ** (-xp.arange(0, dim, 2, dtype=xp.float64) / dim)  # (d/2,)
    angle = p * theta  # (..., T, d/2)
    power = (p - center) / scale_base  # (..., T, 1)
    scale = xp.pow(xpos_decay(dim, xp=xp), power if is_query else -power)  # (..., T, d/2)
    pairs = xp.reshape(x, (*x.shape[:-1], dim // 2, 2))  # (..., T, d/2, 2)
    x_even, x_odd = pairs[..., 0], pairs[..., 1]
    cos, sin = xp.cos(angle), xp.sin(angle)
    y_even = (x_even * cos - x_odd * sin) * scale
    y_odd = (x_odd * cos + x_even * sin) * scale
    return xp.reshape(xp.stack([y_even, y_odd], axis=-1), x.shape)  # (..., T, d)


class XPos(Encoding):
    """xPos as a pipeline encoding (``rotate``); the exponent is centred at ``T_k // 2`` as the anchor."""

    name = "xpos"

    def __init__(self, *, base: float = 10000.0, scale_base: float = 512.0) -> None:
        self.base = check_float("base", base, positive=True)
        self.scale_base = check_float("scale_base", scale_base, positive=True, allow_inf=True)

    def rotate(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> tuple[Array, Array]:
        center = k_positions.shape[-1] // 2
        q_rot = xpos(q, q_positions, is_query=True, base=self.base, scale_base=self.scale_base, center=center)
        k_rot = xpos(k, k_positions, is_query=False, base=self.base, scale_base=self.scale_base, center=center)
        return q_rot, k_rot

    def __repr__(self) -> str:
        scale = "inf" if math.isinf(self.scale_base) else self.scale_base
        return f"XPos(base={self.base}, scale_base={scale})"
