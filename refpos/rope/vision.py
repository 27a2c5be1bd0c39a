r"""2-D axial RoPE of vision encoders: Qwen2-VL's vision tower, Pixtral, Llama-4's vision model, DINOv3, MLCD,
Gemma 4's vision tower, SAM 3's ViT, Step 3.5's and Kimi K2.5's towers.

An image patch at row ``h`` and column ``w`` is rotated pair by pair, each pair ``j`` reading one of the
two coordinates :math:`a(j) \in \{h, w\}` at its own frequency :math:`\omega_j`:

.. math:: \varphi_j = p_{a(j)}\,\omega_j, \qquad j = 0, \dots, D/2 - 1 ,

then ``u' = u cos φ − v sin φ``, ``v' = v cos φ + u sin φ`` as in 1-D RoPE (no attention factor). The
forms transformers 5.25 ships differ in the frequencies, the axis order, the layout, the
positions and the tokens before the patches (``D`` = head size, ``q = D/4``, ``j' = j mod q``; ``blocks``: the
head cut in two spans of ``D/2`` channels, one per axis, each in the half layout, pair ``j`` at channels
``(j, j + q)`` for ``j < q`` and ``(j + q, j + 2q)`` after):

============  ========================  ====================================  =========  ===========================
form          pairs ``j < q`` /  ``≥ q``  :math:`\omega_j`                      layout     positions
============  ========================  ====================================  =========  ===========================
``qwen2_vl``  h / w                     :math:`\theta^{-4j'/D}` (both halves)  half       0-based, merge blocks
``pixtral``   h / w                     :math:`\theta^{-2(2j' + [j \ge q])/D}`  half       0-based, row-major
``llama4``    w / h                     :math:`\theta^{-4j'/D}`                interleaved 1-based, CLS (0, 0)
``dinov3``    h / w                     :math:`2\pi\,\theta^{-4j'/D}`          half       centres, prefix (0, 0)
``mlcd``      h / w                     :math:`\theta^{-4j'/D}`                half       0-based, row-major; CLS given
``gemma4``    w / h                     :math:`\theta^{-4j'/D}`                blocks     0-based, row-major
``sam3``      w / h                     :math:`\theta^{-4j'/D}`                interleaved real: window-local or scaled
``step3p7``   w / h                     :math:`\theta^{-4j'/D}`                half       0-based, row-major
``kimi_k25``  w, h alternating          :math:`\theta^{-4\lfloor j/2\rfloor/D}`  half       0-based, row-major
============  ========================  ====================================  =========  ===========================

* ``qwen2_vl``: ``Qwen2VLVisionRotaryEmbedding`` (also the vision towers of Qwen2.5-VL, Qwen3-VL and
  GLM-4.1V, whose rotary modules compute the same), ``transformers/models/qwen2_vl/modeling_qwen2_vl.py``.
  Both coordinates use the frequencies of a head of size ``D/2``. Patches come in ``k × k`` merge blocks
  (:func:`qwen_patch_positions`).
* ``pixtral``: ``PixtralVisionRotaryEmbedding`` (``models/pixtral/modeling_pixtral.py``): the
  frequencies of a head of size ``D``, the even ones for ``h``, the odd ones for ``w``.
* ``llama4``: ``Llama4VisionRotaryEmbedding`` (``models/llama4/modeling_llama4.py``): complex form on
  adjacent channels; the first quarter of pairs reads the column, the rest the row; coordinates count
  from 1 and the class token, last in the sequence, sits at (0, 0): no rotation
  (:func:`llama4_patch_positions`).
* ``dinov3``: ``DINOv3ViTRopePositionEmbedding`` (``models/dinov3_vit/modeling_dinov3_vit.py``): the
  coordinates are real, each patch's centre scaled to [−1, 1] (:func:`dinov3_patch_positions`); the class and
  register tokens before the patches are not rotated (coordinates (0, 0)). Its training-time shift, jitter and
  rescale of the coordinates are not applied in eval.
* ``mlcd``: ``MLCDRotaryEmbedding`` (``models/mlcd/modeling_mlcd.py``): Qwen2-VL's frequencies on row-major
  0-based patches; the class token before them turns pair ``j`` by a learned angle ``α_j`` (the checkpoint's
  ``class_pos_emb``), given to :func:`apply_vision_rope` as ``prefix_angles``.
* ``step3p7``: ``Step3p7VisionRotaryEmbedding`` (``models/step3p7/modeling_step3p7.py``, Step 3.5's tower):
  Qwen2-VL's frequencies and layout with the column's angles before the row's, patches row-major.
* ``kimi_k25``: ``Kimi_K25VisionRotaryEmbedding`` (``models/kimi_k25/modeling_kimi_k25.py``): Qwen2-VL's
  ``D/4`` frequencies, each read by two consecutive pairs, the column's then the row's (pair ``2k`` turns by
  :math:`w\,\theta^{-4k/D}`, pair ``2k + 1`` by :math:`h\,\theta^{-4k/D}`), half layout, patches row-major.

Qwen2-VL's frequencies also serve towers that read the patches row-major whatever their merge size (PaddleOCR-VL's:
the token order is the tower record's, :mod:`refpos.models.kinds.vision_rope`).

Positions are ``(..., N, 2)`` int arrays, last axis ``(h, w)`` (transformers' order); where each form puts a
patch is :mod:`refpos.rope.vision_positions` (its functions are importable from here too).

**Axial** (``kind="axial"``), the form vision and video libraries build (rotary-embedding-torch's
``get_axial_freqs``, timm's ``RotaryEmbeddingCat``, 3-D video RoPE such as Wan's t, h, w split): the pairs
are cut into one contiguous block per axis, ``sections = (s_0, …, s_{n−1})`` pairs with
:math:`\sum_a s_a = D/2`, and block ``a`` is the 1-D RoPE of a head of ``2 s_a`` channels on coordinate
``a``: pair ``k`` of the block turns by :math:`p_a\,\theta^{-k/s_a}`. Positions are ``(..., N, n)``, in
the order of the sections; the layout (``half`` or ``interleaved``) is the library's. ``qwen2_vl`` is the
axial form with sections ``(D/4, D/4)`` in the half layout, ``llama4`` the same sections in the
interleaved layout with the coordinates in the order ``(w, h)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace
from refpos.pairs import place_pairs, split_pairs
from refpos.rope.vision_positions import dinov3_patch_positions as dinov3_patch_positions
from refpos.rope.vision_positions import llama4_patch_positions as llama4_patch_positions
from refpos.rope.vision_positions import pixtral_patch_positions as pixtral_patch_positions
from refpos.rope.vision_positions import qwen_patch_positions as qwen_patch_positions
from refpos.rope.vision_positions import sam3_patch_positions as sam3_patch_positions
from refpos.rope.vision_positions import window_patch_positions as window_patch_positions
from refpos.validation import as_positions, check_choice, check_float, check_int, floating_array

#: the forms of the spec contract (``apply_vision_rope``, integer grid coordinates, every token a patch): Qwen2-VL's,
#: Pixtral's, Llama 4's, and the axial blocks of any number of axes
VISION_ROPES = ("qwen2_vl", "pixtral", "llama4", "axial")
#: the forms refpos models beyond the contract: real coordinates (DINOv3), tokens before the patches turned by
#: given angles (``prefix_angles``: DINOv3's zero, MLCD's learned class angles)
VISION_ROPES_PREFIXED = ("dinov3", "mlcd")
#: the forms refpos models beyond the contract without tokens before the patches: Gemma 4's one half-layout span per
#: axis, SAM 3's real window-local or scaled coordinates, Step 3.5's column-first half layout, Kimi K2.5's column and
#: row alternating pair by pair
VISION_ROPES_MORE = ("gemma4", "sam3", "step3p7", "kimi_k25")
_LAYOUT = {"qwen2_vl": "half", "pixtral": "half", "llama4": "interleaved", "dinov3": "half", "mlcd": "half",
           "gemma4": "half", "sam3": "interleaved", "step3p7": "half", "kimi_k25": "half"}
#: the forms whose head is cut into one span per axis, each written in the layout (the others: one span)
_BLOCKS = {"gemma4": 2}
#: the forms whose coordinates are real numbers, not indices
REAL_COORDINATES = ("dinov3", "sam3")
#: the forms whose columns come first (pairs j < D/4 read the column)
_COLUMN_FIRST = ("llama4", "gemma4", "sam3", "step3p7")
#: the layouts an axial vision RoPE may write its pairs in
AXIAL_LAYOUTS = ("half", "interleaved")
#: the forms on integer patch indices whose towers may count them from another start (Muse: 1, Inkling2: 1)
INDEX_FORMS = ("qwen2_vl", "pixtral", "llama4", "step3p7", "kimi_k25")
#: the forms whose towers lay their patches out in merge blocks (a tower may read them in raster order instead)
MERGE_BLOCK_FORMS = ("qwen2_vl",)
#: the forms on row-major patches (a tower may reorder them window by window before its layers)
ROW_MAJOR_FORMS = ("pixtral", "step3p7", "kimi_k25")


@dataclass(frozen=True)
class VisionRope:
    """One vision RoPE: its form (:data:`VISION_ROPES`, :data:`VISION_ROPES_PREFIXED`), head size ``D`` and θ;
    for ``axial`` also the pairs per axis (``sections``, summing to ``D/2``) and the layout (``half`` or
    ``interleaved``)."""

    kind: str
    head_dim: int
    theta: float = 10000.0
    sections: tuple[int, ...] | None = None
    axial_layout: str = "half"

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, VISION_ROPES + VISION_ROPES_PREFIXED + VISION_ROPES_MORE)
        head_dim = check_int("head_dim", self.head_dim, minimum=2 if self.kind == "axial" else 4)
        object.__setattr__(self, "theta", check_float("theta", self.theta, positive=True))
        if self.kind != "axial":
            if head_dim % 4:
                raise ValueError(f"head_dim must be a multiple of 4 for 2-D RoPE (a quarter of the pairs per "
                                 f"half), got {head_dim}")
            if self.sections is not None:
                raise ValueError(f"sections are the axial form's; the {self.kind} form fixes its own")
            return
        check_choice("axial_layout", self.axial_layout, AXIAL_LAYOUTS)
        if head_dim % 2:
            raise ValueError(f"head_dim must be even (pairs), got {head_dim}")
        if self.sections is None or isinstance(self.sections, (str, bytes)):
            raise ValueError("the axial form needs sections: the pairs of each axis, summing to head_dim/2")
        sections = tuple(check_int(f"sections[{a}]", s, minimum=1) for a, s in enumerate(self.sections))
        if not 1 <= len(sections) <= 4 or sum(sections) != head_dim // 2:
            raise ValueError(f"sections must be 1 to 4 positive pair counts summing to head_dim/2 = {head_dim // 2}, "
                             f"got {list(sections)}")
        object.__setattr__(self, "sections", sections)

    @property
    def layout(self) -> str:
        """``"half"`` (pairs ``(j, j + D/2)``) or ``"interleaved"`` (pairs ``(2j, 2j + 1)``)."""
        return self.axial_layout if self.kind == "axial" else _LAYOUT[self.kind]

    @property
    def blocks(self) -> int:
        """The spans the head is cut into, each written in :attr:`layout`: 2 for ``gemma4`` (one per axis), else 1."""
        return _BLOCKS.get(self.kind, 1)

    @property
    def n_axes(self) -> int:
        """The coordinates per position: 2 for the named forms, ``len(sections)`` for ``axial``."""
        return len(self.sections) if self.kind == "axial" and self.sections is not None else 2


def vision_frequencies(rope: VisionRope) -> tuple[tuple[int, ...], np.ndarray]:
    r"""``(a, ω)``: the coordinate each pair reads (0 = h, 1 = w) and its frequency, ``D/2`` each.

    Notes
    -----
    With :math:`q = D/4`, :math:`j' = j \bmod q`, :math:`b = [j \ge q]`: ``qwen2_vl``
    :math:`a = b,\ \omega_j = \theta^{-4j'/D}`; ``pixtral`` :math:`a = b,\ \omega_j = \theta^{-2(2j'+b)/D}`;
    ``llama4``, ``gemma4``, ``sam3``, ``step3p7`` :math:`a = 1 - b,\ \omega_j = \theta^{-4j'/D}`; ``kimi_k25``
    :math:`a = 1 - (j \bmod 2),\ \omega_j = \theta^{-4\lfloor j/2\rfloor/D}`; ``dinov3``
    :math:`a = b,\ \omega_j = 2\pi\,\theta^{-4j'/D}` (coordinates in [−1, 1]); ``mlcd`` as ``qwen2_vl``; ``axial``
    with sections :math:`s_a`: pair ``k`` of block ``a`` reads coordinate ``a`` at :math:`\omega = \theta^{-k/s_a}`.
    """
    if rope.kind == "axial":  # block a: pair k turns by p_a·θ^(−k/s_a)
        assert rope.sections is not None
        axes = tuple(a for a, count in enumerate(rope.sections) for _ in range(count))
        k = np.concatenate([np.arange(count) for count in rope.sections]).astype(np.float64)  # index in the block
        per_block = np.concatenate([np.full(count, float(count)) for count in rope.sections])  # s_a of each pair
        return axes, rope.theta ** (-k / per_block)
    quarter = rope.head_dim // 4
    j = np.arange(2 * quarter)  # (D/2,) pair index
    if rope.kind == "kimi_k25":  # a = 1 − (j mod 2), ω_j = θ^(−4⌊j/2⌋/D): each frequency the column's, then the row's
        return tuple(int(a) for a in 1 - j % 2), rope.theta ** (-4.0 * (j // 2) / rope.head_dim)
    second = (j >= quarter).astype(np.int64)  # b = [j ≥ q]
    j_in = j % quarter  # j'
    if rope.kind == "pixtral":
        exponents = 2.0 * (2 * j_in + second) / rope.head_dim  # 2(2j' + b)/D
    else:
        exponents = 4.0 * j_in / rope.head_dim  # 4j'/D: a head of size D/2 per coordinate
    axes = 1 - second if rope.kind in _COLUMN_FIRST else second
    if rope.kind == "dinov3":  # ω_j = 2π·θ^(−4j'/D) on coordinates in [−1, 1]
        return tuple(int(a) for a in axes), 2.0 * np.pi * rope.theta ** (-exponents)
    return tuple(int(a) for a in axes), rope.theta ** (-exponents)


def _check_positions(positions: Any, rope: VisionRope, xp: Any = None) -> Array:
    if rope.kind in REAL_COORDINATES:  # real coordinates (patch centres in [−1, 1], scaled indices), not indices
        positions = floating_array(positions, name="positions", xp=xp)
        if not bool(array_namespace(positions).all(array_namespace(positions).isfinite(positions))):
            raise ValueError("positions must be finite coordinates")
    else:
        positions = as_positions(positions, xp=xp, allow_negative=rope.kind == "gemma4")  # Gemma 4's padding: −1
    n = rope.n_axes
    if positions.ndim < 2 or positions.shape[-1] != n:
        order = "(h, w)" if rope.kind != "axial" else f"one coordinate per section ({n})"
        raise ValueError(f"positions must have shape (..., N, {n}), last axis {order}; got {tuple(positions.shape)}")
    return positions


def vision_angles(positions: Any, rope: VisionRope, *, xp: Any = None) -> Array:
    r"""Angles :math:`\varphi_j = p_{a(j)}\,\omega_j`, ``(..., N, D/2)`` float64, for positions ``(..., N, n)``
    (ints; for ``dinov3`` and ``sam3`` real coordinates)."""
    if not isinstance(rope, VisionRope):
        raise TypeError(f"rope must be a VisionRope, got {type(rope).__name__}")
    positions = _check_positions(positions, rope, xp)
    ns = array_namespace(positions)
    axes, inv_freq = vision_frequencies(rope)
    per_pair = ns.take(positions, ns.asarray(axes, dtype=ns.int64), axis=-1)  # (..., N, D/2): p_{a(j)}
    return ns.astype(per_pair, ns.float64) * ns.asarray(inv_freq, dtype=ns.float64)  # φ_j, float64


def vision_cos_sin(positions: Any, rope: VisionRope, *, xp: Any = None) -> tuple[Array, Array]:
    """``cos φ`` and ``sin φ`` in the layout's channel order, ``(..., N, D)`` each (transformers' tables)."""
    angles = vision_angles(positions, rope, xp=xp)
    ns = array_namespace(angles)
    cos, sin = ns.cos(angles), ns.sin(angles)  # (..., N, D/2)
    return vision_place_pairs(cos, cos, rope), vision_place_pairs(sin, sin, rope)  # (..., N, D)


def vision_split_pairs(x: Any, rope: VisionRope) -> tuple[Array, Array]:
    """``(u, v)``, ``(..., D/2)`` each: pair ``j``'s two channels of ``x`` ``(..., D)`` in the form's layout, span by
    span (:attr:`VisionRope.blocks`): span ``b`` of ``D/B`` channels holds pairs ``b·D/(2B) …``."""
    ns = array_namespace(x)
    width = rope.head_dim // rope.blocks
    parts = [split_pairs(x[..., b * width:(b + 1) * width], rope.layout) for b in range(rope.blocks)]
    return ns.concat([u for u, _ in parts], axis=-1), ns.concat([v for _, v in parts], axis=-1)


def vision_place_pairs(u: Any, v: Any, rope: VisionRope) -> Array:
    """``(..., D)``: per-pair values ``u``, ``v`` ``(..., D/2)`` written in the form's layout, span by span (the
    inverse of :func:`vision_split_pairs`)."""
    ns = array_namespace(u)
    per = rope.head_dim // (2 * rope.blocks)
    return ns.concat([place_pairs(u[..., b * per:(b + 1) * per], v[..., b * per:(b + 1) * per], rope.layout)
                      for b in range(rope.blocks)], axis=-1)


def _prefix(prefix_angles: Any, angles: Array, rope: VisionRope) -> Array:
    """``(..., P, D/2)`` float64 angles of the ``P`` tokens before the patches, broadcast to ``angles``' batch."""
    ns = array_namespace(angles)
    given = floating_array(prefix_angles, name="prefix_angles", xp=ns)
    if given.ndim != 2 or given.shape[-1] != rope.head_dim // 2:
        raise ValueError(f"prefix_angles must have shape (P, head_dim/2 = {rope.head_dim // 2}), got "
                         f"{tuple(given.shape)}")
    if not bool(ns.all(ns.isfinite(given))):
        raise ValueError("prefix_angles must be finite")
    given = ns.astype(given, ns.float64)
    return ns.broadcast_to(given, (*angles.shape[:-2], *given.shape))


