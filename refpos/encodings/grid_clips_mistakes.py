r"""The catalogued mistakes of a video clip's grid rows (TimeSformer, ViViT: :mod:`refpos.encodings.grid_clips`), one
:class:`~refpos.encodings.grid_mistakes.GridMistake` each, and :func:`identify_clip`.

:class:`ClipInputs` holds one call: the table (a CLS row, then one grid, or one grid per tubelet frame), the patch
grid ``(h, w)``, the clip's ``F`` frames, the way the grid is resampled, the layout and, patch by patch, the time
table ``T`` of ``N`` rows. Its reference is :func:`~refpos.encodings.grid_clips.patch_major_rows` of the grid
``G'`` (the table's rows as they are at the table's patch count ``M_h·M_w``, else resampled the way's way), or the
table of tubelet frames as it is (one tubelet frame: resampled as an image's grid).

**Bound.** A correct float32 port copies or resamples the grid (the way's bound,
:func:`~refpos.encodings.grid_mistakes.grid_tolerance`; rows read as they are: their rounding to the dtype,
``u·max|table|``), copies the time table's rows (their rounding, ``u·max|T|``) and rounds the sum
``G'_p + T'_f`` once, ``u·max|P|``.

Besides this module's mistakes, every grid mistake of :data:`~refpos.encodings.grid_mistakes.GRID_MISTAKES` made on
the grid the clip resamples, laid out over the clip, is named by its own name (:func:`clip_mistakes`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from refpos.backend import to_numpy
from refpos.encodings.grid import resample_position_sequence
from refpos.encodings.grid_clips import frame_major_order, patch_major_rows
from refpos.encodings.grid_mistakes import (
    GRID_MISTAKES,
    UNIT_ROUNDOFF,
    GridInputs,
    GridMistake,
    grid_tolerance,
    identify_among,
)
from refpos.encodings.grid_variants import GridVariant
from refpos.validation import check_choice, check_int

#: the layouts of :mod:`refpos.encodings.grid_clips` whose rows are one sequence, a CLS row and the clip's tokens ->
#: the grids its table holds, of ``(frames, tubelet)``: one patch by patch, one per tubelet frame
TABLE_GRIDS: dict[str, Callable[[int, int], int]] = {"patch_major": lambda frames, tubelet: 1,
                                                    "tubelets": lambda frames, tubelet: frames // tubelet}


@dataclasses.dataclass(frozen=True)
class ClipInputs:
    """One clip's rows (module docstring): ``table`` ``(1 + D·M_h·M_w, d)`` with ``D`` tubelet frames (``D = 1``
    patch by patch), ``time_table`` ``(N, d)`` or ``None``; a ``ValueError`` or ``TypeError`` naming the parameter
    that does not fit."""

    table: np.ndarray
    grid: tuple[int, int]
    frames: int
    variant: GridVariant
    layout: str
    time_table: np.ndarray | None = None
    tubelet: int = 1
    source_grid: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        check_choice("layout", self.layout, tuple(TABLE_GRIDS))
        frames = check_int("frames", self.frames, minimum=1)
        tubelet = check_int("tubelet", self.tubelet, minimum=1)
        if not self.variant.keep_extra:
            raise ValueError("way: a clip's CLS row stays before its tokens, keep_extra must be true")
        if self.layout == "patch_major" and (tubelet != 1):
            raise ValueError(f"tubelet: a clip laid out patch by patch has no tubelets, got {tubelet}")
        if self.layout == "tubelets" and self.time_table is not None:
            raise ValueError("time_table: a table of tubelet frames holds its own time, give None")
        if self.layout == "tubelets" and frames % tubelet:
            raise ValueError(f"frames: {frames} frames are no whole number of tubelets of {tubelet} frames")
        if self.table.ndim != 2 or (self.table.shape[0] - 1) % self.depth or self.table.shape[0] < 2:
            raise ValueError(f"table must have shape (1 + {self.depth}·cells, dim): a CLS row and "
                             f"{self.depth} grid(s), got {self.table.shape}")
        cells = (self.table.shape[0] - 1) // self.depth
        if self.source_grid is None and math.isqrt(cells) ** 2 != cells:
            raise ValueError(f"source_grid: the table's {cells} cells a grid are not a square, give (M_h, M_w)")
        if self.source_grid is not None and self.source_grid[0] * self.source_grid[1] != cells:
            raise ValueError(f"source_grid {self.source_grid} does not hold the table's {cells} cells a grid")
        if self.time_table is not None and (self.time_table.ndim != 2 or self.time_table.shape[1]
                                            != self.table.shape[1]):
            raise ValueError(f"time_table must have shape (rows, {self.table.shape[1]}), got {self.time_table.shape}")
        if self.depth > 1 and tuple(self.grid) != self.source():
            raise ValueError(f"grid: a table of {self.depth} tubelet frames is added at its own grid "
                             f"{self.source()} only (the model's code reads all its rows as one grid), got "
                             f"{tuple(self.grid)}")

    @property
    def depth(self) -> int:
        """The table's grids: ``F / s`` tubelet frames, one patch by patch."""
        return TABLE_GRIDS[self.layout](self.frames, self.tubelet)

    @property
    def patches(self) -> int:
        return self.grid[0] * self.grid[1]

    def source(self) -> tuple[int, int]:
        """``(M_h, M_w)``."""
        cells = (self.table.shape[0] - 1) // self.depth
        side = math.isqrt(cells)
        return tuple(self.source_grid) if self.source_grid is not None else (side, side)

    def resamples(self) -> bool:
        """Whether the clip's grid goes through the way: patch by patch at another patch count than the table's,
        and a table of one tubelet frame."""
        if self.layout == "tubelets":
            return self.depth == 1
        return self.patches != self.source()[0] * self.source()[1]

    def grid_inputs(self, variant: GridVariant | None = None) -> GridInputs:
        """The grid the clip resamples, as :class:`GridInputs` (a CLS row before it)."""
        return GridInputs(self.table, tuple(self.grid), variant or self.variant, prefix_tokens=1,
                          source_grid=self.source())

    def laid_out(self, rows: np.ndarray, time_table: np.ndarray | None = None) -> np.ndarray | None:
        """A resampled grid ``(1 + h·w, d)`` (its CLS row first) laid out over the clip (``None``: another
        shape)."""
        rows = np.asarray(rows, dtype=np.float64)
        if rows.shape[0] != 1 + self.patches:
            return None
        if self.layout == "tubelets":
            return rows
        return to_numpy(patch_major_rows(rows[0], rows[1:], self.frames, time_table))

    def reference(self, variant: GridVariant | None = None, time_table: np.ndarray | None = None,
                  *, resample: bool | None = None) -> np.ndarray:
        r""":math:`P_0 = c,\ P_{1 + pF + f} = G'_p + T_{\lfloor fN/F \rfloor}`, or the table of tubelet frames
        (module docstring); ``variant``, ``time_table`` and ``resample`` change one choice (for the mistakes)."""
        times = self.time_table if time_table is None else time_table
        if self.depth > 1:
            return self.table
        resample = self.resamples() if resample is None else resample
        rows = self.grid_inputs(variant).resample() if resample else self.table
        return self.laid_out(rows, times)

    def tolerance(self, dtype: str = "float32") -> float:
        """A correct port's bound (module docstring)."""
        u = UNIT_ROUNDOFF[check_choice("dtype", dtype, tuple(UNIT_ROUNDOFF))]
        grid = grid_tolerance(self.grid_inputs(), dtype) if self.resamples() else u * float(np.abs(self.table).max())
        added = 0.0 if self.time_table is None else u * (float(np.abs(self.time_table).max())
                                                         + float(np.abs(self.reference()).max()))
        return grid + added


