r"""The rules that keep RoPE's geometric frequencies: plain RoPE, position interpolation, proportional RoPE.

Plain RoPE (docs/rope.md#the-math): :math:`\omega_j = \theta^{-2j/d}`, ``j = 0 … d/2 − 1``; every other rule
starts from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from refpos.rope.rules.inverse import Changes, Fitted, invert_theta, log_line
from refpos.rope.rules.record import Arithmetic, Config, DrawContext, FactorRule, RopeRule


def base_inv_freq(theta: Any, d: int, ar: Arithmetic) -> Any:
    r"""Plain RoPE frequencies :math:`\omega_j = \theta^{-2j/d}`, ``j = 0 … d/2 − 1`` (docs/rope.md#the-math)."""
    exponents = ar.arange(0, d, 2) / d  # (d/2,)
    return theta ** (-exponents)


def default_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    return base_inv_freq(ar.real(rope.theta), rope.rotary_dim, ar)


def linear_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    r"""Position interpolation: :math:`\omega'_j = \omega_j / s` (docs/extrapolation.md#linear)."""
    return base_inv_freq(ar.real(rope.theta), rope.rotary_dim, ar) / ar.real(rope.factor)


def proportional_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    r"""Proportional RoPE (docs/rope.md#partial-rotary): exponent denominator ``D = head_dim``, ``D/2``
    frequencies, pairs ``j ≥ n_rot`` get ``ω_j = 0`` (identity), then ``ω / factor``.

    .. math:: \omega_j = \theta^{-2j/D} / s \;(j < n_\text{rot}), \qquad 0 \;(j \ge n_\text{rot})
    """
    n_rot, full = rope.rotary_dim // 2, rope.head_dim
    rotated = ar.real(rope.theta) ** (-(ar.arange(0, 2 * n_rot, 2) / full))  # (n_rot,)
    return ar.concat([rotated, ar.zeros(full // 2 - n_rot)]) / ar.real(rope.factor)  # (D/2,)


def invert_linear(fitted: Fitted) -> Iterator[Changes]:
    r""":math:`\hat\omega_j = \theta^{-2j/d}/s`: ``s`` from the mean log ratio, ``θ`` at the config's ``s``, or both."""
    if fitted.use.any():
        yield {"factor": float(1 / np.exp(np.mean(np.log(fitted.ratio()[fitted.use]))))}
    yield from invert_theta(fitted, divisor=fitted.rope.factor)
    line = log_line(fitted)
    if line:
        yield {"theta": line[0], "factor": line[1]}


def invert_proportional(fitted: Fitted) -> Iterator[Changes]:
    r""":math:`\hat\omega_j = \theta^{-2j/D}/s` on the rotated pairs (``D`` the head size)."""
    rope = fitted.rope
    rotated = fitted.pair < rope.rotary_dim // 2
    use = fitted.use & rotated & (fitted.omega > 0)
    if use.any():
        plain = fitted.plain(denominator=rope.head_dim)
        yield {"factor": float(np.exp(np.mean(np.log(plain[use] / fitted.omega[use]))))}
    for divisor in (rope.factor, None):  # θ at the config's s, then both
        line = log_line(fitted, rotated, divisor=divisor, denominator=rope.head_dim)
        if line:
            yield {"theta": line[0]} if divisor is not None else {"theta": line[0], "factor": line[1]}


def proportional_bands(rope: Config, seq_len: int | None) -> list[str]:
    rotated = rope.rotary_dim // 2
    return ["rotated" if j < rotated else "not rotated (ω = 0)" for j in range(rope.head_dim // 2)]


def draw_nothing(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    return {}


def draw_factor(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    return {"factor": ctx.factor}


DEFAULT = RopeRule(
    name="default", doc="docs/rope.md#the-math", omega=r"$\theta^{-2j/d}$", attention="1",
    source="Su et al. 2021 (RoFormer)", inv_freq=default_inv_freq, draw=draw_nothing,
    transformers="compute_default_rope_parameters (each rotary module's own)",
    example={"theta": 500000.0},
)

LINEAR = RopeRule(
    name="linear", doc="docs/extrapolation.md#linear", omega=r"$\theta^{-2j/d}/s$", attention="1",
    source="Chen et al. 2023 (position interpolation); kaiokendev", inv_freq=linear_inv_freq, draw=draw_factor,
    parameters=("factor",), factor=FactorRule(), transformers="_compute_linear_scaling_rope_parameters",
    example={"factor": 8.0}, invert=invert_linear,
)

PROPORTIONAL = RopeRule(
    name="proportional", doc="docs/rope.md#partial-rotary", omega=r"$\theta^{-2j/D}/s$, 0 past the rotated pairs",
    attention="1", source="transformers' Gemma 4 (full-width table, zero frequencies past the rotated pairs)",
    inv_freq=proportional_inv_freq, draw=draw_factor, parameters=("factor",),
    factor=FactorRule(at_least_one=False, required=False, default=1.0), spans_head=True,
    transformers="_compute_proportional_rope_parameters",
    example={"rotary_dim": 32, "factor": 2.0}, invert=invert_proportional, bands=proportional_bands,
)
