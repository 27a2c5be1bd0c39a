r"""The position-grid kind: a learned 2-D table added to a vision encoder's patches before its first layer, resampled
to the input's patch grid (ViT, DeiT, DINOv2, CLIP, SigLIP, BLIP, …) — the way a family's code resamples it, the
extra rows its table holds, and the keys of its native grid (:class:`GridFacts`), the record (:class:`GridLayer`)
and the builder.

The formulas are :mod:`refpos.encodings.grid` (docs/grid.md#the-math); the ways are the records of
:data:`refpos.encodings.grid_variants.GRID_VARIANTS`. A table trained on ``image_size / patch_size`` patches per
side holds ``prefix + M_h·M_w + suffix`` rows: the extra rows (CLS; DeiT's distillation token; YOLOS's detection
tokens after the grid) are kept apart, and the grid is resampled to the input's patch grid ``(h, w)``. The record
states the native grid and what it reads (``reads``: its rows at the input's patch grid); the trained table is a
weight of the checkpoint.
A family whose table is added as it is, without resampling (SAM's image encoder), has the way ``"fixed"``, or
``"fixed_first_row"`` where each patch also adds the table's first row (ViTPose's backbone): the input must have the
native grid (:mod:`refpos.models.kinds.grid_fixed`).

Examples
--------
>>> from refpos.models import model_positions
>>> vit = {"model_type": "vit", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
...        "image_size": 224, "patch_size": 16}
>>> print(model_positions(vit).summary())
vision input: grid(bicubic)
vision layers 0-1: none ×2
>>> site = model_positions(vit).stack("vision.input")[0]
>>> site.grid, site.prefix, site.table_rows
((14, 14), 1, 197)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.backend import Array
from refpos.encodings.grid import packed_position_rows
from refpos.encodings.grid_clips import CLIP_LAYOUTS, FACTORISED
from refpos.encodings.grid_variants import GRID_VARIANTS, GridVariant
from refpos.encodings.grid_windowed import windowed_position_grid
from refpos.encodings.sinusoidal import sinusoidal
from refpos.models.kinds.grid_clips import clip_fields, clip_params, clip_rows
from refpos.models.kinds.grid_fixed import FIXED_FIRST_ROW, FIXED_WAYS, fixed_rows, native_grid, stage_grids
from refpos.models.kinds.grid_fixed import image_grid as image_grid  # the native grid: its home re-exported here
from refpos.models.kinds.grid_mid import mid_count, mid_rows
from refpos.models.kinds.record import EncodingKind, Stack, check_fact, stack_width
from refpos.models.records import LayerRecord
from refpos.models.view import ConfigView
from refpos.validation import check_int

#: the ways a family row may name: every record of GRID_VARIANTS, and those of a table added as it is
GRID_WAYS = (*GRID_VARIANTS, *FIXED_WAYS)


@dataclass(frozen=True)
class GridFacts:
    """How a family's code builds its position grid (module docstring).

    ``way``: a record of :data:`~refpos.encodings.grid_variants.GRID_VARIANTS`, or a way of
    :data:`~refpos.models.kinds.grid_fixed.FIXED_WAYS` (no resampling);
    ``prefix``: the rows before the grid (CLS: 1, DeiT: 2, SigLIP: 0), or ``prefix_key``: the key holding that
    count (Pixio's ``n_cls_tokens``); ``suffix``: the rows after the grid (Llama 4's class row, last), or
    ``suffix_key``: the key holding that count (YOLOS's ``num_detection_tokens``); ``image`` and ``patch``: the
    keys of the native image and patch sizes;
    ``defaults``: the config class's values of those two keys (a config.json written by transformers leaves out
    a value equal to its class default); ``positions``: the key of the table's grid rows when the config states
    them itself (a square: SigLIP2's ``num_patches``), ``positions_default`` its class default; ``always``: the
    model resamples on every call (DINOv2, SigLIP2), rather than when its forward is asked to
    (``interpolate_pos_encoding=True``: ViT, CLIP); ``width``: the key of the table's width when it is not the
    stack's (Swin: ``embed_dim``, the first stage's); ``packed``: the tower takes flat patches and their
    ``(t, h, w)`` grids (``grid_thw``), each image's grid laid out for each of its frames
    (:func:`~refpos.encodings.grid.packed_position_rows`); ``merge``: the key of the side of the merge blocks
    its tokens come in (Qwen3-VL's ``spatial_merge_size``; none: raster order), ``merge_default`` its class
    default; ``mode_key``: the key from which the code takes its mode (HunYuan-VL's ``interpolate_mode``), whose
    value the way's mode must be (another value is reported as not modelled); ``clips``: false where the code reads
    a clip's frames otherwise than as its image's grid repeated (GLM-Image sizes frame ``k`` by entry ``k`` of the
    grids), so that only images (``t = 1``) are modelled; ``frames``: the key of the number of frames of a fixed
    sinusoid a clip's frames add (Kimi K2.5's ``pos_emb_time``; :meth:`GridLayer.tokens`), ``frames_default`` its
    class default; ``class_row``: the name of the learned vector, a weight, that the class token each image starts
    with carries as its position (Inkling2's ``cls_position_embedding``); ``sides``: the keys of the table's rows
    and columns where the config states them apart (Kimi K2.5's ``pos_emb_height``, ``pos_emb_width``), read in
    place of the image and patch sizes (``defaults`` then their class defaults); its code resamples the table as a
    square of the first side, so two sides that differ are not modelled. ``clip``: a video tower's layout of a
    clip's tokens (:mod:`refpos.encodings.grid_clips`): ``"patch_major"`` (TimeSformer: patch by patch, each with
    its frames in turn, and a learned time table of ``clip_frames`` rows, the key of the frames, ``clip_frames_default``
    its class default), ``"tubelets"`` (ViViT: the table holds a grid per tubelet frame, ``clip_frames`` frames
    cut into tubelets ``tubelet`` deep, the key of the tubelet size ``(t, h, w)`` whose last two are the patch size,
    ``tubelet_default`` its class default), or factorised, VideoPrism's two stacks: ``"frame_grid"`` (each frame's
    patches read an image's grid, no CLS row, the patch size ``tubelet``'s last two) and ``"frame_table"`` (each
    patch's frames read ``clip_frames`` rows as a grid of ``N × 1`` at ``(F, 1)``); ``no_time``: ``[key, value]``
    where that value of the config's key drops the time table and runs each frame as its own sequence
    (TimeSformer's ``attention_type`` ``space_only``), which is not modelled. ``mid``: the key of the flag that
    adds a table like the input's after each of the first ``L − 1`` layers (YOLOS's ``use_mid_position_embeddings``,
    :mod:`refpos.models.kinds.grid_mid`), ``mid_default`` its class default. ``window``: ``[table key, window key]``
    where a learned window table is tiled over the resampled grid (SAM 2's Hiera,
    :mod:`refpos.encodings.grid_windowed`): the first key holds the table's grid ``(M_h, M_w)`` (read in place of
    the image and patch sizes), the second the window sides per stage, whose first is the window table's side ``m``;
    ``window_default`` their class defaults. ``strides``: ``[bins, bin stride, frames, frame stride]``, the keys of
    a spectrogram the patch convolution cuts with strides (AST; the grid of
    :func:`~refpos.models.kinds.grid_fixed.spectrogram_grid`, read in place of the image size), ``strides_default``
    their class defaults. ``stage_grids``: ``[stage count, patch sizes, widths]``, the keys of a network that adds a
    fixed table of its own before each stage (PVT: :func:`~refpos.models.kinds.grid_fixed.stage_grids`, one record
    per stage).
    """

    way: str = "bicubic"
    prefix: int = 1
    prefix_key: str | None = None
    suffix: int = 0
    suffix_key: str | None = None
    image: str = "image_size"
    patch: str = "patch_size"
    defaults: tuple[Any, Any] | None = None
    positions: str | None = None
    positions_default: int | None = None
    always: bool = False
    width: str | None = None
    packed: bool = False
    merge: str | None = None
    merge_default: int | None = None
    mode_key: str | None = None
    clips: bool = True
    frames: str | None = None
    frames_default: int | None = None
    class_row: str | None = None
    sides: tuple[str, str] | None = None
    clip: str = ""
    clip_frames: str | None = None
    clip_frames_default: int | None = None
    tubelet: str | None = None
    tubelet_default: tuple[int, int, int] | None = None
    no_time: tuple[str, str] | None = None
    mid: str | None = None
    mid_default: bool = False
    window: tuple[str, str] | None = None
    window_default: tuple[Any, Any] | None = None
    strides: tuple[str, str, str, str] | None = None
    strides_default: tuple[int, int, int, int] | None = None
    stage_grids: tuple[str, str, str] | None = None

    def __post_init__(self) -> None:
        for name in ("defaults", "sides", "tubelet_default", "no_time", "window", "window_default", "strides",
                     "strides_default", "stage_grids"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def check(self, where: str) -> None:
        check_fact(where, self.way in GRID_WAYS, "grid.way", self.way)
        check_fact(where, isinstance(self.prefix, int) and self.prefix >= 0, "grid.prefix", self.prefix)
        check_fact(where, self.prefix_key is None or self.prefix == 1, "grid.prefix_key (with prefix)", self.prefix)
        check_fact(where, isinstance(self.suffix, int) and self.suffix >= 0 and not (self.suffix and self.suffix_key),
                   "grid.suffix (a count, or suffix_key)", self.suffix)
        check_fact(where, isinstance(self.always, bool), "grid.always", self.always)
        check_fact(where, self.defaults is None or len(self.defaults) == 2, "grid.defaults (image, patch)",
                   self.defaults)
        check_fact(where, isinstance(self.packed, bool), "grid.packed", self.packed)
        check_fact(where, self.merge is None or self.packed, "grid.merge (a packed tower's)", self.merge)
        check_fact(where, self.frames is None or (self.packed and self.clips), "grid.frames (a packed tower's, "
                   "with clips)", self.frames)
        check_fact(where, self.class_row is None or (self.packed and isinstance(self.class_row, str)),
                   "grid.class_row (a packed tower's: the name of its weight)", self.class_row)
        check_fact(where, self.sides is None or (len(self.sides) == 2 and self.positions is None),
                   "grid.sides ([rows key, columns key], without positions)", self.sides)
        check_fact(where, self.clip in ("", *CLIP_LAYOUTS), "grid.clip", self.clip)
        check_fact(where, not self.clip or (isinstance(self.clip_frames, str) and not self.packed and self.suffix_key
                                            is None and self.prefix == (0 if self.clip in FACTORISED else 1)),
                   "grid.clip (with clip_frames, one CLS row but for a factorised clip, no packing)", self.clip)
        check_fact(where, (self.tubelet is not None) == (self.clip in ("tubelets", "frame_grid")), "grid.tubelet",
                   self.tubelet)
        check_fact(where, self.no_time is None or (self.clip == "patch_major" and len(self.no_time) == 2),
                   "grid.no_time ([key, value] of a patch_major clip)", self.no_time)
        check_fact(where, self.window is None or (len(self.window) == 2 and self.way == "bicubic" and self.prefix == 0
                                                  and not self.packed and not self.clip and self.sides is None
                                                  and self.positions is None),
                   "grid.window ([table key, window key] of a bicubic grid without extra rows)", self.window)
        check_fact(where, self.way != FIXED_FIRST_ROW or (self.prefix, self.suffix, self.prefix_key, self.suffix_key)
                   == (1, 0, None, None), "grid.way fixed_first_row (one row before the grid)", self.way)
        check_fact(where, self.strides is None or (len(self.strides) == 4 and self.way in FIXED_WAYS and not self.clip
                                                   and self.sides is None and self.positions is None),
                   "grid.strides ([bins, bin stride, frames, frame stride] of a fixed table)", self.strides)
        check_fact(where, self.stage_grids is None or (len(self.stage_grids) == 3 and self.way == "fixed"
                                                       and self.strides is None), "grid.stage_grids", self.stage_grids)


@dataclass(frozen=True)
class GridLayer(LayerRecord):
    """A stack's position grid: the way it is resampled, the native grid ``(M_h, M_w)`` of the table, the extra
    rows before (``prefix``) and after (``suffix``) it, and its width ``dim``; the table is a weight."""

    way: str = "bicubic"
    grid: tuple[int, int] = (14, 14)
    prefix: int = 1
    suffix: int = 0
    dim: int = 768
    always: bool = False
    packed: bool = False
    merge: int = 1
    clips: bool = True
    frames: int = 0
    class_row: str = ""
    #: a video tower's layout of a clip's tokens ("": an image's), :mod:`refpos.encodings.grid_clips`
    clip: str = ""
    #: the tubelet frames whose grids the table holds (ViViT), each ``stride`` frames deep
    depth: int = 1
    stride: int = 1
    #: the rows of a learned time table read per frame (TimeSformer; 0: none)
    time: int = 0
    #: the tables added after layers 0 … L − 2, each laid out and read as the input's (YOLOS; 0: none)
    mid: int = 0
    #: the side ``m`` of a learned window table tiled over the resampled grid (SAM 2's Hiera; 0: none)
    window: int = 0
    kind: ClassVar[str] = "grid"

    @property
    def label(self) -> str:
        return f"grid({self.way})"

    @property
    def table_rows(self) -> int:
        """The rows of the trained table: ``prefix + D·M_h·M_w + suffix`` (``D``: the tubelet frames it holds, 1 but
        for ViViT)."""
        return self.prefix + self.depth * self.grid[0] * self.grid[1] + self.suffix

    @property
    def variant(self) -> GridVariant | None:
        """The way's record (``None`` for a fixed table)."""
        return GRID_VARIANTS.get(self.way)

    def params(self) -> dict[str, Any]:
        variant = self.variant
        return {"way": self.way, "grid": list(self.grid), "prefix": self.prefix, "suffix": self.suffix,
                "dim": self.dim, "table_rows": self.table_rows, "at": "input",
                **({"packed": "flat patches of (t, h, w) grids, each frame its image's rows",
                    "token_order": "raster" if self.merge == 1 else f"merge blocks of {self.merge} × {self.merge}",
                    "frames": "each its image's rows" if self.clips else "images only (t = 1)",
                    **({"frame_sinusoid": f"frame f of a clip of up to {self.frames} frames adds the sinusoid of f "
                                          "(sin then cos, base 10000); an image adds none"} if self.frames else {}),
                    **({"class_row": f"each image starts with a class token carrying the weight {self.class_row}"}
                       if self.class_row else {})}
                   if self.packed else {}),
                **clip_params(self),
                **({"mid_tables": self.mid, "mid_added": f"table l after layer l, l = 0 … {self.mid - 1}, each read "
                    "as the input's"} if self.mid else {}),
                **({"window_table": [self.window, self.window], "window_read": "tiled: patch (i, j) adds row "
                    "(i mod m, j mod m)"} if self.window else {}),
                **({"first_row": "added to every patch's grid row; no class token"} if self.way == FIXED_FIRST_ROW
                   else {}),
                "resampled": "never: the input must have the native grid" if variant is None else
                ("on every call" if self.always else "when the forward is called with interpolate_pos_encoding"),
                **({} if variant is None else {"read": variant.read, "mode": variant.mode,
                                                "align_corners": variant.align_corners,
                                                "antialias": variant.antialias,
                                                "scale_factor_offset": variant.scale_factor_offset,
                                                "keep_extra": variant.keep_extra})}

    def reference(self, table: Array, grid: tuple[int, int], *, window_table: Array | None = None) -> Array:
        r"""The positions added to an input of patch grid ``grid = (h, w)``: the trained ``table``
        ``(table_rows, dim)`` resampled by the way (:meth:`GridVariant.resample`), its extra rows kept apart;
        a fixed table is returned as it is, at its own grid only. Where a window table is tiled over the grid
        (:attr:`window`), ``window_table`` ``(m·m, dim)`` is that table and the rows are
        :func:`~refpos.encodings.grid_windowed.windowed_position_grid`'s,
        :math:`P_{i,j} = \mathcal{R}_{h,w}(B)_{i,j} + W_{i \bmod m,\ j \bmod m}`."""
        rows = getattr(table, "shape", (None, None))
        if len(rows) != 2 or rows[0] != self.table_rows:
            raise ValueError(f"table must have shape ({self.table_rows}, dim) for the {self.stack} grid "
                             f"{self.grid} with {self.prefix} + {self.suffix} extra rows, got {tuple(rows)}")
        if bool(self.window) != (window_table is not None):
            has = f"tiles a {self.window} × {self.window} window table" if self.window else "has no window table"
            raise ValueError(f"window_table: the {self.stack} grid {has}; give it exactly when it has one")
        if self.window:
            return windowed_position_grid(table, window_table, grid, source_grid=self.grid, window_side=self.window)
        if self.variant is None or self.depth > 1:  # a table added as it is (ViViT's: a grid per tubelet frame)
            if tuple(grid) != self.grid:
                raise ValueError(f"grid: the {self.stack} table is not resampled, its input must have the native "
                                 f"grid {self.grid}, got {tuple(grid)}")
            return table if self.depth > 1 else fixed_rows(self, table, grid)
        return self.variant.resample(table, grid, prefix_tokens=self.prefix, suffix_tokens=self.suffix,
                                     source_grid=self.grid)

    def clip_rows(self, table: Array, grid: tuple[int, int], frames: int, time_table: Array | None = None) -> Array:
        r"""The rows added to the tokens of a clip of ``frames`` frames on the patch grid ``grid = (h, w)`` (a video
        tower, :attr:`clip`): ViViT's table of tubelet frames as :meth:`reference` reads it (a clip of the table's
        ``depth · stride`` frames only); TimeSformer's CLS row ``c``, then each patch's grid row ``G'_p`` plus the
        time table ``time_table`` ``(time, dim)`` read nearest, patch by patch
        (:func:`refpos.models.kinds.grid_clips.clip_rows`):

        .. math:: P_0 = c, \qquad P_{1 + pF + f} = G'_p + T_{\lfloor f N / F \rfloor}
        """
        return clip_rows(self, table, grid, frames, time_table)

    def mid_tables(self, tables: Array, grid: tuple[int, int]) -> Array:
        r"""The tables added after layers ``0 … L − 2`` (:attr:`mid`, YOLOS), each ``tables[l]`` read as
        :meth:`reference` reads the input's (:func:`refpos.models.kinds.grid_mid.mid_rows`):
        :math:`h^{(l+1)}_{\text{in}} = h^{(l)}_{\text{out}} + P'^{(l)}`."""
        return mid_rows(self, tables, grid)

    def tokens(self, table: Array, grids: list[tuple[int, int, int]], class_row: Array | None = None) -> Array:
        r"""The rows added to a packed tower's tokens (:attr:`packed`): for each ``(t, h, w)`` of ``grids``, the
        grid rows of :meth:`reference` at ``(h, w)``, in the tower's token order, once per frame
        (:func:`~refpos.encodings.grid.packed_position_rows`); where the tower adds a fixed sinusoid over a clip's
        frames (:attr:`frames`, Kimi K2.5), frame ``f`` of a clip of ``t > 1`` frames also adds

        .. math:: F(f)_k = \sin(f\,\omega_k),\quad F(f)_{k + d/2} = \cos(f\,\omega_k),\qquad
            \omega_k = 10000^{-2k/d}

        (:func:`refpos.encodings.sinusoidal.sinusoidal`, concatenated halves), an image none. Where each image
        starts with a class token (:attr:`class_row` names its weight), ``class_row`` is that weight, ``(dim,)``,
        put before each image's rows."""
        if not self.packed:
            raise ValueError(f"grids: the {self.stack} grid is added to one image's patches, not to packed (t, h, w) "
                             "grids: call reference")
        if not self.clips and any(isinstance(g, list | tuple) and g and g[0] != 1 for g in grids):
            raise ValueError(f"grids: the {self.stack} tower reads a clip's frames otherwise than as its image's grid "
                             f"repeated, and refpos models its images only (t = 1), got {grids!r}")
        if self.frames and any(isinstance(g, list | tuple) and g and g[0] > self.frames for g in grids):
            raise ValueError(f"grids: the {self.stack} tower's frame sinusoid covers {self.frames} frames, got "
                             f"{grids!r}")
        if bool(self.class_row) != (class_row is not None):
            raise ValueError(f"class_row: the {self.stack} tower's class tokens carry "
                             f"{self.class_row or 'no weight'}; give it as class_row exactly when it has one")
        width = getattr(table, "shape", (0, 0))[-1]  # the model's dim, or a seeded table's
        if class_row is not None and tuple(getattr(class_row, "shape", ())) != (width,):
            raise ValueError(f"class_row must have shape ({width},), the table's width, got "
                             f"{tuple(getattr(class_row, 'shape', ()))}")
        frame_rows = (lambda f: sinusoidal([f], self.dim, layout="concat")[0, :]) if self.frames else None
        return packed_position_rows(lambda hw: self.reference(table, hw), grids, self.merge, frame_rows, class_row)

    def _why_not(self) -> str:
        return ("a resampled 2-D grid is added to the patches, not to 1-D positions: GridLayer.reference resamples "
                "the checkpoint's table to the input's patch grid")


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`GridLayer`: the stack's input embedding (module docstring); one per stage where each stage adds a
    table of its own (``stage_grids``: PVT)."""
    facts: GridFacts = stack.facts
    view = stack.view
    if facts.stage_grids is not None:  # a table per stage (PVT): refpos.models.kinds.grid_fixed.stage_grids
        return [GridLayer(stack.name, s, None, way=facts.way, grid=grid, prefix=prefix, dim=dim,
                          reads=(("rows", ("image_grid",)),)) for s, (grid, prefix, dim) in enumerate(stage_grids(
                              view, facts.stage_grids, facts.image, facts.defaults))]
    grid = native_grid(stack, facts)
    clip = clip_fields(view, facts, stack.not_modelled)[1]
    prefix = facts.prefix if facts.prefix_key is None else view.int(facts.prefix_key, minimum=0)
    suffix = facts.suffix if facts.suffix_key is None else view.int(facts.suffix_key, minimum=0)
    variant = GRID_VARIANTS.get(facts.way)
    if facts.packed and (variant is None or (variant.keep_extra and prefix + suffix)):
        raise ValueError(f"{stack.family.model_type if stack.family else 'the row'}: grid.packed takes a way that "
                         f"leaves the extra rows out, got {facts.way!r} with {prefix} + {suffix} extra rows")
    merge = 1 if facts.merge is None else view.int(facts.merge, facts.merge_default, minimum=1)
    if facts.mode_key is not None and variant is not None:
        mode = view.value(facts.mode_key, variant.mode)
        if mode != variant.mode:
            stack.not_modelled[view.name(facts.mode_key)] = (
                f"{mode!r}: the row's way {facts.way!r} resamples {variant.mode}, and refpos models no other mode for "
                "this family")
    return [GridLayer(stack.name, 0, None, way=facts.way, grid=grid, prefix=prefix, suffix=suffix,
                      dim=stack_width(view, stack.role) if facts.width is None else view.int(facts.width, minimum=1),
                      always=facts.always, packed=facts.packed, merge=merge, clips=facts.clips,
                      frames=0 if facts.frames is None else view.int(facts.frames, facts.frames_default, minimum=1),
                      class_row=facts.class_row or "", **clip, mid=mid_count(view, facts, stack.role),
                      **_window(view, facts),
                      reads=(("rows", ("video_grid",) if facts.packed else ("image_grid",)),))]


def _window(view: ConfigView, facts: GridFacts) -> dict[str, int]:
    """``{"window": m}``: the first entry of the window sides per stage, where the row tiles a window table."""
    sides = None if facts.window is None else view.value(facts.window[1], (facts.window_default or (0, 0))[1])
    first = sides[0] if isinstance(sides, list | tuple) and sides else sides
    return {} if facts.window is None else {"window": check_int(view.name(facts.window[1]), first, minimum=1)}


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"way": draw(st.sampled_from(tuple(GRID_VARIANTS))), "grid": (draw(st.integers(1, 8)),
                                                                         draw(st.integers(1, 8)))}


GRID = EncodingKind(
    name="grid", summary="a learned 2-D table added to the patches, resampled to the input's patch grid (ViT, "
    "DINOv2, CLIP, SigLIP)", record=GridLayer, build=build, hook="input", reads=("image_grid", "video_grid"),
    doc="docs/grid.md#the-math", facts=GridFacts, contract=("resample_position_table",),
    spec="spec_tests/test_grid.py", draw=_draw, modalities=("vision",),
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16, "image_size": 32,
                        "patch_size": 8}, "facts": {"way": "bicubic"}},
    check="grid", golden="grid")

__all__ = ["FIXED_FIRST_ROW", "GRID", "GRID_WAYS", "GridFacts", "GridLayer", "build", "image_grid"]
