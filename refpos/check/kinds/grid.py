"""``refpos check grid``: a learned position table resampled to a patch grid, from a call of
``resample_position_table``, against :mod:`refpos.encodings.grid` within the bound of a float32 port
(:func:`refpos.encodings.grid_mistakes.grid_tolerance`), the mistake named by
:func:`~refpos.encodings.grid_mistakes.identify_grid` (docs/grid.md#mistakes).

The call's ``way`` is a :class:`~refpos.encodings.grid_variants.GridVariant` of its own: the mistakes change one of
its choices (bilinear for bicubic, ``align_corners``, antialias, the size form, the axes, the extra rows).

Three more calls take the grid's other forms, each with its inputs, bound and mistakes in a module of its own:
``clip_position_rows`` a video clip's rows (TimeSformer, ViViT: :mod:`refpos.encodings.grid_clips_mistakes`),
``mid_position_tables`` the tables between a stack's layers (YOLOS: :mod:`refpos.encodings.grid_mid_mistakes`),
``windowed_position_grid`` a background resampled plus a window table tiled (Hiera:
:mod:`refpos.encodings.grid_windowed_mistakes`). Each names the grid's own mistakes too, made on the table it
resamples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck
from refpos.encodings.grid_clips_mistakes import CLIP_MISTAKES, ClipInputs, clip_mistakes
from refpos.encodings.grid_mid_mistakes import MID_MISTAKES, MidInputs, mid_mistakes
from refpos.encodings.grid_mistakes import (
    GRID_MISTAKES,
    UNRECOGNISED,
    GridInputs,
    GridMistake,
    grid_tolerance,
    identify_among,
    identify_grid,
)
from refpos.encodings.grid_variants import WAY_FIELDS, GridVariant
from refpos.encodings.grid_windowed_mistakes import WINDOWED_MISTAKES, WindowedInputs, windowed_mistakes
from refpos.validation import check_int, floating_array


def _variant(way: Any) -> GridVariant:
    """The call's ``way``: the keys of :data:`~refpos.encodings.grid_variants.WAY_FIELDS` (``mode`` required)."""
    if not isinstance(way, dict) or set(way) - set(WAY_FIELDS) or way.get("mode") is None:
        raise ValueError(f"way takes the keys {tuple(WAY_FIELDS)} ('mode' required), got {way!r}")
    options = {**WAY_FIELDS, **way}
    return GridVariant("the call's way", options["mode"], options["align_corners"], options["antialias"],
                       options["scale_factor_offset"], options["keep_extra"], "table", (), "the call",
                       padding=options["padding"], axes=options["axes"], read=options["read"])


