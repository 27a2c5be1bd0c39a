r"""The catalogued mistakes of the 3-D vision RoPE forms (MiniMax-M3-VL's tower, V-JEPA 2) and their inputs
(docs/vision-rope.md#mistakes).

A call is :func:`refpos.rope.vision3d.apply_vision3d_rope` of patch vectors ``x`` ``(..., N, D)`` at integer
positions ``(..., N, 3)``, last axis ``(t, h, w)``, with one :class:`~refpos.rope.vision3d.VisionRope3D`. Every
mistake is that same transform with one step changed, computed by the formula modules on changed inputs: the
positions' axes moved (:data:`BLOCK_AXES`) or the frame zeroed, θ or the frequencies changed, the rotated channels
paired another way, or each pair's second member negated before and after (the rotation by −φ:
``R(−φ) = S·R(φ)·S``; for V-JEPA 2, whose pairs turn by two angles, the same sign flip of every sine).

The bound is :func:`refpos.rope.vision_bound.token_bound` with the rotated channels' angles and frequencies
(:func:`~refpos.rope.vision3d.axial_part`): a mistake's output is matched within the bound of its own angles.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from refpos.mistake_match import as_float64
from refpos.rope.vision import VisionRope, apply_vision_rope
from refpos.rope.vision3d import VisionRope3D, apply_vision3d_rope, axial_part, vjepa2_transform
from refpos.rope.vision_bound import token_bound
from refpos.validation import as_positions

#: each mistake of the positions' axes -> the axis of (t, h, w) each of the port's three blocks reads
BLOCK_AXES = {"axes_swapped": (0, 2, 1), "frame_row_swapped": (1, 0, 2), "frame_last": (1, 2, 0)}


@dataclass(frozen=True)
class VisionRope3DInputs:
    """One call of ``apply_vision3d_rope``: ``x`` ``(..., N, D)`` float64, ``positions`` ``(..., N, 3)`` int64 (last
    axis ``(t, h, w)``, broadcast against ``x``'s leading axes) and the 3-D RoPE.

    Raises
    ------
    TypeError
        ``rope`` not a :class:`~refpos.rope.vision3d.VisionRope3D`, float ``positions``.
    ValueError
        ``x`` or ``positions`` of a shape the RoPE does not take, negative ``positions``, non-finite ``x``.
    """

    x: np.ndarray
    positions: np.ndarray
    rope: VisionRope3D

    def __post_init__(self) -> None:
        if not isinstance(self.rope, VisionRope3D):
            raise TypeError(f"rope must be a VisionRope3D, got {type(self.rope).__name__}")
        x = as_float64(self.x)
        if x.ndim < 2 or x.shape[-1] != self.rope.head_dim:
            raise ValueError(f"x must have shape (..., N, head_dim={self.rope.head_dim}), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError("x must be finite")
        positions = np.asarray(as_positions(self.positions, xp=np), dtype=np.int64)
        if positions.ndim < 2 or positions.shape[-1] != 3 or positions.shape[-2] != x.shape[-2]:
            raise ValueError(f"positions must have shape (..., N = {x.shape[-2]}, 3), last axis (t, h, w); got "
                             f"{positions.shape}")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "positions", positions)

    def output(self) -> np.ndarray:
        """The reference: :func:`~refpos.rope.vision3d.apply_vision3d_rope`, float64."""
        return as_float64(apply_vision3d_rope(self.x, self.positions, self.rope))

    def bound(self) -> np.ndarray:
        """``β_t`` of the rotated channels' angles, ``(..., N, 1)`` (:func:`~refpos.rope.vision_bound.token_bound`)."""
        return token_bound(self.x, self.positions, axial_part(self.rope))

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        return self.output(), self.bound()


def _transform(inputs: VisionRope3DInputs, positions: np.ndarray | None = None, *, theta: float | None = None,
               how: str | None = None, reverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The form's transform at ``positions`` (the call's when ``None``), its frequencies at ``theta`` (the call's
    when ``None``), its rotated channels paired ``how`` (``None``: the form's own; ``"interleaved"``: adjacent pairs
    each turned by one angle, pair ``j`` reading axis ``⌊j/n⌋``; ``"blocks"``: each axis's ``d`` channels in the
    half layout, pair ``(c, c + n)`` of block ``b`` turned by ``p_b·ω_c``), reversed when ``reverse``; and the bound
    of its angles."""
    rope = inputs.rope
    positions = inputs.positions if positions is None else positions
    axial = axial_part(rope) if theta is None else replace(axial_part(rope), theta=theta)
    n, d = rope.axis_dim // 2, rope.axis_dim
    sign = np.ones(rope.head_dim)
    if reverse:  # S: each pair's second member: channel j + 3n (MiniMax-M3-VL), 2k + 1 (V-JEPA 2)
        if rope.kind == "minimax_m3_vl":
            sign[3 * n:6 * n] = -1.0
        else:
            sign[1:3 * d:2] = -1.0
    x = inputs.x * sign
    rotated, rest = x[..., :rope.rotary_dim], x[..., rope.rotary_dim:]
    if how == "interleaved":
        out = apply_vision_rope(rotated, positions, replace(axial, axial_layout="interleaved"))
    elif how == "blocks":  # block b: the 1-D RoPE of d channels (half layout) at coordinate b
        block = VisionRope("axial", d, theta=axial.theta, sections=(n,), axial_layout="half")
        out = np.concatenate([as_float64(apply_vision_rope(rotated[..., b * d:(b + 1) * d], positions[..., b:b + 1],
                                                           block)) for b in range(3)], axis=-1)
    elif rope.kind == "minimax_m3_vl":
        out = apply_vision_rope(rotated, positions, axial)
    else:
        out = vjepa2_transform(rotated, positions, axial)
    full = np.concatenate([as_float64(out), rest], axis=-1) * sign
    return full, token_bound(inputs.x, positions, axial)


def axes_moved(inputs: VisionRope3DInputs, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The transform with block ``b`` reading the axis ``BLOCK_AXES[name][b]`` of (t, h, w)."""
    return _transform(inputs, inputs.positions[..., list(BLOCK_AXES[name])])


def frame_ignored(inputs: VisionRope3DInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """Every frame rotated as the first: ``t`` taken as 0 (a 2-D tower's positions, the frame block unturned)."""
    if not bool(np.any(inputs.positions[..., 0])):
        return None
    return _transform(inputs, np.concatenate([np.zeros_like(inputs.positions[..., :1]),
                                              inputs.positions[..., 1:]], axis=-1))


def layout_swapped(inputs: VisionRope3DInputs) -> tuple[np.ndarray, np.ndarray]:
    """MiniMax-M3-VL's pairs ``(j, j + 3n)`` taken as adjacent ones; V-JEPA 2's adjacent channels rotated as
    ``rotate_half`` pairs ``(c, c + n)`` of each block."""
    return _transform(inputs, how="interleaved" if inputs.rope.kind == "minimax_m3_vl" else "blocks")


def blocks_split(inputs: VisionRope3DInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """MiniMax-M3-VL's rotated channels cut into one half-layout block per axis (V-JEPA 2's split)."""
    return _transform(inputs, how="blocks") if inputs.rope.kind == "minimax_m3_vl" else None


def angles_interleaved(inputs: VisionRope3DInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """V-JEPA 2's adjacent pair ``(2k, 2k + 1)`` of a block turned by one angle ``p_b·ω_k`` (the table repeated
    element by element) where the model reads ``ω_{2k mod n}`` and ``ω_{(2k+1) mod n}``."""
    return _transform(inputs, how="interleaved") if inputs.rope.kind == "vjepa2" else None


def reversed_3d(inputs: VisionRope3DInputs) -> tuple[np.ndarray, np.ndarray]:
    """Every sine's sign flipped (the rotation by −φ)."""
    return _transform(inputs, reverse=True)


def shifted_3d(inputs: VisionRope3DInputs) -> tuple[np.ndarray, np.ndarray]:
    """Every coordinate one too large."""
    return _transform(inputs, inputs.positions + 1)


def theta_3d(inputs: VisionRope3DInputs, theta: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The transform at another θ (``None`` where it is the call's)."""
    return None if inputs.rope.theta == theta else _transform(inputs, theta=theta)


def whole_head_frequencies(inputs: VisionRope3DInputs) -> tuple[np.ndarray, np.ndarray]:
    r"""Each axis given the frequencies of the whole head, :math:`\theta^{-2k/D}`, where the form gives it those of
    its ``d`` channels, :math:`\theta^{-2k/d}`: the axial part at :math:`\theta^{d/D}`."""
    rope = inputs.rope
    return _transform(inputs, theta=rope.theta ** (rope.axis_dim / rope.head_dim))


def is_3d(inputs: Any) -> bool:
    """Whether ``inputs`` are a 3-D call's."""
    return isinstance(inputs, VisionRope3DInputs)


__all__ = ["BLOCK_AXES", "VisionRope3DInputs", "angles_interleaved", "axes_moved", "blocks_split", "frame_ignored",
           "is_3d", "layout_swapped", "reversed_3d", "shifted_3d", "theta_3d", "whole_head_frequencies"]