def apply_vision_rope(x: Any, positions: Any, rope: VisionRope, *, prefix_angles: Any = None) -> Array:
    r"""Rotate patch vectors ``x`` ``(..., P + N, D)`` by their positions ``(..., N, n)`` (broadcast; n = 2, or the
    axial form's number of sections).

    Parameters
    ----------
    x : array
        ``(..., P + N, D)``: the ``P`` tokens before the patches (none unless ``prefix_angles``), then the ``N``
        patches.
    positions : array
        ``(..., N, n)`` coordinates of the patches (ints; real coordinates for ``dinov3`` and ``sam3``).
    rope : VisionRope
        The form, head size and θ.
    prefix_angles : array, optional
        ``(P, D/2)`` angles the ``P`` tokens before the patches turn their pairs by, given rather than computed:
        MLCD's class token turns pair ``j`` by its learned ``class_pos_emb[j]``; zeros leave tokens unrotated.

    Returns
    -------
    array
        ``(..., P + N, D)``, in ``x``'s dtype; pairs ``(j, j + D/2)`` (half) or ``(2j, 2j + 1)`` (interleaved),
        every channel rotated.

    See Also
    --------
    vision_angles : the patches' angles :math:`p_{a(j)}\,\omega_j`.
    dinov3_patch_positions, qwen_patch_positions : the forms' positions.

    References
    ----------
    docs/mrope.md#vision-encoders-2-d-axial-rope.
    """
    x = floating_array(x, name="x")
    ns = array_namespace(x)
    if x.ndim < 2 or x.shape[-1] != rope.head_dim:
        raise ValueError(f"x must have shape (..., N, head_dim={rope.head_dim}), got {tuple(x.shape)}")
    angles = vision_angles(positions, rope, xp=ns)  # (..., N, D/2)
    if prefix_angles is not None:  # the tokens before the patches: φ_{p,j} = α_{p,j}, given
        angles = ns.concat([_prefix(prefix_angles, angles, rope), angles], axis=-2)  # (..., P + N, D/2)
    if angles.shape[-2] != x.shape[-2]:
        raise ValueError(f"positions {tuple(angles.shape[:-1])} + ({rope.n_axes},) (after any prefix_angles) must "
                         f"end in x's N axis, x has shape {tuple(x.shape)}")
    cos, sin = ns.astype(ns.cos(angles), x.dtype), ns.astype(ns.sin(angles), x.dtype)  # (..., N, D/2)
    u, v = vision_split_pairs(x, rope)  # (..., N, D/2) each
    u_out, v_out = u * cos - v * sin, v * cos + u * sin  # u' = u cos φ − v sin φ, v' = v cos φ + u sin φ
    return vision_place_pairs(u_out, v_out, rope)  # (..., N, D)