def _patch_major(inputs: ClipInputs) -> bool:
    return inputs.layout == "patch_major"


def _timed(inputs: ClipInputs) -> bool:
    return _patch_major(inputs) and inputs.time_table is not None


def _frame_major(inputs: ClipInputs) -> np.ndarray:
    """The tokens listed frame by frame, row ``1 + f·P + p``, where the model lists them patch by patch."""
    reference = inputs.reference()
    return np.concatenate([reference[:1], reference[1:][frame_major_order(inputs.patches, inputs.frames)]])


def _time_linear(inputs: ClipInputs) -> np.ndarray:
    """The time table resampled linearly (``align_corners=False``) to the ``F`` frames."""
    times = to_numpy(resample_position_sequence(inputs.time_table, inputs.frames, mode="linear"))
    return inputs.reference(time_table=times)  # F rows to F frames: read as they are


def _tubelet_grids(inputs: ClipInputs) -> np.ndarray:
    """The reference's grids ``(D, h, w, d)``."""
    return inputs.reference()[1:].reshape(inputs.depth, inputs.grid[0], inputs.grid[1], -1)


def _with_cls(inputs: ClipInputs, grids: np.ndarray) -> np.ndarray:
    return np.concatenate([inputs.reference()[:1], grids.reshape(-1, grids.shape[-1])])