def _pair(name: str, value: Any) -> tuple[int, int]:
    """A grid ``[rows, columns]`` of positive ints; a ``TypeError`` or ``ValueError`` naming ``name``."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise TypeError(f"{name} must be a pair [rows, columns], got {value!r}")
    return check_int(f"{name}[0]", value[0], minimum=1), check_int(f"{name}[1]", value[1], minimum=1)


def _rows(name: str, value: Any, ndim: int) -> np.ndarray:
    array = np.asarray(floating_array(value, name=name), dtype=np.float64)
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {array.shape}")
    return array


def resample_position_table(table: Any, grid: list[int], way: dict, prefix_tokens: int = 0,
                            suffix_tokens: int = 0) -> GridInputs:
    """The inputs of a ``resample_position_table`` call: ``way`` holds the keys of
    :data:`~refpos.encodings.grid_variants.WAY_FIELDS` (``mode`` required)."""
    return GridInputs(np.asarray(table, dtype=np.float64), tuple(grid), _variant(way), prefix_tokens=prefix_tokens,
                      suffix_tokens=suffix_tokens)


def clip_position_rows(table: Any, grid: list[int], frames: int, way: dict, layout: str, time_table: Any = None,
                       tubelet: int = 1, source_grid: list[int] | None = None) -> ClipInputs:
    """The inputs of a video clip's rows (:class:`~refpos.encodings.grid_clips_mistakes.ClipInputs`): ``layout``
    ``"patch_major"`` (TimeSformer: ``time_table`` ``(N, d)``) or ``"tubelets"`` (ViViT: ``tubelet`` frames each);
    ``source_grid`` ``None``: a square grid.

    See Also
    --------
    refpos.encodings.grid_clips.patch_major_rows : the rows patch by patch.
    refpos.encodings.grid_clips_mistakes.identify_clip : the mistakes it names.
    """
    return ClipInputs(_rows("table", table, 2), _pair("grid", grid), frames, _variant(way), layout,
                      None if time_table is None else _rows("time_table", time_table, 2), tubelet,
                      None if source_grid is None else _pair("source_grid", source_grid))


def mid_position_tables(tables: Any, grid: list[int], way: dict, prefix_tokens: int = 0, suffix_tokens: int = 0,
                        source_grid: list[int] | None = None) -> MidInputs:
    """The inputs of the tables between a stack's layers (:class:`~refpos.encodings.grid_mid_mistakes.MidInputs`):
    ``tables`` ``(L − 1, prefix + M_h·M_w + suffix, d)``; ``source_grid`` ``None``: a square grid.

    See Also
    --------
    refpos.models.kinds.grid_mid.mid_rows : the record's tables between the layers.
    refpos.encodings.grid_mid_mistakes.identify_mid : the mistakes it names.
    """
    prefix = check_int("prefix_tokens", prefix_tokens, minimum=0)
    suffix = check_int("suffix_tokens", suffix_tokens, minimum=0)
    return MidInputs(_rows("tables", tables, 3), _pair("grid", grid), _variant(way), prefix, suffix,
                     None if source_grid is None else _pair("source_grid", source_grid))


def windowed_position_grid(background: Any, window: Any, grid: list[int], source_grid: list[int],
                           window_side: int) -> WindowedInputs:
    """The inputs of a windowed grid (:class:`~refpos.encodings.grid_windowed_mistakes.WindowedInputs`), as
    :func:`refpos.encodings.grid_windowed.windowed_position_grid` takes them.

    See Also
    --------
    refpos.encodings.grid_windowed_mistakes.identify_windowed : the mistakes it names.
    """
    inputs = WindowedInputs(_rows("background", background, 2), _rows("window", window, 2), _pair("grid", grid),
                            _pair("source_grid", source_grid), check_int("window_side", window_side, minimum=1))
    inputs.reference()  # the shapes and the grid's multiples of the window side, each refused by name
    return inputs


#: each form's inputs -> every mistake its identifier may name
FORMS: dict[type, Any] = {GridInputs: lambda: GRID_MISTAKES, ClipInputs: clip_mistakes, MidInputs: mid_mistakes,
                          WindowedInputs: windowed_mistakes}


def _reference(inputs: Any) -> tuple[np.ndarray, float]:
    if isinstance(inputs, GridInputs):
        return inputs.resample(), grid_tolerance(inputs)
    return inputs.reference(), inputs.tolerance()


def _identify(candidate: np.ndarray, inputs: Any) -> str | None:
    if isinstance(inputs, GridInputs):
        name = identify_grid(candidate, inputs)
    else:
        reference, tolerance = _reference(inputs)
        name = identify_among(candidate, reference, tolerance, inputs, FORMS[type(inputs)]().values())
    return None if name == UNRECOGNISED else name


def _wrong(inputs: Any, name: str) -> np.ndarray | None:
    mistake: GridMistake | None = FORMS[type(inputs)]().get(name)
    return mistake.compute(inputs) if mistake is not None and mistake.applies(inputs) else None


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """An 8 × 8 table with a CLS row resampled to 5 × 11 (one axis shrinks, one grows, not square) six ways:
    ViT's bicubic, SigLIP2's bilinear with antialias, DINOv2's scale factor (g + 0.1)/M, NaViT's buckets, RADIO's
    square crop and SAM 3's tiling (the last three leave the CLS row out)."""
    table = np.random.default_rng(37).standard_normal((1 + 64, 4))
    ways = [{"mode": "bicubic"}, {"mode": "bilinear", "antialias": True},
            {"mode": "bicubic", "scale_factor_offset": 0.1},
            {"mode": "nearest", "read": "buckets", "keep_extra": False},
            {"mode": "bilinear", "read": "square_crop", "keep_extra": False},
            {"mode": "nearest", "read": "tile", "keep_extra": False}]
    images = [("resample_position_table", {"table": table, "grid": [5, 11], "way": way, "prefix_tokens": 1})
              for way in ways]
    return images + _form_examples()


def _form_examples() -> list[tuple[str, dict[str, Any]]]:
    """The other forms, seeded: TimeSformer's clip at another patch count (3 × 6 patches, 3 frames from a 4 × 4
    grid and a time table of 4 rows) and at the same count in another shape (2 × 8); ViViT's table of 2 tubelet
    frames at its 3 × 3 grid and of one tubelet frame resampled bicubic to 3 × 5; YOLOS's 3 tables between the
    layers, a CLS row, a 4 × 6 grid and 2 detection rows, resampled to 5 × 3; Hiera's 5 × 9 background and 4 × 4
    window table on a 24 × 16 map."""
    rng = np.random.default_rng(38)
    timesformer = {"table": rng.standard_normal((17, 4)), "frames": 3, "way": {"mode": "nearest"},
                   "layout": "patch_major", "time_table": rng.standard_normal((4, 4))}
    vivit = {"way": {"mode": "bicubic"}, "layout": "tubelets", "tubelet": 2}
    return [
        ("clip_position_rows", {**timesformer, "grid": [3, 6]}),
        ("clip_position_rows", {**timesformer, "grid": [2, 8]}),
        ("clip_position_rows", {**vivit, "table": rng.standard_normal((19, 4)), "grid": [3, 3], "frames": 4}),
        ("clip_position_rows", {**vivit, "table": rng.standard_normal((17, 4)), "grid": [3, 5], "frames": 2}),
        ("mid_position_tables", {"tables": rng.standard_normal((3, 27, 4)), "grid": [5, 3], "way": {"mode": "bicubic"},
                                 "prefix_tokens": 1, "suffix_tokens": 2, "source_grid": [4, 6]}),
        ("windowed_position_grid", {"background": rng.standard_normal((45, 4)), "window": rng.standard_normal((16, 4)),
                                    "grid": [24, 16], "source_grid": [5, 9], "window_side": 4}),
    ]


GRID_CHECK = KindCheck(
    kind="grid", calls=(resample_position_table, clip_position_rows, mid_position_tables, windowed_position_grid),
    reference=_reference, identify=_identify,
    mistakes={name: m.description for catalogue in (GRID_MISTAKES, CLIP_MISTAKES, MID_MISTAKES, WINDOWED_MISTAKES)
              for name, m in catalogue.items()}, wrong=_wrong, examples=_examples)

__all__ = ["GRID_CHECK", "clip_position_rows", "mid_position_tables", "resample_position_table",
           "windowed_position_grid"]
