r"""The ``vision_rope`` comparison of MiniMax-M3-VL's 3-D form (:mod:`survey.pixel_kinds.vision_rope` hands it
here): the first rotary apply call of each size, its query and key before turned at the ``(t, h, w)`` positions of
the grid fed (:func:`refpos.rope.vision3d.thw_patch_positions`: frames of merge blocks), against the query and key
after.

The tower is fed a clip of two frames at the resampled size (:func:`survey.pixel_inputs.clip_frames`: its position
ids carry the frame index), so every axis holds distinct indices there: frame ``0 … 1``, row ``0 … 2k−1``, column
``0 … 3k−1``. On one frame every patch sits at frame 0, and a wrong answer on the frame axis alone (the frame index
ignored, doubled, the frame block's θ) turns the patches as the claim does: such a wrong answer is tried only
where the run fed more than one frame.

**Bound.** The axial form's on the rotated channels (:mod:`survey.pixel_kinds.vision_rope`: each channel its own
coordinate and speed); the channels past them pass through, stored once (one float32 rounding at worst).

**Wrong answers** (each the claim with one thing changed, an axial rotation of the rotated channels): the row and
column swapped, the frame and row swapped, the axes in the order ``(h, w, t)``, positions from 1, the frame index
ignored (every patch at frame 0), the frame index doubled (counted in frames, two a temporal patch), the frame block
at another θ (10000, or 10⁶ where the claim's is 10000) while the row's and column's keep the claim's, the frame
block one pair wider or narrower than ``n`` (the row's the other way: sections ``(n ± 1, n ∓ 1, n)``, each block's
frequencies :math:`\theta^{-k/s_a}` of its own width), the patches row-major instead of in merge blocks, the pairs
interleaved, θ = 10000 where the claim's differs, and no rotation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.rope.vision import VisionRope, vision_angles, vision_place_pairs, vision_split_pairs
from refpos.rope.vision3d import VisionRope3D, apply_vision3d_rope, axial_part, thw_patch_positions
from survey.pixel_kinds.base import Outcome, graded
from survey.pixel_kinds.vision_rope import channels_of, rotary_calls, unusable
from survey.pixels import PixelRun

#: a wrong answer: the axial rope of the rotated channels, the positions, and the frame block's own θ (``None``:
#: the rope's)
Mutant = tuple[VisionRope, np.ndarray, float | None]


def thw_rotation(x: np.ndarray, positions: np.ndarray, rope: VisionRope, frame_theta: float | None = None
                 ) -> np.ndarray:
    r"""``x`` with its first ``rope.head_dim`` channels turned by the axial ``rope`` at ``(t, h, w)`` ``positions``
    and the others passed through: how a wrong answer is computed. Pair ``j`` of channels ``(u_j, v_j)`` turns by
    :math:`\varphi_j = p_{a(j)}\,\omega_j` (:func:`refpos.rope.vision.vision_angles`),

    .. math:: u'_j = u_j\cos\varphi_j - v_j\sin\varphi_j, \qquad v'_j = v_j\cos\varphi_j + u_j\sin\varphi_j,

    the frame block's pairs (the first section, ``k = 0 … s_0 − 1``) at :math:`\varphi_k = t\,\theta_t^{-k/s_0}`
    where ``frame_theta`` :math:`\theta_t` is given."""
    d = rope.head_dim
    angles = np.asarray(vision_angles(positions, rope), dtype=np.float64)  # (N, D/2)
    if frame_theta is not None:
        assert rope.sections is not None
        width = rope.sections[0]
        angles[:, :width] = positions[:, :1] * frame_theta ** (-np.arange(width) / width)  # t·θ_t^(−k/s_0)
    u, v = (np.asarray(part, dtype=np.float64) for part in vision_split_pairs(x[..., :d], rope))
    cos, sin = np.cos(angles), np.sin(angles)
    turned = np.asarray(vision_place_pairs(u * cos - v * sin, v * cos + u * sin, rope))
    return np.concatenate([turned, x[..., d:]], axis=-1)


def _widened(axial: VisionRope, step: int) -> VisionRope | None:
    """The axial rope with the frame block ``step`` pairs wider and the row's as much narrower (``None``: a block
    would be empty)."""
    assert axial.sections is not None
    t, h, w = axial.sections
    if min(t + step, h - step) < 1:
        return None
    return VisionRope("axial", axial.head_dim, axial.theta, (t + step, h - step, w), axial.axial_layout)


def thw_mutants(rope: VisionRope3D, grid: tuple[int, int, int], merge: int, positions: np.ndarray
                ) -> dict[str, Mutant | None]:
    """MiniMax-M3-VL's wrong answers (module docstring), each a :data:`Mutant`; ``None`` where it would equal the
    claim on this grid (a wrong answer on the frame axis alone, on one frame)."""
    axial = axial_part(rope)
    frames = bool(positions[:, 0].any())  # the grid holds a frame past the first
    row_major = thw_patch_positions([grid], spatial_merge_size=1)
    frame_theta = 1e6 if rope.theta == 10000.0 else 10000.0
    out: dict[str, Mutant | None] = {
        "row and column swapped": (axial, positions[:, [0, 2, 1]], None),
        "frame and row swapped": (axial, positions[:, [1, 0, 2]], None),
        "axes in the order (h, w, t)": (axial, positions[:, [1, 2, 0]], None),
        "positions from 1": (axial, positions + 1, None),
        "frame index ignored (every patch at frame 0)": (axial, positions * [0, 1, 1], None) if frames else None,
        "frame index doubled": (axial, positions * [2, 1, 1], None) if frames else None,
        f"frame block at θ = {frame_theta:g}": (axial, positions, frame_theta) if frames else None,
        "patch order (row-major, not merge blocks)": None if np.array_equal(row_major, positions) else (
            axial, row_major, None),
        "pair layout swapped": (VisionRope("axial", axial.head_dim, axial.theta, axial.sections, "interleaved"),
                                positions, None),
        "θ = 10000": None if rope.theta == 10000.0 else (axial_part(VisionRope3D(rope.kind, rope.head_dim)),
                                                         positions, None)}
    for step, name in ((1, "frame block one pair wider"), (-1, "frame block one pair narrower")):
        widened = _widened(axial, step)
        out[name] = None if widened is None else (widened, positions, None)
    return out


def compare_thw(record: Any, run: PixelRun, accounted: tuple[str, ...]) -> Outcome:
    """MiniMax-M3-VL's 3-D form at the first rotary apply call of each size against refpos's rotation of its query
    and key before (module docstring)."""
    rope: VisionRope3D = record.rope
    axial = axial_part(rope)
    observed = rotary_calls(run, rope.head_dim)
    if isinstance(observed, str):
        return unusable(observed, record.stack, accounted)
    cases = []
    for size, call, x, y in observed:
        grid = tuple(int(v) for v in run.grids.get(size, ()))
        if len(grid) != 3 or grid[0] * grid[1] * grid[2] != x.shape[0] or grid[1] % run.merge \
                or grid[2] % run.merge:
            return Outcome("not reached", f"{call} at the {size} size: {x.shape[0]} patches are no "
                           f"grid (t, h, w) of merge blocks of {run.merge}", accounted)
        positions = record.patch_positions(grid, run.merge)
        speeds, per_channel = channels_of(axial, positions)
        rotated = speeds.bound(x[..., :axial.head_dim], per_channel)
        passed = np.abs(x[..., axial.head_dim:]) * 2.0**-24  # stored once, in float32 at worst
        bound = np.concatenate([np.broadcast_to(rotated, x[..., :axial.head_dim].shape), passed], axis=-1)
        claim = np.asarray(apply_vision3d_rope(x, positions, rope))
        wrong = {name: None if m is None else thw_rotation(x, m[1], m[0], m[2])
                 for name, m in thw_mutants(rope, grid, run.merge, positions).items()}
        wrong["no rotation"] = x
        cases.append((y, claim, bound, wrong))
    return graded(cases, accounted, f"{record.stack} vision_rope({rope.kind})")
