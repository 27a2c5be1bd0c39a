r"""The ``grid`` comparison of a video tower's clip (TimeSformer, ViViT: :mod:`refpos.encodings.grid_clips`).

The run is fed a clip ``(1, F, C, H, W)``. What the position table adds is the embedding's output minus its output
with the table zeroed, one row per token; where the tower also adds a learned time table (TimeSformer's
``time_embeddings``, its own site), what that adds is taken the same way and the two are summed (each addition is
linear in its table). refpos's rows are :meth:`refpos.models.kinds.grid.GridLayer.clip_rows` at the clip's frames
and the patch grid of the image's aspect. Bound: the way's resampling bound
(:func:`refpos.encodings.grid_mistakes.grid_tolerance`) plus each subtraction's ``2u·max|output|`` and the sum's
``u·max|P|``.

The wrong answers: the grid's catalogued mistakes laid out over the clip (where the way can resample this clip),
bicubic or bilinear for a nearest way, the time table skipped, the tokens frame by frame instead of patch by patch
(TimeSformer), and a ViViT table's tubelet frames read patch by patch or each frame's grid transposed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, graded, image_patch_grid, mistakes_of, rows_of, unit
from survey.pixels import PixelRun, Site


def _added(site: Site, name: str, dim: int) -> tuple[np.ndarray | None, float]:
    """The rows the site's table adds at the ``name`` size, and the largest output entry (``None``: not recorded)."""
    capture = site.captures.get(name)
    if capture is None or not capture.owner_out or not capture.owner_zeroed:
        return None, 0.0
    out, zeroed = capture.owner_out[0].astype(np.float64), capture.owner_zeroed[0].astype(np.float64)
    return rows_of(out - zeroed, dim), float(np.max(np.abs(out)))


def compare_clip(record: Any, run: PixelRun, site: Site, sites: list[Site], table: np.ndarray) -> Outcome:
    """A video tower's grid (module docstring): ``site`` holds the position table ``table``; ``sites`` the sites
    not yet accounted for, among which the time table's."""
    from refpos.encodings.grid_clips import frame_major_order, patch_major_rows
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance

    paths = (site.path,)
    time_site, time_table = None, None
    if record.time:
        size = record.time * record.dim
        time_site = next((s for s in sites if s.owner == site.owner and s.path != site.path
                          and any(p.size == size for p in s.params.values())), None)
        if time_site is None:
            return Outcome("wrong", f"no time table of {record.time} × {record.dim} entries beside {site.path}", paths)
        time_table = next(p for p in time_site.params.values() if p.size == size).astype(np.float64).reshape(
            record.time, -1)
        paths = (site.path, time_site.path)
    cases = []
    for name in site.captures:
        observed, largest = _added(site, name, record.dim)
        if observed is None:
            return Outcome("not reached", f"{site.owner}: no output of {record.dim} wide rows at the {name} size",
                       paths)
        noise = 2 * unit(run) * largest
        if time_site is not None:
            timed, largest = _added(time_site, name, record.dim)
            if timed is None or timed.shape != observed.shape:
                return Outcome("not reached", f"{time_site.path}: no output at the {name} size", paths)
            observed, noise = observed + timed, noise + 2 * unit(run) * largest
        shape = run.shapes[name]
        if len(shape) != 5:
            return Outcome("not reached", f"{site.owner}: fed {shape} at the {name} size, not a clip (1, F, C, H, W)",
                           paths)
        frames = int(shape[1])
        token_frames = frames // record.stride if record.clip == "tubelets" else frames
        grid = image_patch_grid((observed.shape[0] - 1) // token_frames, shape)
        if grid is None or 1 + token_frames * grid[0] * grid[1] != observed.shape[0]:
            return Outcome("wrong", f"{site.owner}: {observed.shape[0]} rows at the {name} size are not a CLS row "
                           f"and {token_frames} frames of a patch grid of the image's aspect", paths)
        reference = np.asarray(record.clip_rows(table, grid, frames, time_table), dtype=np.float64)
        inputs = GridInputs(table, grid, record.variant, prefix_tokens=record.prefix, source_grid=record.grid)
        bound = grid_tolerance(inputs, run.dtype) + noise + unit(run) * float(np.max(np.abs(reference)))
        wrong: dict[str, np.ndarray | None] = {}
        patches = grid[0] * grid[1]
        if record.clip == "patch_major":
            resamples = patches != record.grid[0] * record.grid[1]
            for mistake, rows in (mistakes_of("grid", inputs) if resamples else {}).items():
                wrong[mistake] = None if rows is None or rows.shape[0] != 1 + patches else np.asarray(
                    patch_major_rows(rows[0], rows[1:], frames, time_table), dtype=np.float64)
            if resamples and record.variant.mode == "nearest":  # another mode for the way's copied rows
                for mode in ("bicubic", "bilinear"):
                    wrong[f"{mode} for nearest"] = np.asarray(dataclasses.replace(record, way=mode).clip_rows(
                        table, grid, frames, time_table), dtype=np.float64)
            if time_table is not None:
                wrong["the time table skipped"] = np.asarray(
                    record.clip_rows(table, grid, frames, np.zeros_like(time_table)), dtype=np.float64)
            if frames > 1:
                wrong["the tokens frame by frame"] = np.concatenate(
                    [reference[:1], reference[1:][frame_major_order(patches, frames)]])
        elif record.depth > 1:  # the table as it is: its layout
            grids = reference[1:].reshape(record.depth, grid[0], grid[1], -1)
            wrong["the tubelet frames patch by patch"] = np.concatenate(
                [reference[:1], grids.transpose(1, 2, 0, 3).reshape(-1, grids.shape[-1])])
            wrong["each frame's grid transposed"] = np.concatenate(
                [reference[:1], grids.transpose(0, 2, 1, 3).reshape(-1, grids.shape[-1])]) if grid[0] > 1 else None
        else:  # one tubelet frame: an image's grid
            wrong.update(mistakes_of("grid", inputs))
        cases.append((observed, reference, bound, wrong))
    return graded(cases, paths, f"{site.path} clip grid")
