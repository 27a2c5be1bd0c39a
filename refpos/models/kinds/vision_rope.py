r"""The vision-RoPE kind: a vision tower that rotates each patch by its (h, w) — or (t, h, w) — position: the form its
code uses (:class:`VisionRopeFacts`), the layer record (:class:`VisionRopeLayer`) and the builder from the tower's
config section.

The formulas are :mod:`refpos.rope.vision` (2-D: Qwen2-VL, Pixtral, Llama 4, axial) and :mod:`refpos.rope.vision3d`
(3-D: MiniMax-M3-VL, V-JEPA 2), docs/mrope.md#vision-encoders-2-d-axial-rope. Every layer of a tower rotates its
patches with the same RoPE: head size ``head_dim``, else the width over the head count (Qwen2-VL names its width
``embed_dim``, beside an ``hidden_size`` that is the language model's); θ: the tower's ``rope_parameters`` /
``rope_theta``, else 10000 (transformers' default for each of them; V-JEPA 2 fixes it).

Tokens before the patches (``prefix``): DINOv3's class token and ``num_register_tokens`` registers, left unrotated;
MLCD's class token, turned by a learned angle per pair, the checkpoint's ``class_pos_emb`` (a weight the record
names, as a convolutional position's kernel: :func:`refpos.rope.vision.apply_vision_rope` takes it as
``prefix_angles``). DINOv3's ``pos_embed_shift``, ``pos_embed_jitter`` and ``pos_embed_rescale`` move the
coordinates in training only (``augment_patches_center_coordinates`` runs under ``self.training``): read, and
without effect on the eval positions refpos gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord, NoAttention
from refpos.rope.vision import (
    INDEX_FORMS,
    MERGE_BLOCK_FORMS,
    ROW_MAJOR_FORMS,
    VISION_ROPES,
    VISION_ROPES_MORE,
    VISION_ROPES_PREFIXED,
    VisionRope,
)
from refpos.rope.vision3d import VISION_ROPES_3D, VisionRope3D, thw_patch_positions, vjepa2_patch_positions
from refpos.rope.vision_positions import (
    dinov3_patch_positions,
    llama4_patch_positions,
    pixtral_patch_positions,
    qwen_patch_positions,
    sam3_patch_positions,
    window_patch_positions,
)
from refpos.validation import check_int

#: the keys of a tower's layer count, width and head count, the first present wins
TOWER_LAYERS = ("depth", "num_hidden_layers")
TOWER_WIDTH = ("embed_dim", "hidden_size")
TOWER_HEADS = ("num_heads", "num_attention_heads")
#: the forms with a class token before the patches -> the weight of its angles per pair (None: unrotated)
PREFIXED: dict[str, str | None] = {"dinov3": None, "mlcd": "class_pos_emb"}


@dataclass(frozen=True)
class VisionRopeFacts:
    """The form of a tower's RoPE (:data:`refpos.rope.vision.VISION_ROPES`,
    :data:`refpos.rope.vision.VISION_ROPES_PREFIXED`, :data:`refpos.rope.vision.VISION_ROPES_MORE` or
    :data:`refpos.rope.vision3d.VISION_ROPES_3D`) and, where they are not the defaults, the keys of its layer count,
    width and head count (V-JEPA 2's predictor: ``pred_num_hidden_layers``, …); ``registers``: the key of the
    register tokens between the class token and the patches (DINOv3); ``training``: keys that act in training only
    (DINOv3's coordinate augmentations), read and without effect on eval positions; ``rope_type``: the only
    ``rope_parameters.rope_type`` the rotary module takes (MLCD: ``axial``), another refused by the key's name;
    ``windows``: the keys of the window size and of the list of global layers (SAM 3: ``window_size``,
    ``global_attn_indexes``), and ``grid`` those of the image and patch size whose grid the global layers' positions
    are computed for (:func:`tower_windows`); ``class_angles``: the weight of the learned angles a class token before
    each frame's patches turns by (LLaVA-OneVision-1.5: ``class_pos_emb``, one class token per image or video
    frame), for a form that has none of its own; ``queries``: the keys of the number of learned query tokens and of
    the number of last layers they join, placed before the class token and left unrotated (EoMT-DINOv3:
    ``num_queries``, ``num_blocks``); ``conv_layers``: the key of the layer types and the type of the layers without
    attention (LFM3-VL: ``layer_types``, ``conv``: a depthwise convolution over each frame's grid, no positions);
    ``raster``: the ``qwen2_vl`` form's patches read in raster order whatever the config's ``spatial_merge_size``
    (PaddleOCR-VL's tower merges its patches after the encoder: ``get_vision_position_ids(grid_thw, 1)``);
    ``start``: the coordinate of the first row and column (Muse's towers add 1); ``window_order``: the key of the side
    of the windows the tower reorders its row-major patches in before its layers (Muse's ``pos_emb_height``:
    :func:`refpos.rope.vision_positions.window_patch_positions`), ``window_default`` its class default;
    ``class_token``: an unrotated class token before each image's patches (Inkling2: at (0, 0), its patches from
    1); ``side``: the keys of the clip size and patch size whose quotient is the side V-JEPA 2 decomposes its token
    indices along, whatever the clip fed (``crop_size``, ``patch_size``)."""

    form: str = "qwen2_vl"
    layers: tuple[str, ...] = TOWER_LAYERS
    width: tuple[str, ...] = TOWER_WIDTH
    heads: tuple[str, ...] = TOWER_HEADS
    registers: str | None = None
    training: tuple[str, ...] = ()
    rope_type: str | None = None
    windows: tuple[str, ...] = ()
    grid: tuple[str, ...] = ("image_size", "patch_size")
    class_angles: str | None = None
    queries: tuple[str, ...] = ()
    conv_layers: tuple[str, ...] = ()
    raster: bool = False
    start: int = 0
    window_order: str | None = None
    window_default: int | None = None
    class_token: bool = False
    side: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("layers", "width", "heads", "training", "windows", "grid", "queries", "conv_layers", "side"):
            value = getattr(self, name)
            if isinstance(value, (list, str)):
                object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))

    def check(self, where: str) -> None:
        check_fact(where, self.form in (*VISION_ROPES, *VISION_ROPES_PREFIXED, *VISION_ROPES_MORE, *VISION_ROPES_3D),
                   "vision_rope.form", self.form)
        check_fact(where, self.registers is None or self.form in PREFIXED, "vision_rope.registers (a form with a "
                   "class token)", self.registers)
        check_fact(where, not self.windows or (self.form == "sam3" and len(self.windows) == 2),
                   "vision_rope.windows (the sam3 form's [window size key, global layers key])", self.windows)
        check_fact(where, len(self.grid) == 2, "vision_rope.grid ([image size key, patch size key])", self.grid)
        check_fact(where, not self.queries or (self.form == "dinov3" and len(self.queries) == 2), "vision_rope.queries "
                   "(the dinov3 form's [query count key, last layers key])", self.queries)
        check_fact(where, not self.conv_layers or len(self.conv_layers) == 2, "vision_rope.conv_layers ([layer types "
                   "key, type of the layers without attention])", self.conv_layers)
        check_fact(where, self.class_angles is None or self.form not in PREFIXED, "vision_rope.class_angles (a form "
                   "without tokens of its own before the patches)", self.class_angles)
        check_fact(where, isinstance(self.raster, bool) and (not self.raster or self.form in MERGE_BLOCK_FORMS),
                   "vision_rope.raster (true or false; the qwen2_vl form's, whose patches otherwise come in merge "
                   "blocks)", self.raster)
        check_fact(where, isinstance(self.start, int) and self.start >= 0 and (
            self.start == 0 or self.form in INDEX_FORMS),
            "vision_rope.start (a count from 0 up, for a form on integer patch indices)", self.start)
        check_fact(where, isinstance(self.class_token, bool) and not (self.class_token and (
            self.class_angles is not None or self.form in PREFIXED)), "vision_rope.class_token (true or false; a "
            "form without tokens of its own before the patches, without class_angles)", self.class_token)
        check_fact(where, self.window_order is None or (self.form in ROW_MAJOR_FORMS and not self.raster),
                   "vision_rope.window_order (the key of a window side, for a row-major form)", self.window_order)
        check_fact(where, (len(self.side) == 2) == (self.form == "vjepa2"), "vision_rope.side (the vjepa2 form's "
                   "[clip size key, patch size key])", self.side)


@dataclass(frozen=True)
class VisionRopeLayer(LayerRecord):
    """A vision tower's layer: its 2-D (:class:`~refpos.rope.vision.VisionRope`) or 3-D
    (:class:`~refpos.rope.vision3d.VisionRope3D`) RoPE, applied at each patch's (h, w) or (t, h, w); ``prefix``
    tokens before the patches turned by the angles of the weight ``prefix_weight`` (None: unrotated), before each
    frame's patches where ``per_frame`` (else once, before all of them), the first ``queries`` of them learned query
    tokens (unrotated, in EoMT-DINOv3's last layers); ``window``: the
    side of the square windows a windowed layer rotates each window's patches in, at their place in the window
    (0: not windowed); ``grid`` and ``scale``: the fixed ``(rows, columns)`` grid a layer's positions are computed for
    whatever the image, each patch ``(r, c)`` at ``(r·scale, c·scale)`` (SAM 3's global layers; None: the image's
    grid, scale 1); ``raster``: the ``qwen2_vl`` form's patches row-major, not in merge blocks (PaddleOCR-VL);
    ``start``: the coordinate of the first row and column; ``window_order``: the side of the windows the row-major
    patches are reordered in, window by window (0: none; Muse's towers); ``side``: the patches a side V-JEPA 2
    decomposes its token indices along (``crop_size // patch_size``, whatever the clip fed; 0: the grid fed)."""

    rope: VisionRope | VisionRope3D
    prefix: int = 0
    prefix_weight: str | None = None
    per_frame: bool = False
    queries: int = 0
    window: int = 0
    grid: tuple[int, int] | None = None
    scale: float = 1.0
    raster: bool = False
    start: int = 0
    window_order: int = 0
    side: int = 0
    kind: ClassVar[str] = "vision_rope"

    @property
    def label(self) -> str:
        return f"vision_rope({self.rope.kind})"

    def params(self) -> dict[str, Any]:
        out = {"form": self.rope.kind, "head_dim": self.rope.head_dim, "theta": self.rope.theta,
               "axes": 3 if isinstance(self.rope, VisionRope3D) else 2}
        if self.prefix:
            out |= {"prefix": self.prefix, "prefix_angles": self.prefix_weight or "unrotated"}
        if self.per_frame:
            out["per_frame"] = True
        if self.queries:
            out["queries"] = self.queries
        if self.window:
            out["window"] = self.window
        if self.grid is not None:
            out |= {"grid": list(self.grid), "scale": self.scale}
        if self.raster:
            out["token_order"] = "raster"
        if self.start:
            out["start"] = self.start
        if self.window_order:
            out["token_order"] = f"row-major in windows of {self.window_order} × {self.window_order}"
        if self.side:
            out["side"] = self.side
        return out

    def _why_not(self) -> str:
        return ("a vision tower rotates patches by their (h, w) or (t, h, w) positions: refpos.rope.vision and "
                "refpos.rope.vision3d apply it, not the 1-D attention pipeline")

    @property
    def square(self) -> bool:
        """Whether the layer reads only square grids: Llama 4's form counted from 0 (its class token after a side²
        patches)."""
        return self.rope.kind == "llama4" and not self.start and not self.window and self.grid is None

    def patch_positions(self, grid: Sequence[int] | None = None, merge: int = 1, *, padding: int = 0,
                        ids: Any = None) -> np.ndarray:
        r"""``(N, 2)`` positions ``(h, w)`` (``(N, 3)`` ``(t, h, w)`` for a 3-D form) of the tokens after the
        ``prefix`` that the layer rotates, in the order its tower lays them out, for a clip of ``grid`` ``(t, h, w)``
        patches merged in ``merge × merge`` blocks:

        * a windowed layer: its window's places; a fixed grid: :math:`(r\,s, c\,s)` over it (``grid`` unread,
          :func:`~refpos.rope.vision_positions.sam3_patch_positions`);
        * MiniMax-M3-VL: each frame's merge blocks, ``t`` the frame; V-JEPA 2: token ``i`` of ``ids`` (default: every
          token of ``grid``) at :math:`(\lfloor i/g^2 \rfloor, \lfloor (i \bmod g^2)/g \rfloor, i \bmod g)`, ``g``
          the record's ``side`` (no grid needed), else ``h``;
        * reordered window by window (``window_order``; :func:`~refpos.rope.vision_positions.window_patch_positions`);
        * Llama 4's form from 0: a square image's patches from 1, then the class token at (0, 0); DINOv3: an image's
          patch centres in [−1, 1];
        * Qwen2-VL's form (unless ``raster``) and Llama 4's from ``start``: merge blocks; any other: row-major, every
          frame alike; Gemma 4: ``padding`` patches after them at (−1, −1);

        integer coordinates counted from the record's ``start``. A grid the form cannot read is a ``ValueError``.

        See Also
        --------
        refpos.rope.vision.apply_vision_rope, refpos.rope.vision3d.apply_vision3d_rope : rotate by them.
        """
        if self.window or self.grid is not None:
            return sam3_patch_positions(*((self.window,) * 2 if self.window else self.grid), self.scale)
        if self.rope.kind == "vjepa2" and self.side and ids is not None:  # by index alone, whatever the grid
            return vjepa2_patch_positions(ids, self.side)
        if grid is None or len(grid) != 3:
            raise ValueError(f"grid must be the (t, h, w) patches of a clip, got {grid!r}")
        t, h, w = (check_int(f"grid[{a}]", v, minimum=1) for a, v in enumerate(grid))
        form = self.rope.kind
        if padding and form != "gemma4":
            raise ValueError(f"padding: only the gemma4 form places padding patches, this layer's is {form}")
        if form == "vjepa2":
            if not self.side and h != w:
                raise ValueError(f"grid: V-JEPA 2 decomposes its tokens along a square grid, got {h} x {w}")
            return vjepa2_patch_positions(np.arange(t * h * w) if ids is None else ids, self.side or h)
        if form == "minimax_m3_vl":
            return thw_patch_positions([(t, h, w)], spatial_merge_size=merge)
        if self.window_order:
            return window_patch_positions([(t, h, w)], self.window_order, self.start)
        if self.square or form == "dinov3":
            if t != 1 or (self.square and h != w):
                raise ValueError(f"grid: the {form} form reads one {'square ' if self.square else ''}image, got "
                                 f"{(t, h, w)}")
            return llama4_patch_positions(h) if self.square else dinov3_patch_positions(h, w)
        if (form == "qwen2_vl" and not self.raster) or form == "llama4":  # merge blocks (Llama 4's from start)
            return qwen_patch_positions([(t, h, w)], merge) + self.start
        patches = np.tile(pixtral_patch_positions(h, w), (t, 1)) + self.start
        return np.concatenate([patches, np.full((padding, 2), -1, dtype=np.int64)]) if padding else patches


def tower_rope(stack: Stack) -> VisionRope | VisionRope3D:
    """The RoPE every layer of the tower rotates with (module docstring: head size, θ)."""
    view, facts = stack.view, stack.facts
    if view.has("head_dim"):
        head_dim = view.int("head_dim", minimum=4)
    else:
        width = view.count(facts.width, "width")
        heads = view.count(facts.heads, "head count")
        if width % heads:
            raise ValueError(f"{view.path}: the width {width} is not a multiple of the head count {heads}")
        head_dim = width // heads
    theta: Any = 10000.0
    params = view.value("rope_parameters") or view.value("rope_scaling") or {}
    if isinstance(params, Mapping) and params.get("rope_theta") is not None:
        theta = params["rope_theta"]
    elif view.has("rope_theta"):
        theta = view.value("rope_theta")
    if facts.rope_type is not None and isinstance(params, Mapping) \
            and params.get("rope_type", facts.rope_type) != facts.rope_type:
        raise ValueError(f"{view.path}rope_parameters.rope_type: the tower's rotary module takes only "
                         f"{facts.rope_type!r} (it raises otherwise), got {params.get('rope_type')!r}")
    if facts.form in VISION_ROPES_3D:
        return VisionRope3D(facts.form, head_dim, theta=theta)
    return VisionRope(facts.form, head_dim, theta=theta)


def tower_prefix(stack: Stack) -> tuple[int, str | None]:
    """The tokens before the patches and the weight of their angles (module docstring): DINOv3's class token and
    registers (unrotated), MLCD's class token (``class_pos_emb``), a class token of the fact ``class_angles`` (before
    each frame: :attr:`VisionRopeLayer.per_frame`), an unrotated one before each image (fact ``class_token``); none
    for the other forms."""
    view, facts = stack.view, stack.facts
    for key in facts.training:  # training-only augmentations: read, no effect in eval
        view.value(key)
    if facts.class_angles is not None:
        return 1, facts.class_angles
    if facts.class_token:  # before each image, unrotated
        return 1, None
    if facts.form not in PREFIXED:
        return 0, None
    registers = 0 if facts.registers is None else view.int(facts.registers, 0, minimum=0)
    return 1 + registers, PREFIXED[facts.form]


def _side(value: Any, name: str) -> tuple[int, int]:
    """``(rows, columns)`` of a size given as one int (square) or ``[height, width]``."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return check_int(f"{name}[0]", value[0], minimum=1), check_int(f"{name}[1]", value[1], minimum=1)
    side = check_int(name, value, minimum=1)
    return side, side


def tower_windows(stack: Stack, n: int) -> list[tuple[int, tuple[int, int] | None, float]]:
    r"""``(window, grid, scale)`` of each of the ``n`` layers: ``(0, None, 1)`` without ``windows`` facts; SAM 3's
    windowed layers ``(w, None, 1)`` (``w`` = the window size), its global layers (listed by the second key)
    ``(0, (G_h, G_w), w / G_w)``, :math:`G_h = \lfloor i_1 / p_1 \rfloor`, :math:`G_w = \lfloor i_0 / p_0 \rfloor` for
    an image size ``(i_0, i_1)`` and patch size ``(p_0, p_1)`` (one int: both), as
    ``Sam3ViTLayer.precompute_positions`` reads them: the config's image size, not the image fed."""
    view, facts = stack.view, stack.facts
    if not facts.windows:
        return [(0, None, 1.0)] * n
    window = view.int(facts.windows[0], minimum=1)
    listed = view.value(facts.windows[1]) or []
    if not isinstance(listed, (list, tuple)):
        raise TypeError(f"{view.name(facts.windows[1])} must be a list of layer indices, got {listed!r}")
    global_layers = {check_int(f"{view.name(facts.windows[1])}[{i}]", v, minimum=0) for i, v in enumerate(listed)}
    image = _side(view.value(facts.grid[0]), view.name(facts.grid[0]))
    patch = _side(view.value(facts.grid[1]), view.name(facts.grid[1]))
    grid = (image[1] // patch[1], image[0] // patch[0])  # (G_h, G_w): the second entries give the rows
    if min(grid) < 1:
        raise ValueError(f"{view.path}: the image size {image} holds no patch of {patch}")
    return [(0, grid, window / grid[1]) if i in global_layers else (window, None, 1.0) for i in range(n)]


def tower_queries(stack: Stack, n: int) -> list[int]:
    """The unrotated query tokens before the class token in each of the ``n`` layers: ``num_queries`` in the last
    ``num_blocks`` layers (the ``queries`` facts; EoMT-DINOv3's ``EomtDinov3ForUniversalSegmentation.forward``
    prepends them before layer ``n − num_blocks``), none elsewhere."""
    view, facts = stack.view, stack.facts
    if not facts.queries:
        return [0] * n
    count = view.int(facts.queries[0], minimum=0)
    last = view.int(facts.queries[1], minimum=0)
    if last > n:
        raise ValueError(f"{view.name(facts.queries[1])}: {last} last layers of a tower of {n}")
    return [count if i >= n - last else 0 for i in range(n)]


def tower_convolutions(stack: Stack, n: int) -> list[bool]:
    """Which of the ``n`` layers have no attention: those whose entry of the layer types (the ``conv_layers`` facts'
    key, which must list ``n`` types) is the facts' convolution type; none without the facts."""
    view, facts = stack.view, stack.facts
    if not facts.conv_layers:
        return [False] * n
    types = view.value(facts.conv_layers[0])
    if not isinstance(types, (list, tuple)) or len(types) != n or not all(isinstance(t, str) for t in types):
        raise ValueError(f"{view.name(facts.conv_layers[0])}: the tower's layer types must be stated, one string per "
                         f"layer ({n}), got {types!r}")
    return [t == facts.conv_layers[1] for t in types]


def tower_side(stack: Stack) -> int:
    """``S // p`` of the ``side`` facts' clip and patch sizes (``VJEPA2RopeAttention.grid_size``)."""
    view, (size, patch) = stack.view, stack.facts.side
    if (side := view.int(size, minimum=1) // view.int(patch, minimum=1)) < 1:
        raise ValueError(f"{view.name(size)}: a clip of {view.int(size)} holds no patch of {view.int(patch)}")
    return side


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`VisionRopeLayer` per layer of the tower, a
    :class:`~refpos.models.records.NoAttention` (``conv``) per convolution layer."""
    rope = tower_rope(stack)
    prefix, weight = tower_prefix(stack)
    n = check_int(stack.view.name(stack.facts.layers[0]), stack.view.count(stack.facts.layers, "layer count"),
                  minimum=1)
    reads = (("rotation", ("video_grid",) if isinstance(rope, VisionRope3D) else ("image_grid",)),)
    per_frame = stack.facts.class_angles is not None or stack.facts.class_token
    queries, convolutions = tower_queries(stack, n), tower_convolutions(stack, n)
    order = 0 if stack.facts.window_order is None else stack.view.int(stack.facts.window_order,
                                                                             stack.facts.window_default, minimum=1)
    side = 0 if not stack.facts.side else tower_side(stack)
    return [NoAttention(stack.name, i, stack.facts.conv_layers[1], mixer="conv") if convolutions[i] else
            VisionRopeLayer(stack.name, i, None, rope=rope, prefix=queries[i] + prefix, prefix_weight=weight,
                            per_frame=per_frame, queries=queries[i], window=window, grid=grid, scale=scale,
                            raster=stack.facts.raster, start=stack.facts.start, window_order=order, side=side,
                            reads=reads)
            for i, (window, grid, scale) in enumerate(tower_windows(stack, n))]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"form": draw(st.sampled_from(("qwen2_vl", "pixtral", "llama4"))), "head_dim": 4 * draw(st.integers(1, 32))}


VISION_ROPE = EncodingKind(
    name="vision_rope", summary="each image patch's query and key rotated by its row and column (2-D RoPE), or its "
    "frame, row and column (3-D)", record=VisionRopeLayer, build=build, hook="rotate",
    reads=("image_grid", "video_grid"), doc="docs/mrope.md#vision-encoders-2-d-axial-rope", facts=VisionRopeFacts,
    golden="vision-rope", contract=("apply_vision_rope",), spec="spec_tests/test_vision_rope.py", draw=_draw,
    modalities=("vision",),
    example={"config": {"depth": 2, "embed_dim": 64, "num_heads": 4}, "facts": {"form": "qwen2_vl"}},
    check="vision_rope")

__all__ = ["PREFIXED", "TOWER_HEADS", "TOWER_LAYERS", "TOWER_WIDTH", "VISION_ROPE", "VisionRopeFacts",
           "VisionRopeLayer", "build", "tower_convolutions", "tower_prefix", "tower_queries", "tower_rope",
           "tower_side", "tower_windows"]
