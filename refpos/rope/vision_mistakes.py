r"""The catalogued mistakes of vision RoPE, the kind's inputs and an identifier (docs/vision-rope.md#mistakes).

A 2-D call is :func:`refpos.rope.vision.apply_vision_rope` of patch vectors ``x`` ``(..., P + N, D)`` at
coordinates ``positions`` ``(..., N, n)`` (DINOv3's: real, its class and register tokens first at (0, 0)) with one
:class:`~refpos.rope.vision.VisionRope`, the ``P`` tokens before the patches turned by given angles
``prefix_angles`` ``(P, D/2)`` (MLCD's and LLaVA-OneVision-1.5's learned class angles; ``P = 0`` without them); a
3-D call is :func:`refpos.rope.vision3d.apply_vision3d_rope` at ``(t, h, w)``
(:class:`~refpos.rope.vision3d_mistakes.VisionRope3DInputs`). Every mistake is that same rotation with one step
changed, computed by the formula module on changed inputs (coordinates, θ, the form's frequencies, the class
angles' place), on ``x`` with its channels moved (the other pair layout) or its second pair members negated (the
rotation by −φ: ``R(−φ) = S·R(φ)·S`` with ``S`` the sign of ``v``). One catalogue serves both: a record whose
mistake a call cannot show answers ``None`` for it.

The bound, a float32 port's per token, is :func:`refpos.rope.vision_bound.token_bound` (derived there). A
mistake's output is matched within the bound of its own angles (its coordinates, θ and frequencies): the same
computation with one step changed admits the same rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from refpos.mistake_match import KindMistake, as_float64, identify_output
from refpos.pairs import split_pairs
from refpos.rope import vision3d_mistakes as v3
from refpos.rope.vision import (
    REAL_COORDINATES,
    VisionRope,
    apply_vision_rope,
    vision_angles,
    vision_place_pairs,
    vision_split_pairs,
)
from refpos.rope.vision_bound import U32, token_bound
from refpos.validation import as_positions

#: θ the forms default to (transformers' vision towers, rotary-embedding-torch, timm)
DEFAULT_THETA = 10000.0
#: the form whose frequencies a port of a named form confuses them with: Qwen2-VL's, MLCD's and Llama 4's (a head
#: of size D/2 per axis) with Pixtral's (one head of size D, split even/odd between the axes), and the reverse
CONFUSED_FREQUENCIES = {"qwen2_vl": "pixtral", "mlcd": "pixtral", "llama4": "pixtral", "pixtral": "qwen2_vl"}


@dataclass(frozen=True)
class VisionRopeInputs:
    """One call of ``apply_vision_rope``: ``x`` ``(..., P + N, D)`` float64, ``positions`` ``(..., N, n)`` int64
    (float64 for ``dinov3`` and ``sam3``; broadcast against ``x``'s leading axes), the RoPE, and the angles
    ``prefix_angles`` ``(P, D/2)`` the ``P`` tokens before the patches turn by (``None``: no such tokens).

    Raises
    ------
    TypeError
        ``rope`` not a :class:`~refpos.rope.vision.VisionRope`, float ``positions``.
    ValueError
        ``x``, ``positions`` or ``prefix_angles`` of a shape the RoPE does not take, negative ``positions``,
        non-finite ``x`` or ``prefix_angles``.
    """

    x: np.ndarray
    positions: np.ndarray
    rope: VisionRope
    prefix_angles: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rope, VisionRope):
            raise TypeError(f"rope must be a VisionRope, got {type(self.rope).__name__}")
        x = as_float64(self.x)
        if x.ndim < 2 or x.shape[-1] != self.rope.head_dim:
            raise ValueError(f"x must have shape (..., N, head_dim={self.rope.head_dim}), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError("x must be finite")
        if self.rope.kind in REAL_COORDINATES:  # real coordinates: DINOv3's patch centres, SAM 3's scaled ones
            positions = as_float64(self.positions)
        else:
            positions = np.asarray(as_positions(self.positions, xp=np), dtype=np.int64)
        angles = vision_angles(positions, self.rope, xp=np)  # shape checks: (..., N, n)
        prefix = 0
        if self.prefix_angles is not None:
            given = as_float64(self.prefix_angles)
            if given.ndim != 2 or given.shape[0] < 1 or given.shape[1] != self.rope.head_dim // 2:
                raise ValueError(f"prefix_angles must have shape (P >= 1, head_dim/2 = {self.rope.head_dim // 2}), "
                                 f"got {given.shape}")
            if not np.all(np.isfinite(given)):
                raise ValueError("prefix_angles must be finite")
            object.__setattr__(self, "prefix_angles", given)
            prefix = given.shape[0]
        if angles.shape[-2] + prefix != x.shape[-2]:
            raise ValueError(f"positions must have x's N = {x.shape[-2]} rows less the {prefix} prefix_angles rows "
                             f"(..., {x.shape[-2] - prefix}, {self.rope.n_axes}), got {positions.shape}")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "positions", positions)

    def output(self) -> np.ndarray:
        """The reference: :func:`~refpos.rope.vision.apply_vision_rope`, float64."""
        return as_float64(apply_vision_rope(self.x, self.positions, self.rope, prefix_angles=self.prefix_angles))

    def bound(self) -> np.ndarray:
        """``β_t`` of :func:`~refpos.rope.vision_bound.token_bound`, ``(..., P + N, 1)`` (broadcast over the
        channels)."""
        return token_bound(self.x, self.positions, self.rope, self.prefix_angles)

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        return self.output(), self.bound()


def rotate(x: np.ndarray, positions: np.ndarray, rope: VisionRope, *, layout: str | None = None,
           reverse: bool = False, prefix_angles: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The rotation of ``rope`` at ``positions`` (after tokens turned by ``prefix_angles``) with its pairs read and
    written in ``layout`` over the whole head (the form's own when ``None``: Gemma 4's one span per axis) and by
    ``−φ`` when ``reverse``, and its bound: :func:`~refpos.rope.vision.apply_vision_rope` on ``x`` with the port's
    pair ``j`` moved onto the form's pair ``j`` (channel lists of :func:`~refpos.rope.vision.vision_split_pairs`
    and :func:`refpos.pairs.split_pairs`) and, reversed, its ``v`` members negated before and after."""
    head = np.arange(rope.head_dim)
    own = np.concatenate([np.asarray(c) for c in vision_split_pairs(head, rope)])  # the form's (u…, v…) channels
    port = own if layout is None else np.concatenate([np.asarray(c) for c in split_pairs(head, layout)])
    to_own = np.empty_like(head)
    to_own[own] = port  # the form's channel own[i] reads the port's channel port[i]
    back = np.empty_like(head)
    back[port] = own
    ones = np.ones(rope.head_dim // 2)
    sign = as_float64(vision_place_pairs(ones, -ones, rope)) if reverse else np.ones(rope.head_dim)  # S: v → −v
    moved = x[..., to_own] * sign
    out = as_float64(apply_vision_rope(moved, positions, rope, prefix_angles=prefix_angles)) * sign
    return np.ascontiguousarray(out[..., back]), token_bound(x, positions, rope, prefix_angles)


def _turn(inputs: VisionRopeInputs, positions: np.ndarray | None = None, rope: VisionRope | None = None,
          **how: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rotate` of the call's ``x`` and class angles, at ``positions`` and with ``rope`` (the call's when
    ``None``)."""
    return rotate(inputs.x, inputs.positions if positions is None else positions, rope or inputs.rope,
                  prefix_angles=inputs.prefix_angles, **how)


def _other_layout(inputs: Any) -> tuple[np.ndarray, np.ndarray]:
    """The other pairing over the whole head; for Gemma 4's one half-layout span per axis, the half layout over the
    whole head (``rotate_half`` of the head); a 3-D form's: :func:`~refpos.rope.vision3d_mistakes.layout_swapped`."""
    if v3.is_3d(inputs):
        return v3.layout_swapped(inputs)
    if inputs.rope.blocks > 1:
        return _turn(inputs, layout=inputs.rope.layout)
    return _turn(inputs, layout="interleaved" if inputs.rope.layout == "half" else "half")


def _axes_swapped(inputs: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """h and w exchanged (the last two coordinates: (t, h, w) → (t, w, h) for a 3-axis call)."""
    if v3.is_3d(inputs):
        return v3.axes_moved(inputs, "axes_swapped")
    if inputs.rope.n_axes < 2:
        return None
    order = list(range(inputs.rope.n_axes))
    order[-2:] = order[-1], order[-2]
    return _turn(inputs, inputs.positions[..., order])


def _confused_frequencies(inputs: Any, wanted: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    """The form's rotation with the other form's frequencies (:data:`CONFUSED_FREQUENCIES`), in the form's axis
    order and layout; for the axial form with equal sections, each block given the frequencies of a head of size
    ``D``: ``θ^(−k/(D/2)) = (θ^(1/n))^(−k/s)``."""
    rope = inputs.rope
    if rope.kind not in wanted:
        return None
    if rope.kind == "axial":
        assert rope.sections is not None
        if len(rope.sections) < 2 or len(set(rope.sections)) != 1:
            return None
        return _turn(inputs, rope=replace(rope, theta=rope.theta ** (1.0 / len(rope.sections))))
    other = VisionRope(CONFUSED_FREQUENCIES[rope.kind], rope.head_dim, theta=rope.theta)  # h then w, half
    positions = inputs.positions[..., ::-1] if rope.kind == "llama4" else inputs.positions  # Llama 4: w then h
    return _turn(inputs, positions, other, layout=rope.layout)


def _shifted(inputs: Any, by: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Every coordinate ``+ 1`` (``by = 1``), or, for a 1-based call (every token other than a class token at the
    origin has coordinates ≥ 1), ``− 1`` with the class token kept at the origin."""
    positions = inputs.positions
    if v3.is_3d(inputs):
        return v3.shifted_3d(inputs) if by > 0 else None
    if by > 0:
        return _turn(inputs, positions + 1)
    patch = np.any(positions != 0, axis=-1, keepdims=True)  # (..., N, 1): not the class token
    if not bool(patch.any()) or bool(np.any(patch & (positions < 1))):
        return None
    return _turn(inputs, np.where(patch, positions - 1, positions))


def _cls_rotated(inputs: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """Llama 4's class token (coordinates (0, 0)) rotated as the first patch, (1, 1)."""
    if v3.is_3d(inputs) or inputs.rope.kind != "llama4":
        return None
    cls = np.all(inputs.positions == 0, axis=-1, keepdims=True)
    if not bool(cls.any()):
        return None
    return _turn(inputs, np.where(cls, 1, inputs.positions))


def _prefix_misaligned(inputs: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """DINOv3's patch coordinates applied from the first token: its ``P`` leading tokens at (0, 0) (the class and
    register tokens) turned as the first patches, the last ``P`` patches left unrotated."""
    if v3.is_3d(inputs) or inputs.rope.kind != "dinov3":
        return None
    rows = np.all(inputs.positions == 0, axis=-1).reshape(-1, inputs.positions.shape[-2])  # (batch, N)
    prefix = int(np.argmin(rows[0])) if not bool(rows[0].all()) else rows.shape[1]  # leading rows at (0, 0)
    if prefix in (0, rows.shape[1]) or not bool(np.all(rows[:, :prefix])):
        return None
    return _turn(inputs, np.roll(inputs.positions, -prefix, axis=-2))


def _theta_default(inputs: Any) -> tuple[np.ndarray, np.ndarray] | None:
    if v3.is_3d(inputs):
        return v3.theta_3d(inputs, DEFAULT_THETA)
    if inputs.rope.theta == DEFAULT_THETA:
        return None
    return _turn(inputs, rope=replace(inputs.rope, theta=DEFAULT_THETA))


def _reversed(inputs: Any) -> tuple[np.ndarray, np.ndarray]:
    return v3.reversed_3d(inputs) if v3.is_3d(inputs) else _turn(inputs, reverse=True)


def _class_angles(inputs: Any, where: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The class tokens' learned angles left out (``"dropped"``: those tokens unrotated) or concatenated after the
    patches' (``"after"``: token ``i`` turned by the angles of token ``(i + P) mod (P + N)`` of the call, computed
    as the call's rotation of ``x`` moved down by ``P`` tokens, moved back)."""
    if v3.is_3d(inputs) or inputs.prefix_angles is None:
        return None
    given = inputs.prefix_angles
    if where == "dropped":
        return rotate(inputs.x, inputs.positions, inputs.rope, prefix_angles=np.zeros_like(given))
    prefix = given.shape[0]
    out, bound = _turn(replace(inputs, x=np.roll(inputs.x, prefix, axis=-2)))
    return np.roll(out, -prefix, axis=-2), np.roll(bound, -prefix, axis=-2)


VISION_ROPE_MISTAKES: tuple[KindMistake, ...] = (
    KindMistake("axes_swapped", "the row and the column exchanged: each pair reads the other coordinate (Llama 4's "
                "w-first order taken for h-first, or the reverse)", _axes_swapped),
    KindMistake("layout_swapped", "pairs (2j, 2j + 1) where the form pairs (j, j + D/2), or the reverse "
                "(Llama 4's complex form read as rotate_half)", _other_layout),
    KindMistake("direction_reversed", "the rotation by −φ: the sign of the sine flipped", _reversed),
    KindMistake("frequencies_of_head_d", "the frequencies of one head of size D split between the axes (Pixtral's "
                "even/odd, or θ^(−k/(D/2)) for axial blocks) where the form gives each axis those of a head of "
                "size D/2", lambda i: None if v3.is_3d(i) else _confused_frequencies(
                    i, ("qwen2_vl", "mlcd", "llama4", "axial"))),
    KindMistake("frequencies_of_half_head", "Pixtral's frequencies replaced by Qwen2-VL's: each axis those of a "
                "head of size D/2 instead of the even and odd ones of a head of size D",
                lambda i: None if v3.is_3d(i) else _confused_frequencies(i, ("pixtral",))),
    KindMistake("positions_from_one", "every coordinate one too large: counted from 1 where the call counts "
                "from 0 (Llama 4's + 1 added twice, or to a 0-based form)", lambda i: _shifted(i, 1)),
    KindMistake("positions_from_zero", "every coordinate one too small: a 1-based call's coordinates counted from 0 "
                "(Llama 4's + 1 left out), a class token at (0, 0) kept there", lambda i: _shifted(i, -1)),
    KindMistake("cls_rotated", "Llama 4's class token rotated as the first patch (1, 1): the masked_fill that "
                "zeroes ID_CLS_TOKEN's angles left out", _cls_rotated),
    KindMistake("prefix_misaligned", "DINOv3's patch angles applied from the first token: the class and register "
                "tokens turned as the first patches, the last patches left unrotated", _prefix_misaligned),
    KindMistake("theta_default", "θ = 10000 (the default) where the call's θ is another", _theta_default),
    KindMistake("class_angles_dropped", "the class token's learned angles left out: the token before the patches "
                "left unrotated (MLCD's class_pos_emb not concatenated)", lambda i: _class_angles(i, "dropped")),
    KindMistake("class_angles_after_patches", "the class token's learned angles concatenated after the patches': "
                "the class token turned by the first patch's angles, each patch by the next one's",
                lambda i: _class_angles(i, "after")),
    KindMistake("frame_ignored", "a 3-D form's frame index taken as 0: every frame rotated as the first (a 2-D "
                "tower's positions)", lambda i: v3.frame_ignored(i) if v3.is_3d(i) else None),
    KindMistake("frame_row_swapped", "a 3-D form's frame and row exchanged: the frame's block turned by the row, "
                "the row's by the frame", lambda i: v3.axes_moved(i, "frame_row_swapped") if v3.is_3d(i) else None),
    KindMistake("frame_last", "a 3-D form's blocks in the order (h, w, t) where the form has (t, h, w): the frame "
                "appended after a 2-D tower's row and column", lambda i: v3.axes_moved(i, "frame_last")
                if v3.is_3d(i) else None),
    KindMistake("frequencies_of_whole_head", "a 3-D form's axes given the frequencies of the whole head, "
                "θ^(−2k/D), where each axis has those of its d = 2⌊⌊D/3⌋/2⌋ channels, θ^(−2k/d)",
                lambda i: v3.whole_head_frequencies(i) if v3.is_3d(i) else None),
    KindMistake("axis_blocks_split", "MiniMax-M3-VL's rotated channels cut into one rotate_half block per axis "
                "(V-JEPA 2's split) where the form pairs (j, j + 3n) across the three axes",
                lambda i: v3.blocks_split(i) if v3.is_3d(i) else None),
    KindMistake("pair_angles_interleaved", "V-JEPA 2's adjacent channels (2k, 2k + 1) turned by one angle p·ω_k (the "
                "table repeated element by element, a true rotation) where the model turns them by ω_(2k mod n) "
                "and ω_(2k+1 mod n)", lambda i: v3.angles_interleaved(i) if v3.is_3d(i) else None),
)


def identify_vision_rope(candidate: Any, inputs: Any) -> str | None:
    """The catalogued mistake ``candidate`` matches, or ``None`` (a correct port, or an output no mistake explains),
    for a 2-D call (:class:`VisionRopeInputs`) or a 3-D one
    (:class:`~refpos.rope.vision3d_mistakes.VisionRope3DInputs`).

    See Also
    --------
    refpos.mistake_match.identify_output : the rule: the reference's bound first, then each mistake's.
    """
    return identify_output(candidate, inputs.reference(), VISION_ROPE_MISTAKES, inputs)


__all__ = ["CONFUSED_FREQUENCIES", "DEFAULT_THETA", "U32", "VISION_ROPE_MISTAKES", "VisionRopeInputs",
           "identify_vision_rope", "rotate", "token_bound"]
