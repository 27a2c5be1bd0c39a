r"""The ``grid`` comparison of the tables a stack adds between its layers (YOLOS's mid position embeddings).

The module that resamples them (its only weight the tables, ``(L − 1, 1, N, d)``) returns them resampled; what it
returns minus the same with the weight zeroed is the tables as added, compared table by table with
:meth:`refpos.models.kinds.grid.GridLayer.mid_tables` at the patch grid of the image's aspect, within the way's
bound (:func:`refpos.encodings.grid_mistakes.grid_tolerance`, the largest table's) plus the subtraction's
``2u·max|output|``. The wrong answers: each catalogued grid mistake made on every table, the tables in the other
layer order, and the input's table added at every layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, after_normalisation, graded, image_patch_grid, mistakes_of, unit
from survey.pixels import PixelRun, Site


def mid_cases(record: Any, run: PixelRun, site: Site, sites: list[Site], table: np.ndarray
              ) -> tuple[Site, list[tuple]] | Outcome:
    """The mid tables' site and cases (module docstring); ``site`` and ``table`` are the input's."""
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance

    size = record.mid * record.table_rows * record.dim
    mid = next((s for s in sites if s.path != site.path and any(p.size == size for p in s.params.values())), None)
    if mid is None:
        return Outcome("wrong", f"no {record.mid} tables of {record.table_rows} × {record.dim} entries between the "
                       f"layers (sites: {', '.join(s.path for s in sites)})", (site.path,))
    if (skip := after_normalisation([mid], run)) is not None:
        return skip
    tables = next(p for p in mid.params.values() if p.size == size).astype(np.float64).reshape(
        record.mid, record.table_rows, record.dim)
    cases = []
    for name in site.captures:  # every size the input's table was recorded at
        capture = mid.captures.get(name)
        if capture is None or not capture.owner_out or not capture.owner_zeroed:
            return Outcome("not reached", f"{mid.owner}: no output recorded at the {name} size", (site.path, mid.path))
        out, zeroed = capture.owner_out[0].astype(np.float64), capture.owner_zeroed[0].astype(np.float64)
        if out.size % (record.mid * record.dim):
            return Outcome("not reached", f"{mid.owner}: output {out.shape} is not {record.mid} tables of width "
                           f"{record.dim}", (site.path, mid.path))
        observed = (out - zeroed).reshape(record.mid, -1, record.dim)
        grid = image_patch_grid(observed.shape[1] - record.prefix - record.suffix, run.shapes[name])
        if grid is None:
            return Outcome("wrong", f"{mid.owner}: {observed.shape[1]} rows a table at the {name} size are not "
                           f"{record.prefix + record.suffix} extra rows and a patch grid of the image's aspect",
                           (site.path, mid.path))
        reference = np.asarray(record.mid_tables(tables, grid), dtype=np.float64)
        inputs = [GridInputs(t, grid, record.variant, prefix_tokens=record.prefix, suffix_tokens=record.suffix,
                             source_grid=record.grid) for t in tables]
        bound = max(grid_tolerance(i, run.dtype) for i in inputs) + 2 * unit(run) * float(np.max(np.abs(out)))
        per_table = [mistakes_of("grid", i) for i in inputs]
        wrong = {f"{mistake} at every table": None if any(m[mistake] is None for m in per_table)
                 else np.stack([m[mistake] for m in per_table]) for mistake in per_table[0]}
        wrong["the tables in the other layer order"] = reference[::-1] if record.mid > 1 else None
        wrong["the input's table at every layer"] = np.stack([np.asarray(record.reference(table, grid))] * record.mid)
        cases.append((observed, reference, bound, wrong))
    return mid, cases


def compare_with_mid(record: Any, run: PixelRun, site: Site, sites: list[Site], table: np.ndarray,
                     cases: list[tuple]) -> Outcome:
    """The input's ``cases`` and the mid tables' graded together (module docstring)."""
    found = mid_cases(record, run, site, sites, table)
    if isinstance(found, Outcome):
        return found
    mid, more = found
    first = graded(cases, (site.path, mid.path), f"{site.path} grid")
    if first.status != "exact":
        return first
    second = graded(more, (site.path, mid.path), f"{mid.path} tables between the layers")
    if second.status != "exact":
        return second
    return Outcome("exact", "", (site.path, mid.path), max(first.error or 0.0, second.error or 0.0),
                   first.tried + second.tried, first.survived + second.survived)
