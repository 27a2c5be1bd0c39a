r"""The catalogued mistakes of vision RoPE, the kind's bound, and an identifier (docs/vision-rope.md#mistakes).

A call is :func:`refpos.rope.vision.apply_vision_rope` of patch vectors ``x`` ``(..., N, D)`` at integer
coordinates ``positions`` ``(..., N, n)`` (DINOv3's: real, its class and register tokens first at (0, 0)) with one
:class:`~refpos.rope.vision.VisionRope`; every mistake is that same rotation with one step changed, computed by the
formula module on changed inputs (coordinates, θ, the form's frequencies), on ``x`` with its channels moved (the
other pair layout) or its second pair members negated (the rotation by −φ: ``R(−φ) = S·R(φ)·S`` with ``S`` the sign
of ``v``).

**Bound.** A correct port may compute in float32 (``u = 2⁻²⁴``). Each output channel is a member of one pair
``(u, v)`` rotated by ``φ = p·ω``:

* the frequency ``ω = θ^(−e)``: the exponent ``e ≤ 1`` rounded (``u·|ln θ|`` relative in ``ω``), the power within
  two ulps, Qwen2-VL's reciprocal ``1/θ^e`` one more: ``(|ln θ| + 3)·u`` relative;
* the angle: an integer coordinate is exact in float32 (``|p| < 2²⁴``), DINOv3's patch centre
  ``(2i + 1)/n − 1 ∈ [−1, 1]`` within ``4u`` absolute (its sum, division and difference, or its float64 value
  stored), and its ``2π`` one rounding more of ``ω``; the product ``p·ω`` one rounding, so
  ``|Δφ| ≤ (|ln θ| + 5)·u·|φ| + 4u·ω``: the error grows with the angle, the largest at the largest coordinate of
  the fastest pair (``ω₀ = 1``, DINOv3's ``2π``); SAM 3's scaled coordinate ``p·s`` (the scale rounded, the
  product) adds ``2u·|φ|``;
* ``cos φ`` and ``sin φ`` (1-Lipschitz): ``|Δφ|`` plus their evaluation and storage, ``2u``;
* ``x`` stored in float32 (``u·|x|``), the two products and the sum of ``u' = u cos φ − v sin φ`` (and of
  ``v'``) three roundings: with ``|u'| ≤ |u| + |v|``, ``|Δu'| ≤ (|u| + |v|)·(|Δφ| + 5u)``.

So ``|Δu'| ≤ u·(|u| + |v|)·((|ln θ| + 5)·|φ| + 4ω + 5)``. With a margin of one ``u·|φ|`` and one ``u``, and per
token (``|u| + |v| ≤ 2·max_c |x_c|``, ``|φ| ≤ φ_max``, the token's largest angle; ``ω ≤ ω_max``, the fastest):

.. math:: \beta_t = u\cdot 2\max_c |x_{t,c}|\cdot\bigl((|\ln\theta| + 6 + 2[\mathrm{sam3}])\,\varphi_{\max,t}
    + 4\,\omega_{\max} + 6\bigr)

one bound for every channel of token ``t``. A mistake's output is matched within the bound of its own angles
(its coordinates, θ and frequencies): the same computation with one step changed admits the same rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from refpos.mistake_match import KindMistake, as_float64, identify_output
from refpos.pairs import split_pairs
from refpos.rope.vision import (
    REAL_COORDINATES,
    VisionRope,
    apply_vision_rope,
    vision_angles,
    vision_frequencies,
    vision_place_pairs,
    vision_split_pairs,
)
from refpos.validation import as_positions

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24
#: θ the forms default to (transformers' vision towers, rotary-embedding-torch, timm)
DEFAULT_THETA = 10000.0
#: the form whose frequencies a port of a named form confuses them with: Qwen2-VL's, MLCD's and Llama 4's (a head
#: of size D/2 per axis) with Pixtral's (one head of size D, split even/odd between the axes), and the reverse
CONFUSED_FREQUENCIES = {"qwen2_vl": "pixtral", "mlcd": "pixtral", "llama4": "pixtral", "pixtral": "qwen2_vl"}


@dataclass(frozen=True)
class VisionRopeInputs:
    """One call of ``apply_vision_rope``: ``x`` ``(..., N, D)`` float64, ``positions`` ``(..., N, n)`` int64
    (float64 for ``dinov3``; broadcast against ``x``'s leading axes) and the RoPE.

    Raises
    ------
    TypeError
        ``rope`` not a :class:`~refpos.rope.vision.VisionRope`, float ``positions``.
    ValueError
        ``x`` or ``positions`` of a shape the RoPE does not take, negative ``positions``, non-finite ``x``.
    """

    x: np.ndarray
    positions: np.ndarray
    rope: VisionRope

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
        if angles.shape[-2] != x.shape[-2]:
            raise ValueError(f"positions must have x's N = {x.shape[-2]} rows (..., N, {self.rope.n_axes}), got "
                             f"{positions.shape}")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "positions", positions)

    def output(self) -> np.ndarray:
        """The reference: :func:`~refpos.rope.vision.apply_vision_rope`, float64."""
        return as_float64(apply_vision_rope(self.x, self.positions, self.rope))

    def bound(self) -> np.ndarray:
        """The module docstring's ``β_t``, ``(..., N, 1)`` (broadcast over the channels)."""
        return token_bound(self.x, self.positions, self.rope)

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        return self.output(), self.bound()


def token_bound(x: np.ndarray, positions: np.ndarray, rope: VisionRope) -> np.ndarray:
    r"""``β_t = u·2·max_c|x_{t,c}|·((|ln θ| + 6 + 2[sam3])·φ_max,t + 4·ω_max + 6)``, ``(..., N, 1)``: what a
    float32 port of the rotation of ``x`` at ``positions`` may differ by (module docstring)."""
    angles = np.abs(as_float64(vision_angles(positions, rope, xp=np)))  # (..., N, D/2)
    phi_max = angles.max(axis=-1, keepdims=True)
    omega_max = float(np.max(vision_frequencies(rope)[1]))
    magnitude = 2.0 * np.abs(x).max(axis=-1, keepdims=True)  # |u| + |v| of any pair of the token
    scaled = 2.0 if rope.kind == "sam3" else 0.0  # SAM 3's coordinate p·s: 2u relative
    return U32 * magnitude * ((abs(math.log(rope.theta)) + 6.0 + scaled) * phi_max + 4.0 * omega_max + 6.0)


def rotate(x: np.ndarray, positions: np.ndarray, rope: VisionRope, *, layout: str | None = None,
           reverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The rotation of ``rope`` at ``positions`` with its pairs read and written in ``layout`` over the whole head
    (the form's own when ``None``: Gemma 4's one span per axis) and by ``−φ`` when ``reverse``, and its bound:
    :func:`~refpos.rope.vision.apply_vision_rope` on ``x`` with the port's pair ``j`` moved onto the form's pair
    ``j`` (channel lists of :func:`~refpos.rope.vision.vision_split_pairs` and :func:`refpos.pairs.split_pairs`)
    and, reversed, its ``v`` members negated before and after."""
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
    out = as_float64(apply_vision_rope(moved, positions, rope)) * sign
    return np.ascontiguousarray(out[..., back]), token_bound(x, positions, rope)


def _other_layout(inputs: VisionRopeInputs) -> tuple[np.ndarray, np.ndarray]:
    """The other pairing over the whole head; for Gemma 4's one half-layout span per axis, the half layout over the
    whole head (``rotate_half`` of the head)."""
    if inputs.rope.blocks > 1:
        return rotate(inputs.x, inputs.positions, inputs.rope, layout=inputs.rope.layout)
    layout = "interleaved" if inputs.rope.layout == "half" else "half"
    return rotate(inputs.x, inputs.positions, inputs.rope, layout=layout)


def _axes_swapped(inputs: VisionRopeInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """h and w exchanged (the last two coordinates: (t, h, w) → (t, w, h) for a 3-axis call)."""
    if inputs.rope.n_axes < 2:
        return None
    order = list(range(inputs.rope.n_axes))
    order[-2:] = order[-1], order[-2]
    return rotate(inputs.x, inputs.positions[..., order], inputs.rope)


def _confused_frequencies(inputs: VisionRopeInputs, wanted: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray] | None:
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
        return rotate(inputs.x, inputs.positions, replace(rope, theta=rope.theta ** (1.0 / len(rope.sections))))
    other = VisionRope(CONFUSED_FREQUENCIES[rope.kind], rope.head_dim, theta=rope.theta)  # h then w, half
    positions = inputs.positions[..., ::-1] if rope.kind == "llama4" else inputs.positions  # Llama 4: w then h
    return rotate(inputs.x, positions, other, layout=rope.layout)


def _shifted(inputs: VisionRopeInputs, by: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Every coordinate ``+ 1`` (``by = 1``), or, for a 1-based call (every token other than a class token at the
    origin has coordinates ≥ 1), ``− 1`` with the class token kept at the origin."""
    positions = inputs.positions
    if by > 0:
        return rotate(inputs.x, positions + 1, inputs.rope)
    patch = np.any(positions != 0, axis=-1, keepdims=True)  # (..., N, 1): not the class token
    if not bool(patch.any()) or bool(np.any(patch & (positions < 1))):
        return None
    return rotate(inputs.x, np.where(patch, positions - 1, positions), inputs.rope)


def _cls_rotated(inputs: VisionRopeInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """Llama 4's class token (coordinates (0, 0)) rotated as the first patch, (1, 1)."""
    cls = np.all(inputs.positions == 0, axis=-1, keepdims=True)
    if inputs.rope.kind != "llama4" or not bool(cls.any()):
        return None
    return rotate(inputs.x, np.where(cls, 1, inputs.positions), inputs.rope)


def _prefix_misaligned(inputs: VisionRopeInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """DINOv3's patch coordinates applied from the first token: its ``P`` leading tokens at (0, 0) (the class and
    register tokens) turned as the first patches, the last ``P`` patches left unrotated."""
    if inputs.rope.kind != "dinov3":
        return None
    rows = np.all(inputs.positions == 0, axis=-1).reshape(-1, inputs.positions.shape[-2])  # (batch, N)
    prefix = int(np.argmin(rows[0])) if not bool(rows[0].all()) else rows.shape[1]  # leading rows at (0, 0)
    if prefix in (0, rows.shape[1]) or not bool(np.all(rows[:, :prefix])):
        return None
    return rotate(inputs.x, np.roll(inputs.positions, -prefix, axis=-2), inputs.rope)


def _theta_default(inputs: VisionRopeInputs) -> tuple[np.ndarray, np.ndarray] | None:
    if inputs.rope.theta == DEFAULT_THETA:
        return None
    return rotate(inputs.x, inputs.positions, replace(inputs.rope, theta=DEFAULT_THETA))


VISION_ROPE_MISTAKES: tuple[KindMistake, ...] = (
    KindMistake("axes_swapped", "the row and the column exchanged: each pair reads the other coordinate (Llama 4's "
                "w-first order taken for h-first, or the reverse)", _axes_swapped),
    KindMistake("layout_swapped", "pairs (2j, 2j + 1) where the form pairs (j, j + D/2), or the reverse "
                "(Llama 4's complex form read as rotate_half)", _other_layout),
    KindMistake("direction_reversed", "the rotation by −φ: the sign of the sine flipped", lambda i: rotate(
        i.x, i.positions, i.rope, reverse=True)),
    KindMistake("frequencies_of_head_d", "the frequencies of one head of size D split between the axes (Pixtral's "
                "even/odd, or θ^(−k/(D/2)) for axial blocks) where the form gives each axis those of a head of "
                "size D/2", lambda i: _confused_frequencies(i, ("qwen2_vl", "mlcd", "llama4", "axial"))),
    KindMistake("frequencies_of_half_head", "Pixtral's frequencies replaced by Qwen2-VL's: each axis those of a "
                "head of size D/2 instead of the even and odd ones of a head of size D",
                lambda i: _confused_frequencies(i, ("pixtral",))),
    KindMistake("positions_from_one", "every coordinate one too large: counted from 1 where the call counts "
                "from 0 (Llama 4's + 1 added twice, or to a 0-based form)", lambda i: _shifted(i, 1)),
    KindMistake("positions_from_zero", "every coordinate one too small: a 1-based call's coordinates counted from 0 "
                "(Llama 4's + 1 left out), a class token at (0, 0) kept there", lambda i: _shifted(i, -1)),
    KindMistake("cls_rotated", "Llama 4's class token rotated as the first patch (1, 1): the masked_fill that "
                "zeroes ID_CLS_TOKEN's angles left out", _cls_rotated),
    KindMistake("prefix_misaligned", "DINOv3's patch angles applied from the first token: the class and register "
                "tokens turned as the first patches, the last patches left unrotated", _prefix_misaligned),
    KindMistake("theta_default", "θ = 10000 (the default) where the call's θ is another", _theta_default),
)


def identify_vision_rope(candidate: Any, inputs: VisionRopeInputs) -> str | None:
    """The catalogued mistake ``candidate`` matches, or ``None`` (a correct port, or an output no mistake explains).

    See Also
    --------
    refpos.mistake_match.identify_output : the rule: the reference's bound first, then each mistake's.
    """
    return identify_output(candidate, inputs.reference(), VISION_ROPE_MISTAKES, inputs)


__all__ = ["CONFUSED_FREQUENCIES", "DEFAULT_THETA", "U32", "VISION_ROPE_MISTAKES", "VisionRopeInputs",
           "identify_vision_rope", "rotate", "token_bound"]