#: every mistake of a clip's rows, by name (the grid's own, laid out over the clip: :func:`clip_mistakes`)
CLIP_MISTAKES: dict[str, GridMistake] = {m.name: m for m in (
    GridMistake("grid_clip_time_table_skipped", "the time table left out: every frame of a patch reads the patch's "
                "grid row alone", lambda i: i.reference(time_table=np.zeros_like(i.time_table)), _timed),
    GridMistake("grid_clip_frame_major", "the tokens listed frame by frame, row 1 + f·P + p, where the model lists "
                "each patch with its frames in turn, row 1 + p·F + f", _frame_major,
                lambda i: _patch_major(i) and i.frames > 1 and i.patches > 1),
    GridMistake("grid_clip_time_linear_for_nearest", "the time table resampled linearly to the clip's frames where "
                "the model reads it nearest, T[floor(f·N/F)]", _time_linear,
                lambda i: _timed(i) and i.time_table.shape[0] not in (1, i.frames)),
    GridMistake("grid_clip_bicubic_for_nearest", "the clip's grid resampled bicubic where the model resamples it "
                "nearest", lambda i: i.reference(dataclasses.replace(i.variant, mode="bicubic")),
                lambda i: i.variant.mode == "nearest" and i.variant.read == "resample" and i.resamples()),
    GridMistake("grid_clip_bilinear_for_nearest", "the clip's grid resampled bilinear where the model resamples it "
                "nearest", lambda i: i.reference(dataclasses.replace(i.variant, mode="bilinear")),
                lambda i: i.variant.mode == "nearest" and i.variant.read == "resample" and i.resamples()),
    GridMistake("grid_clip_resampled_at_same_count", "the grid resampled to (h, w) where the model, at the table's "
                "own patch count, reads the table's rows as they are in the new grid's raster order",
                lambda i: i.reference(resample=True),
                lambda i: _patch_major(i) and not i.resamples() and tuple(i.grid) != i.source()),
    GridMistake("grid_clip_tubelets_patch_major", "a table of tubelet frames read patch by patch (each patch with "
                "its tubelet frames in turn) where it holds one grid per tubelet frame",
                lambda i: _with_cls(i, _tubelet_grids(i).transpose(1, 2, 0, 3)),
                lambda i: i.layout == "tubelets" and i.depth > 1),
    GridMistake("grid_clip_tubelet_grid_transposed", "each tubelet frame's grid read column by column where the "
                "table lists it row by row", lambda i: _with_cls(i, _tubelet_grids(i).transpose(0, 2, 1, 3)),
                lambda i: i.layout == "tubelets" and min(i.grid) > 1),
)}


def _lifted(mistake: GridMistake) -> GridMistake:
    """``mistake`` made on the grid the clip resamples, laid out over the clip."""
    return GridMistake(mistake.name, mistake.description,
                       lambda i: i.laid_out(mistake.compute(i.grid_inputs()), i.time_table),
                       lambda i: i.resamples() and mistake.applies(i.grid_inputs()))


#: the grid's mistakes, each made on the clip's resampled grid
LIFTED_MISTAKES: dict[str, GridMistake] = {name: _lifted(m) for name, m in GRID_MISTAKES.items()}


def clip_mistakes() -> dict[str, GridMistake]:
    """Every mistake :func:`identify_clip` may name: this module's, then the grid's laid out over the clip.

    See Also
    --------
    identify_clip : the search over them.
    """
    return {**CLIP_MISTAKES, **LIFTED_MISTAKES}


def identify_clip(candidate: np.ndarray, inputs: ClipInputs, *, dtype: str = "float32") -> str | None:
    """The name of the catalogued mistake ``candidate`` made, ``None`` when it is within a correct ``dtype`` port's
    bound, :data:`~refpos.encodings.grid_mistakes.UNRECOGNISED` when no mistake explains it.

    See Also
    --------
    refpos.encodings.grid_mistakes.identify_among : the search.
    """
    return identify_among(candidate, inputs.reference(), inputs.tolerance(dtype), inputs, clip_mistakes().values())


__all__ = ["CLIP_MISTAKES", "LIFTED_MISTAKES", "TABLE_GRIDS", "ClipInputs", "clip_mistakes", "identify_clip"]
