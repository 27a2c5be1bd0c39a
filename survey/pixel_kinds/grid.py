r"""The ``grid`` comparison: a learned 2-D grid resampled to the image, observed as the embedding's output minus
its output with the table zeroed. A way that reads buckets (NaViT) is compared with the row its own float
arithmetic may read at a tie (:func:`refpos.encodings.grid_mistakes.reference_at_ties`: the exact row or, at a
tie, the row below), every other patch with the exact row. Tokens run as a batch of sequences that each gain the
same rows (:func:`frames_as_batch`): a clip fed as a batch of its frames (X-CLIP's tower), a video's frames or its
patches (VideoPrism's spatial and temporal stacks, the factorised layouts): each sequence's rows compared, a frame
table at the clip's ``(F, 1)``. A video tower's clip laid out in one sequence:
:mod:`survey.pixel_kinds.grid_clips`; tables between the layers: :mod:`survey.pixel_kinds.grid_mid`."""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.grid_clips import FACTORISED
from refpos.models.kinds.grid_fixed import FIXED_FIRST_ROW
from survey.pixel_kinds.base import (
    Outcome,
    absent,
    after_normalisation,
    embedding_site,
    graded,
    image_patch_grid,
    mistakes_of,
    rows_of,
    unit,
)
from survey.pixel_kinds.grid_clips import compare_clip
from survey.pixel_kinds.grid_mid import compare_with_mid
from survey.pixel_kinds.grid_shaped import shaped_case
from survey.pixels import PixelRun, Site, additive


