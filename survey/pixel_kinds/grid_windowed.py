r"""The ``grid`` comparison of a windowed grid (SAM 2's Hiera, a record whose ``window`` is set): a background table
resampled bicubic to the patch map plus a window table tiled over it
(:func:`refpos.encodings.grid_windowed.windowed_position_grid`).

The two tables are two sites of one owner (Hiera's ``pos_embed`` ``(1, d, M_h, M_w)`` and ``pos_embed_window``
``(1, d, m, m)``, channels first), both added where the owner's first block reads its input
(:attr:`survey.pixels.Site.at`). Each site's capture holds that input as the model ran and again with the site's table
zeroed; the sum is linear in each table, so ``(x − x_{B=0}) + (x − x_{W=0})`` is exactly what the two add,
``P = R(B) + tile(W)``, whatever the patches are. Compared with refpos's record at the map's grid, both tables read
channels last.

**Bound.** The bicubic resampling's bound of a port computing in the run's dtype
(:func:`refpos.encodings.grid_mistakes.grid_tolerance`), the sum ``R(B) + tile(W)`` rounded once
(``u·(max|R(B)| + max|W|)``; the tiled rows are gathered exactly), and each of the two subtractions
``2u·max|x|`` (``x`` and the zeroed input are values of the run's dtype, the patches' sum rounded once more).
The wrong answers: :data:`~refpos.encodings.grid_windowed.WINDOW_MISTAKES` (a table left out, the window resampled
rather than tiled, the window transposed, the background tiled rather than resampled) and the bicubic catalogue's
mistakes of the background with the window tiled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import (
    Outcome,
    absent,
    after_normalisation,
    graded,
    image_patch_grid,
    mistakes_of,
    rows_of,
    unit,
)
from survey.pixels import PixelRun, Site, additive


def _channels_last(site: Site, cells: int, dim: int) -> np.ndarray | None:
    """The site's table ``(1, d, a, b)`` of ``cells = a·b`` cells as ``(cells, d)`` rows in raster order."""
    for value in site.params.values():
        if value.ndim == 4 and value.shape[:2] == (1, dim) and value.shape[2] * value.shape[3] == cells:
            return np.moveaxis(value.astype(np.float64)[0], 0, -1).reshape(cells, dim)
    return None


def compare_windowed(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A windowed grid: the sites of the background and of the window table (module docstring)."""
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance
    from refpos.encodings.grid_variants import GRID_VARIANTS
    from refpos.encodings.grid_windowed import WINDOW_MISTAKES

    cells, window_cells = record.grid[0] * record.grid[1], record.window ** 2
    found = {}
    for name, cell_count in (("background", cells), ("window", window_cells)):
        found[name] = next(((s, t) for s in sites if additive(s) and s.at
                            and (t := _channels_last(s, cell_count, record.dim)) is not None), None)
    missing = [name for name, hit in found.items() if hit is None]
    if missing:
        return absent(run, f"no {' or '.join(missing)} table (1, {record.dim}, …) added at a first layer's input "
                      f"(sites: {', '.join(s.path for s in sites) or 'none'})")
    (background_site, background), (window_site, window) = found["background"], found["window"]
    paths = (background_site.path, window_site.path)
    if (skip := after_normalisation([background_site, window_site], run)) is not None:
        return skip
    u = unit(run)
    cases = []
    for size, capture in background_site.captures.items():
        other = window_site.captures.get(size)
        if not capture.owner_out or not capture.owner_zeroed or other is None or not other.owner_zeroed:
            return Outcome("not reached", f"{background_site.owner}: no first-layer input recorded at the {size} "
                           "size", paths)
        out = capture.owner_out[0].astype(np.float64)
        added = rows_of((out - capture.owner_zeroed[0]) + (out - other.owner_zeroed[0].astype(np.float64)),
                        record.dim)
        grid = None if added is None else image_patch_grid(added.shape[0], run.shapes[size])
        if grid is None:
            return Outcome("wrong", f"{background_site.owner}: the first layer's input {out.shape} at the {size} size "
                           "is no patch map of the image's aspect", paths)
        reference = np.asarray(record.reference(background, grid, window_table=window), dtype=np.float64)
        resampled = np.asarray(GRID_VARIANTS["bicubic"].resample(background, grid, prefix_tokens=0,
                                                                 source_grid=record.grid))
        inputs = GridInputs(background, grid, GRID_VARIANTS["bicubic"], source_grid=record.grid)
        bound = (grid_tolerance(inputs, run.dtype) + u * (float(np.abs(resampled).max()) + float(np.abs(window).max()))
                 + 4 * u * float(np.max(np.abs(out))))
        tiled = reference - resampled
        wrong = {name: np.asarray(make(background, window, grid, record.grid, record.window), dtype=np.float64)
                 for name, make in WINDOW_MISTAKES.items()}
        wrong |= {f"background {name}": None if rows is None or rows.shape != tiled.shape else rows + tiled
                  for name, rows in mistakes_of("grid", inputs).items()}
        cases.append((added, reference, bound, wrong))
    return graded(cases, paths, f"{background_site.owner} windowed grid")
