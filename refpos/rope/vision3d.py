r"""3-D RoPE of vision towers that rotate the frame index too: MiniMax-M3-VL's vision model, V-JEPA 2.

A patch of a video at frame ``t``, row ``h`` and column ``w`` has the position :math:`(p_t, p_h, p_w)`. Both
forms give each axis the same block of :math:`d = 2\lfloor \lfloor D/3 \rfloor / 2 \rfloor` channels of a
head of size ``D``, with the :math:`n = d/2` frequencies of a head of size ``d``,

.. math:: \omega_i = \theta^{-2i/d} = \theta^{-i/n}, \qquad i = 0, \dots, n - 1 ,

rotate the first :math:`3d` channels and pass the other :math:`D - 3d` through unchanged. They differ in
which channels pair up:

``minimax_m3_vl`` (``MiniMaxM3VLVisionRotaryEmbedding``, ``apply_rotary_pos_emb_vision``,
``transformers/models/minimax_m3_vl/modeling_minimax_m3_vl.py``)
    :math:`3n` pairs in the half layout over the rotated :math:`3d` channels, pair ``j`` = channels
    :math:`(j, j + 3n)`: pair ``j`` reads axis :math:`\lfloor j / n \rfloor` (t, then h, then w) at
    :math:`\omega_{j \bmod n}`; a true rotation :math:`u' = u\cos\varphi - v\sin\varphi`,
    :math:`v' = v\cos\varphi + u\sin\varphi`, :math:`\varphi_j = p_{\lfloor j/n \rfloor}\,\omega_{j \bmod n}`:
    the axial form of :mod:`refpos.rope.vision` with sections ``(n, n, n)`` on those channels
    (:func:`axial_part`). θ is ``vision_config.rope_parameters.rope_theta``. Positions:
    :func:`thw_patch_positions`.

``vjepa2`` (``rotate_queries_or_keys``, ``VJEPA2RopeAttention``, ``models/vjepa2/modeling_vjepa2.py``)
    three contiguous blocks of ``d`` channels (t, h, w), each rotated on adjacent pairs
    :math:`(2k, 2k+1)`, but with the cos/sin tables of the half layout: channel ``c`` of a block reads the
    angle :math:`\alpha_c = p\,\omega_{c \bmod n}`, so

    .. math:: y_{2k} = x_{2k}\cos\alpha_{2k} - x_{2k+1}\sin\alpha_{2k}, \qquad
              y_{2k+1} = x_{2k+1}\cos\alpha_{2k+1} + x_{2k}\sin\alpha_{2k+1} .

    The two channels of a pair turn by different angles (:math:`\omega_{2k \bmod n} \ne
    \omega_{(2k+1) \bmod n}`), so this is not a rotation (it does not keep the norm) except at
    :math:`p = 0`; it is what the model computes, and refpos reproduces it. θ = 10000 (the code fixes it).
    Positions: :func:`vjepa2_patch_positions`.

Positions are ``(..., N, 3)`` int arrays, last axis ``(t, h, w)`` (transformers' order).

Examples
--------
>>> rope = VisionRope3D("minimax_m3_vl", 16)  # d = 4: n = 2 frequencies per axis, 12 of 16 channels rotated
>>> axes, omega = vision3d_frequencies(rope)
>>> axes, omega.tolist()
((0, 0, 1, 1, 2, 2), [1.0, 0.01, 1.0, 0.01, 1.0, 0.01])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace
from refpos.pairs import place_pairs, split_pairs
from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    qwen_patch_positions,
    vision_angles,
    vision_cos_sin,
    vision_frequencies,
)
from refpos.validation import as_positions, check_choice, check_float, check_int, floating_array

#: the 3-D forms modelled here
VISION_ROPES_3D = ("minimax_m3_vl", "vjepa2")


@dataclass(frozen=True)
class VisionRope3D:
    """One 3-D vision RoPE: its form (:data:`VISION_ROPES_3D`), head size ``D`` (``≥ 6``) and θ (V-JEPA 2: 10000)."""

    kind: str
    head_dim: int
    theta: float = 10000.0

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, VISION_ROPES_3D)
        check_int("head_dim", self.head_dim, minimum=6)
        theta = check_float("theta", self.theta, positive=True)
        if self.kind == "vjepa2" and theta != 10000.0:
            raise ValueError(f"theta: V-JEPA 2's rotate_queries_or_keys fixes 10000, got {theta}")
        object.__setattr__(self, "theta", theta)

    @property
    def axis_dim(self) -> int:
        r"""Channels per axis, :math:`d = 2\lfloor\lfloor D/3\rfloor/2\rfloor`."""
        return 2 * ((self.head_dim // 3) // 2)

    @property
    def rotary_dim(self) -> int:
        """Channels rotated, ``3d`` (the first ones; the rest pass through)."""
        return 3 * self.axis_dim


def axial_part(rope: VisionRope3D) -> VisionRope:
    """The rotated channels of a 3-D form as the axial form of :mod:`refpos.rope.vision`: ``3d`` channels, sections
    ``(n, n, n)`` (t, h, w), half layout, θ (pair ``k`` of block ``a`` turns by :math:`p_a\\,\theta^{-k/n}`)."""
    n = rope.axis_dim // 2
    return VisionRope("axial", rope.rotary_dim, theta=rope.theta, sections=(n, n, n), axial_layout="half")


def vision3d_frequencies(rope: VisionRope3D) -> tuple[tuple[int, ...], np.ndarray]:
    r"""``(a, ω)`` per pair of the ``minimax_m3_vl`` form: the axis each of the :math:`3n` pairs reads (0 = t,
    1 = h, 2 = w) and its frequency, :math:`a_j = \lfloor j/n \rfloor`, :math:`\omega_{j \bmod n} =
    \theta^{-2 (j \bmod n)/d}` (the axial form's, :func:`axial_part`; V-JEPA 2 uses the same ω per block)."""
    return vision_frequencies(axial_part(rope))


def _check_rope(rope: Any) -> VisionRope3D:
    if not isinstance(rope, VisionRope3D):
        raise TypeError(f"rope must be a VisionRope3D, got {type(rope).__name__}")
    return rope


def _check_positions(positions: Any, xp: Any = None) -> Array:
    positions = as_positions(positions, xp=xp)
    if positions.ndim < 2 or positions.shape[-1] != 3:
        raise ValueError(f"positions must have shape (..., N, 3), last axis (t, h, w); got {tuple(positions.shape)}")
    return positions


def _vjepa2_angles(positions: Array, axial: VisionRope) -> Array:
    r"""``(..., N, 3d)`` V-JEPA 2 angle per channel: channel ``c`` of block ``b`` holds
    :math:`p_b\,\omega_{c \bmod n}`, the frequencies those of ``axial`` (sections ``(n, n, n)``)."""
    ns = array_namespace(positions)
    per_pair = vision_angles(positions, axial, xp=ns)  # (..., N, 3n): block b, pair k: p_b ω_k
    assert axial.sections is not None
    n = axial.sections[0]
    blocks = [per_pair[..., b * n:(b + 1) * n] for b in range(3)]
    return ns.concat([ns.concat([block, block], axis=-1) for block in blocks], axis=-1)  # α_c = p_b ω_{c mod n}


def vision3d_cos_sin(positions: Any, rope: VisionRope3D, *, xp: Any = None) -> tuple[Array, Array]:
    """``cos`` and ``sin`` of every rotated channel's angle, ``(..., N, 3d)`` (transformers' tables): the axial
    form's half-layout tables (``minimax_m3_vl``), or each block's angles twice (``vjepa2``)."""
    rope = _check_rope(rope)
    positions = _check_positions(positions, xp)
    if rope.kind == "minimax_m3_vl":
        return vision_cos_sin(positions, axial_part(rope))
    angles = _vjepa2_angles(positions, axial_part(rope))
    ns = array_namespace(angles)
    return ns.cos(angles), ns.sin(angles)


def apply_vision3d_rope(x: Any, positions: Any, rope: VisionRope3D) -> Array:
    """Apply the 3-D RoPE to patch vectors ``x`` ``(..., N, D)`` at positions ``(..., N, 3)`` (broadcast).

    The first ``3d`` channels are transformed (module docstring), the other ``D − 3d`` pass through.
    """
    rope = _check_rope(rope)
    x = floating_array(x, name="x")
    ns = array_namespace(x)
    if x.ndim < 2 or x.shape[-1] != rope.head_dim:
        raise ValueError(f"x must have shape (..., N, head_dim={rope.head_dim}), got {tuple(x.shape)}")
    positions = _check_positions(positions, ns)
    if positions.shape[-2] != x.shape[-2]:
        raise ValueError(f"positions {tuple(positions.shape[:-1])} + (3,) must end in x's N axis, x has shape "
                         f"{tuple(x.shape)}")
    rotated, rest = x[..., :rope.rotary_dim], x[..., rope.rotary_dim:]
    if rope.kind == "minimax_m3_vl":  # a rotation: the axial form on the rotated channels
        return ns.concat([apply_vision_rope(rotated, positions, axial_part(rope)), rest], axis=-1)
    return ns.concat([vjepa2_transform(rotated, positions, axial_part(rope)), rest], axis=-1)


def vjepa2_transform(x: Any, positions: Any, axial: VisionRope) -> Array:
    r"""V-JEPA 2's transform of its ``3d`` rotated channels ``x`` ``(..., N, 3d)`` at positions ``(..., N, 3)``, the
    frequencies those of ``axial`` (sections ``(n, n, n)``, :func:`axial_part`; another θ for a mistake's output):
    :math:`y_{2k} = x_{2k}\cos\alpha_{2k} - x_{2k+1}\sin\alpha_{2k}`,
    :math:`y_{2k+1} = x_{2k+1}\cos\alpha_{2k+1} + x_{2k}\sin\alpha_{2k+1}` (module docstring).

    See Also
    --------
    apply_vision3d_rope : the whole head, the channels after ``3d`` passed through.
    """
    x = floating_array(x, name="x")
    ns = array_namespace(x)
    angles = _vjepa2_angles(_check_positions(positions, ns), axial)  # (..., N, 3d): α_c = p_b ω_{c mod n}
    cos, sin = ns.astype(ns.cos(angles), x.dtype), ns.astype(ns.sin(angles), x.dtype)
    u, v = split_pairs(x, "interleaved")  # x_{2k}, x_{2k+1} over the three blocks
    even = u * cos[..., 0::2] - v * sin[..., 0::2]  # y_{2k} = x_{2k} cos α_{2k} − x_{2k+1} sin α_{2k}
    odd = v * cos[..., 1::2] + u * sin[..., 1::2]  # y_{2k+1} = x_{2k+1} cos α_{2k+1} + x_{2k} sin α_{2k+1}
    return place_pairs(even, odd, "interleaved")


def thw_patch_positions(grids: Any, spatial_merge_size: int = 2) -> np.ndarray:
    """``(N, 3)`` positions ``(t, h, w)`` of MiniMax-M3-VL's vision tower for grids ``(t, h, w)``: every frame's
    ``k × k`` merge blocks in row-major order, each block's patches row-major, ``t`` the frame index
    (transformers' ``vision_utils.get_vision_position_ids`` with ``include_temporal``)."""
    out = []
    for grid in grids:
        hw = qwen_patch_positions([grid], spatial_merge_size)  # (t·h·w, 2): (h, w) repeated per frame
        frames = np.repeat(np.arange(grid[0], dtype=np.int64), len(hw) // grid[0])  # frame of each patch
        out.append(np.concatenate([frames[:, None], hw], axis=1))
    if not out:
        raise ValueError("grids must hold at least one (t, h, w)")
    return np.concatenate(out, axis=0)


def vjepa2_patch_positions(token_ids: Any, grid_size: int) -> np.ndarray:
    r"""``(N, 3)`` V-JEPA 2 positions of tokens by their index ``i`` in the clip (all of them, or those a mask
    keeps): :math:`t = \lfloor i / g^2 \rfloor`, :math:`h = \lfloor (i \bmod g^2) / g \rfloor`,
    :math:`w = i \bmod g`, with ``g`` = ``crop_size // patch_size`` (patches per side)."""
    side = check_int("grid_size", grid_size, minimum=1)
    ids = np.asarray(as_positions(token_ids, name="token_ids", xp=np), dtype=np.int64)
    if ids.ndim != 1:
        raise ValueError(f"token_ids must have shape (N,), got {ids.shape}")
    frame, within = ids // side**2, ids % side**2
    return np.stack([frame, within // side, within % side], axis=-1)