def compare_grid(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A learned grid: the site whose table has ``record.table_rows × record.dim`` entries (module docstring)."""
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance, reference_at_ties

    if getattr(record, "window", 0):  # a window table tiled over the grid: two tables (SAM 2's Hiera)
        from survey.pixel_kinds.grid_windowed import compare_windowed

        return compare_windowed(record, run, sites)
    size = record.table_rows * record.dim
    site = next((s for s in sites if additive(s) and any(p.size == size for p in s.params.values())), None)
    if site is None:
        return absent(run, f"no position table of {record.table_rows} × {record.dim} entries at an input site "
                       f"(sites: {', '.join(s.path for s in sites) or 'none'})")
    if not embedding_site(site):
        return Outcome("not reached", f"{site.path}: the table is added inside {site.owner or 'the model'}'s own "
                       "forward, whose output is not the embedding (the survey sees no input site)", (site.path,))
    if (skip := after_normalisation([site], run)) is not None:
        return skip
    table = next(p for p in site.params.values() if p.size == size).astype(np.float64).reshape(record.table_rows, -1)
    if getattr(record, "clip", "") not in ("", *FACTORISED):  # a video tower's clip (TimeSformer, ViViT)
        return compare_clip(record, run, site, sites, table)
    cases = []
    for name, capture in site.captures.items():
        if not capture.owner_out or not capture.owner_zeroed:
            return Outcome("not reached", f"{site.owner}: no output recorded at the {name} size", (site.path,))
        out, zeroed = capture.owner_out[0].astype(np.float64), capture.owner_zeroed[0].astype(np.float64)
        diff, own_grid = map_sequences(out - zeroed, record.dim)
        frames = diff.shape[0] if own_grid is not None else frames_as_batch(diff, run.shapes[name],
                                                                              getattr(record, "clip", ""))
        observed = rows_of(diff[:1] if frames > 1 else diff, record.dim)
        if observed is None:
            return Outcome("not reached", f"{site.owner}: output {out.shape} has no axis of width {record.dim}",
                           (site.path,))
        if getattr(record, "packed", False):
            if name not in run.grids:
                return Outcome("not reached", f"{site.owner}: no (t, h, w) grid recorded at the {name} size",
                               (site.path,))
            noise = 2 * unit(run) * float(np.max(np.abs(out)))
            class_row = next((p.astype(np.float64).reshape(-1) for s in run.sites for n, p in s.params.items()
                              if getattr(record, "class_row", "") and n.endswith(record.class_row)), None)
            if getattr(record, "class_row", "") and class_row is None:
                return Outcome("not reached", f"no site holds the weight {record.class_row} the class tokens carry",
                               (site.path,))
            cases.append(packed_case(record, table, observed, tuple(int(v) for v in run.grids[name]), run, noise,
                                     class_row))
            continue
        if name in run.grids and len(run.shapes[name]) == 3 and record.variant is not None:  # patches and (h, w)
            cases.append(shaped_case(record, table, observed, tuple(int(v) for v in run.grids[name][-2:]), run.dtype,
                                     2 * unit(run) * float(np.max(np.abs(out)))))
            continue
        extra = record.prefix + record.suffix if (record.variant is None and record.way != FIXED_FIRST_ROW) or (
            record.variant is not None and record.variant.keep_extra) else 0
        grid = own_grid if own_grid is not None and own_grid[0] * own_grid[1] == observed.shape[0] - extra else \
            image_patch_grid(observed.shape[0] - extra, run.shapes[name])
        if record.variant is None and observed.shape[0] - extra == record.grid[0] * record.grid[1]:
            grid = record.grid  # a fixed table's own grid (a spectrogram's is not of the input's aspect)
        if getattr(record, "clip", "") == "frame_table":  # a table along the frames: the clip's (F, 1)
            grid = (observed.shape[0], 1) if observed.shape[0] == run.shapes[name][1] else None
        if grid is None and getattr(record, "clip", "") != "frame_table":
            # tokens the table does not reach (DINOv2's registers) gain exactly nothing: left out
            observed = reached(observed)
            grid = image_patch_grid(observed.shape[0] - extra, run.shapes[name])
        if grid is None:
            return Outcome("wrong", f"{site.owner}: {observed.shape[0]} rows at the {name} size are not "
                           f"{extra} extra rows and a patch grid of the image's aspect", (site.path,))
        noise = 2 * unit(run) * float(np.max(np.abs(out)))
        if record.variant is None:
            reference = record.reference(table, grid) if grid == record.grid else None
            if reference is None:
                return Outcome("wrong", f"the table is claimed fixed at {record.grid}, transformers resampled it "
                               f"to {grid}", (site.path,))
            cases.append((observed, reference, unit(run) * float(np.max(np.abs(table))) + noise, fixed_mistakes(
                record, table)))
            cases += [(later, reference, cases[-1][2], {}) for later in later_frames(diff, frames, record.dim,
                                                                                     observed.shape[0])]
            continue
        inputs = GridInputs(table, grid, record.variant, prefix_tokens=record.prefix, suffix_tokens=record.suffix,
                            source_grid=record.grid)
        reference = np.asarray(record.reference(table, grid), dtype=np.float64)
        if record.variant.read == "buckets":  # a tie's row below is the model's float arithmetic, not a mistake
            reference = reference_at_ties(observed, inputs) if observed.shape == reference.shape else reference
        mistakes = mistakes_of("grid", inputs) if getattr(record, "clip", "") != "frame_table" else {
            "frames reversed": reference[::-1], "no frame table": np.zeros_like(reference)}
        cases.append((observed, reference, grid_tolerance(inputs, run.dtype) + noise, mistakes))
        cases += [(later, reference, cases[-1][2], {}) for later in later_frames(diff, frames, record.dim,
                                                                                 observed.shape[0])]
    if getattr(record, "mid", 0):  # tables between the layers (YOLOS)
        return compare_with_mid(record, run, site, sites, table, cases)
    return graded(cases, (site.path,), f"{site.path} grid")


def reached(rows: np.ndarray) -> np.ndarray:
    """The rows the table reaches: tokens it does not reach (DINOv2's registers, VidEoMT's class and register tokens
    put before the patches) gain exactly nothing and are left out."""
    return rows[np.any(rows != 0, axis=1)]


def later_frames(diff: np.ndarray, frames: int, dim: int, count: int) -> list[np.ndarray | None]:
    """The rows of the sequences ``1 … frames − 1`` of a batch of frames, each compared as the first (its rows the
    table does not reach left out where the first's were: ``count`` rows were kept of it)."""
    rows = [rows_of(diff[k:k + 1], dim) for k in range(1, frames)]
    return [r if r is None or r.shape[0] == count else reached(r) for r in rows]


def fixed_mistakes(record: Any, table: np.ndarray) -> dict[str, np.ndarray | None]:
    """The wrong readings of a table added as it is (:data:`refpos.encodings.grid_fixed.FIXED_MISTAKES`): its grid
    read column by column, its extra rows after the grid, ViTPose's first row left out."""
    from refpos.encodings.grid_fixed import FIXED_MISTAKES
    from refpos.models.kinds.grid_fixed import FIXED_WAYS

    read = FIXED_WAYS[record.way]
    return {name: None if (rows := wrong(table, record.grid, record.prefix, record.suffix, read)) is None else
            np.asarray(rows, dtype=np.float64) for name, wrong in FIXED_MISTAKES.items()}


def map_sequences(diff: np.ndarray, dim: int) -> tuple[np.ndarray, tuple[int, int] | None]:
    """An output laid out as maps, ``(S, h, w, d)`` or ``(S, d, h, w)``, as its ``S`` sequences ``(S, h·w, d)`` and
    the ``(h, w)`` grid it states itself (an embedding that stacks a prompt over its image, SegGPT's, or runs the
    image and the prompt as a batch of two); any other output as it is, with no grid of its own."""
    if diff.ndim == 4 and diff.shape[1] == dim and diff.shape[-1] != dim:
        diff = np.moveaxis(diff, 1, -1)
    if diff.ndim != 4 or diff.shape[-1] != dim:
        return diff, None
    return diff.reshape(diff.shape[0], -1, dim), (int(diff.shape[1]), int(diff.shape[2]))


def frames_as_batch(diff: np.ndarray, shape: list[int], clip: str = "") -> int:
    """The sequences of an output ``(S, n, d)`` that each gain the same rows, or 1: a clip fed as a batch of images
    ``(F, C, H, W)``, one sequence per frame (X-CLIP's tower); a video ``(1, F, C, H, W)`` whose frames run as
    sequences of their patches (``clip`` ``"frame_grid"``, or an image's grid: VidEoMT) or whose patches run as
    sequences of their frames (``"frame_table"``; VideoPrism's stacks)."""
    if diff.ndim != 3 or diff.shape[0] == 1:
        return 1
    fed = (len(shape) == 4 and diff.shape[0] == shape[0]) or clip == "frame_table" or (
        clip in ("", "frame_grid") and len(shape) == 5 and diff.shape[0] == shape[0] * shape[1])
    return diff.shape[0] if fed else 1


def packed_case(record: Any, table: np.ndarray, observed: np.ndarray, thw: tuple[int, int, int], run: PixelRun,
                noise: float, class_row: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, float, dict[str, np.ndarray | None]]:
    """The case of a packed tower fed one image or clip of grid ``thw = (t, h, w)``: refpos's rows for its tokens
    (:meth:`refpos.models.kinds.grid.GridLayer.tokens`), the way's bound, and the wrong answers: each catalogued
    mistake of the grid laid out as the tower lays out its tokens, and the tokens in another order (raster for
    merge blocks, column by column for raster); ``class_row``: the weight a class token before the image carries
    (Inkling2). A clip's frame sinusoid (Kimi K2.5) is a buffer the zeroed run keeps: the survey feeds images."""
    from refpos.encodings.grid import packed_position_rows
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance

    _, h, w = thw
    inputs = GridInputs(table, (h, w), record.variant, prefix_tokens=record.prefix, suffix_tokens=record.suffix,
                        source_grid=record.grid)
    reference = np.asarray(record.tokens(table, [thw], class_row), dtype=np.float64)

    def laid_out(rows: np.ndarray | None, merge: int = record.merge) -> np.ndarray | None:
        if rows is None or rows.shape[0] != h * w or h % merge or w % merge:
            return None
        return np.asarray(packed_position_rows(lambda hw: rows, [thw], merge, class_row=class_row), dtype=np.float64)

    raster = np.asarray(record.reference(table, (h, w)), dtype=np.float64)
    wrong = {name: laid_out(rows) for name, rows in mistakes_of("grid", inputs).items()}
    if record.merge > 1:
        wrong["tokens in raster order"] = laid_out(raster, 1)
    else:  # the grid's rows listed column by column
        wrong["tokens column by column"] = laid_out(raster.reshape(h, w, -1).transpose(1, 0, 2).reshape(h * w, -1))
    return observed, reference, grid_tolerance(inputs, run.dtype) + noise, wrong