def apply_vision_rope_frames(x: Any, positions: Any, rope: VisionRope, frames: Any, *, prefix_angles: Any
                             ) -> Array:
    r"""Rotate packed frames whose patches each follow their own tokens turned by given angles: ``x``
    ``(..., F·P + N, D)`` holds, for each frame ``f`` of ``frames[f]`` patches, its ``P`` tokens and then its patches;
    ``positions`` ``(..., N, n)`` the patches' coordinates, frame after frame.

    Each frame is :func:`apply_vision_rope` of its ``P + n_f`` tokens with ``prefix_angles``: token ``p`` of a
    frame's prefix turns pair ``j`` by :math:`\alpha_{p,j}`, every frame's alike (LLaVA-OneVision-1.5's class token
    before each image or video frame, turned by its learned ``class_pos_emb``).

    Parameters
    ----------
    x : array
        ``(..., F·P + N, D)``: frame by frame, the ``P`` prefix tokens then the frame's patches.
    positions : array
        ``(..., N, n)`` coordinates of the patches, frame after frame.
    rope : VisionRope
        The form, head size and θ.
    frames : sequence of int
        The patches of each frame, summing to ``N``.
    prefix_angles : array
        ``(P, D/2)`` angles of each frame's prefix tokens.

    Returns
    -------
    array
        ``(..., F·P + N, D)``, in ``x``'s dtype.

    See Also
    --------
    apply_vision_rope : one frame.
    """
    x = floating_array(x, name="x")
    ns = array_namespace(x)
    lengths = [check_int(f"frames[{f}]", n, minimum=1) for f, n in enumerate(frames)]
    prefix = floating_array(prefix_angles, name="prefix_angles")
    if prefix.ndim != 2:
        raise ValueError(f"prefix_angles must have shape (P, head_dim/2), got {tuple(prefix.shape)}")
    tokens = prefix.shape[0]
    positions = _check_positions(positions, rope, ns)
    if not lengths or sum(lengths) != positions.shape[-2] or x.shape[-2] != positions.shape[-2] + tokens * len(lengths):
        raise ValueError(f"frames {lengths} must sum to positions' N = {positions.shape[-2]}, and x's token axis "
                         f"hold those and {tokens} prefix tokens per frame; x has shape {tuple(x.shape)}")
    out, start, at = [], 0, 0
    for n in lengths:  # frame f: its P tokens, then its n_f patches
        out.append(apply_vision_rope(x[..., start:start + tokens + n, :], positions[..., at:at + n, :], rope,
                                     prefix_angles=prefix))
        start, at = start + tokens + n, at + n
    return ns.concat(out, axis=-2)
