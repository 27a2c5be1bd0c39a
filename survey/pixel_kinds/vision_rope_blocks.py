r"""The ``vision_rope`` comparison of V-JEPA 2's 3-D form, whose attention turns each head's three blocks of
``d`` channels one call each (``rotate_queries_or_keys(x, pos=…)``: the frame's, then the row's, then the column's,
``VJEPA2RopeAttention.apply_rotary_embeddings``).

The run keeps, per size, the first calls of each query shape at distinct integer positions
(:func:`survey.pixel_capture.rotations`): a layer's three blocks, of one shape, each at its axis's coordinates. The
encoder's tokens are the clip's ``N`` patches in order; the predictor's the context and the targets, each every
patch by default (``VJEPA2Model.forward``), sorted by index (``VJEPA2Predictor.forward``): ``2N`` tokens, each index
twice. The calls of the stack's token count, in order, are the blocks ``t``, ``h``, ``w``: block ``a``'s query or key
after is compared with refpos's (:func:`refpos.rope.vision3d.apply_vision3d_rope`) of the block before, at the record's
positions (:meth:`~refpos.models.kinds.vision_rope.VisionRopeLayer.patch_positions`: token ``i`` at
:math:`(\lfloor i/g^2\rfloor, \lfloor (i \bmod g^2)/g\rfloor, i \bmod g)`, ``g = crop_size // patch_size``), column
``a``. A stack whose calls are not three is not reached, naming the count.

**Bound.** Output channel ``c`` reads ``x_c`` and its neighbour ``x_{c⊕1}`` at the angle
:math:`\alpha_c = p\,\omega_{c \bmod n}`: the bound of :mod:`survey.pixel_kinds.vision_rope` with each channel's own
speed (:class:`survey.rotation.Channels`).

**Wrong answers:** the frame and the row swapped, the row and the column swapped, the blocks in the order
``(h, w, t)``, positions from 1, a true rotation of each pair ``(2k, 2k+1)`` at :math:`p\,\omega_k`, the half layout's
pairs ``(k, k + n)``, the token indices split along a side one patch longer, the predictor's targets after its context
unsorted, and no rotation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.rope.vision import VisionRope, apply_vision_rope
from refpos.rope.vision3d import VisionRope3D, apply_vision3d_rope, vision3d_frequencies, vjepa2_patch_positions
from survey.pixel_kinds.base import Outcome, graded
from survey.pixels import PixelRun
from survey.rotation import Channels

#: the axis each of a layer's calls turns, in the order the attention calls them
AXES = ("t", "h", "w")


def block_rotation(x: np.ndarray, coordinate: np.ndarray, rope: VisionRope3D) -> np.ndarray:
    """V-JEPA 2's transform of one block ``x`` ``(N, d)`` at one axis's ``coordinate`` ``(N,)``: every block turns
    alike, so the first block of a head at ``(p, 0, 0)``."""
    d = rope.axis_dim
    head = np.zeros((x.shape[0], rope.head_dim))
    head[:, :d] = x
    at = np.stack([coordinate, np.zeros_like(coordinate), np.zeros_like(coordinate)], axis=-1)
    return np.asarray(apply_vision3d_rope(head, at, rope))[:, :d]


def block_bound(x: np.ndarray, coordinate: np.ndarray, rope: VisionRope3D) -> np.ndarray:
    """The float32 bound per output channel of :func:`block_rotation` (module docstring)."""
    d = rope.axis_dim
    index = np.arange(d)
    _, omega = vision3d_frequencies(rope)  # (3n,): each block's n frequencies
    speeds = Channels(index, index ^ 1, np.ones(d), np.tile(omega[:d // 2], 2))  # α_c = p ω_{c mod n}
    return speeds.bound(x, np.repeat(np.abs(coordinate)[:, None], d, axis=1))


def token_ids(stack: str, tokens: int) -> np.ndarray | None:
    """The clip indices of a stack's ``tokens``: the encoder's every patch in order, the predictor's context and
    targets (every patch each) sorted; ``None`` where the count fits neither."""
    if stack == "predictor":
        return None if tokens % 2 else np.repeat(np.arange(tokens // 2), 2)
    return np.arange(tokens)


def _mutants(record: Any, positions: np.ndarray, ids: np.ndarray) -> dict[str, tuple[np.ndarray, str] | None]:
    """Wrong ``(N, 3)`` positions, each with the transform it is turned by (``"vjepa2"``, ``"rotation"`` or
    ``"half"``)."""
    side = record.side
    out: dict[str, tuple[np.ndarray, str] | None] = {
        "frame and row swapped": (positions[:, [1, 0, 2]], "vjepa2"),
        "row and column swapped": (positions[:, [0, 2, 1]], "vjepa2"),
        "blocks in the order (h, w, t)": (positions[:, [1, 2, 0]], "vjepa2"),
        "positions from 1": (positions + 1, "vjepa2"),
        "a true rotation of pairs (2k, 2k+1)": (positions, "rotation"),
        "the half layout's pairs (k, k + n)": (positions, "half"),
        "token indices split along a side one patch longer": (vjepa2_patch_positions(ids, side + 1), "vjepa2")
        if side else None}
    if record.stack == "predictor":
        unsorted = np.concatenate([np.arange(len(ids) // 2)] * 2)
        out["the targets after the context, unsorted"] = (record.patch_positions(ids=unsorted), "vjepa2")
    return out


def _turn(x: np.ndarray, coordinate: np.ndarray, rope: VisionRope3D, how: str) -> np.ndarray:
    if how == "vjepa2":
        return block_rotation(x, coordinate, rope)
    n = rope.axis_dim // 2
    layout = "interleaved" if how == "rotation" else "half"
    return np.asarray(apply_vision_rope(x, coordinate[:, None], VisionRope("axial", 2 * n, rope.theta, (n,), layout)))


def compare_vjepa2(record: Any, run: PixelRun, accounted: tuple[str, ...]) -> Outcome:
    """Each axis block's query or key after against refpos's of it before (module docstring)."""
    rope: VisionRope3D = record.rope
    d, label = rope.axis_dim, f"{record.stack} layer {record.index} vision_rope(vjepa2)"
    cases = []
    for size, calls in run.applied.items():
        blocks = [(c.name, c.before[0].astype(np.float64), c.after[0].astype(np.float64)) for c in calls
                  if c.before and c.after and c.before[0].ndim == 2]
        if not blocks:
            continue
        own = blocks[0][1].shape[0] * (2 if record.stack == "predictor" else 1)  # the encoder runs first
        kept = [b for b in blocks if b[1].shape == (own, d)]
        if len(kept) != len(AXES):
            return Outcome("not reached", f"{label}: the run kept {len(kept)} calls of {own} tokens of {d} channels "
                           f"at the {size} size, not one per axis", accounted)
        ids = token_ids(record.stack, own)
        if ids is None:
            return Outcome("not reached", f"{label}: {own} tokens are no predictor's context and targets", accounted)
        positions = record.patch_positions(ids=ids)
        wrong_at = _mutants(record, positions, ids)
        for axis, (_, x, y) in enumerate(kept):
            claim = block_rotation(x, positions[:, axis], rope)
            wrong = {name: None if m is None else _turn(x, m[0][:, axis], rope, m[1]) for name, m in wrong_at.items()}
            wrong["no rotation"] = x
            cases.append((y, claim, block_bound(x, positions[:, axis], rope), wrong))
    if not cases:
        return Outcome("not reached", f"{label}: no rotate_queries_or_keys call ran", accounted)
    return graded(cases, accounted, label)
