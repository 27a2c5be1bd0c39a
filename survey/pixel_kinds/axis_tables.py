r"""The ``axis_tables`` comparison: a row table and a column table read at the indices each patch carries,
observed as what the embedding's output gains from them.

The tables are the input sites of ``record.rows × record.dim`` entries each: two modules (Pix2Struct's
``row_embedder`` and ``column_embedder``, told apart by their names), or one parameter of both
(:func:`refpos.encodings.axis_tables.split_tables`: Gemma 4's ``(2, P, D)``). At each size the owner's output
minus its output with a table zeroed is that table's rows (the addition is linear in the table); their sum over the
tables is what the patches gain, compared with refpos's rows at the indices the survey fed (:func:`fed_indices`:
the flattened patches' rows and columns numbered from 1, :func:`survey.pixel_inputs.number_patches`; Gemma 4's
``(x, y)`` ids of a grid and padding patches, :func:`survey.pixel_inputs.patch_ids`). Bound: the
kind's (:class:`refpos.encodings.axis_tables_mistakes.AxisTableInputs`) at the run's unit roundoff, plus
``2u·max|output|`` per subtraction; the kind's catalogued mistakes are the wrong answers each observation must
tell apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_inputs import PATCH_GRIDS, patch_ids
from survey.pixel_kinds.base import (
    Outcome,
    absent,
    after_normalisation,
    embedding_site,
    graded,
    mistakes_of,
    rows_of,
    unit,
)
from survey.pixels import PixelRun, Site, additive

#: float32's unit roundoff: the kind's bound is derived at it, and scaled to the run's
U32 = 2.0**-24


def fed_indices(run: PixelRun, size: str, patches: int) -> np.ndarray | None:
    """The indices ``(patches, 2)`` the survey fed at ``size``, in the order the input carries them: Pix2Struct's
    flattened patches numbered (row, column) from 1 over the grid of :data:`~survey.pixel_inputs.PATCH_GRIDS` with
    that many patches; patches fed with their ``(x, y)`` ids (Gemma 4's), the grid the run records in raster order
    and the patches past it padding (:func:`survey.pixel_inputs.patch_ids`); ``None`` for another input."""
    grids = run.grids.get(size)
    if run.input_name == "pixel_values" and grids is not None and len(run.shapes.get(size, [])) == 3:
        _, h, w = grids
        return patch_ids(h, w, patches - h * w)[0] if patches >= h * w else None
    if run.input_name != "flattened_patches":
        return None
    grid = next(((r, c) for r, c in PATCH_GRIDS if r * c == patches), None)
    if grid is None:
        return None
    rows, cols = np.meshgrid(np.arange(grid[0]) + 1, np.arange(grid[1]) + 1, indexing="ij")
    return np.stack([rows.ravel(), cols.ravel()], axis=1).astype(np.int64)


def _tables(record: Any, sites: list[Site]) -> tuple[list[Site], np.ndarray, np.ndarray] | str:
    """``(the sites, row table, column table)`` of the record, or a ``str`` saying what is missing."""
    from refpos.encodings.axis_tables import AXIS_TABLE_VARIANTS, split_tables

    size = record.rows * record.dim
    storage = AXIS_TABLE_VARIANTS[record.variant].storage
    if storage != "two_tables":
        site = next((s for s in sites if additive(s) and any(p.size == 2 * size for p in s.params.values())), None)
        if site is None:
            return f"no parameter of 2 × {record.rows} × {record.dim} entries at an input site"
        stored = next(p for p in site.params.values() if p.size == 2 * size).astype(np.float64)
        shape = (2, record.rows, record.dim) if storage == "axis_first" else (record.rows, 2, record.dim)
        rows, cols = split_tables(stored.reshape(shape), record.variant)
        return [site], np.asarray(rows), np.asarray(cols)
    found = {}
    for site in sites:
        table = next((p for p in site.params.values() if p.size == size), None) if additive(site) else None
        name = site.path.rsplit(".", 1)[-1].lower()
        axis = "row" if "row" in name else "column" if "col" in name else None
        if table is not None and axis is not None and axis not in found:
            found[axis] = (site, table.astype(np.float64).reshape(record.rows, record.dim))
    if set(found) != {"row", "column"}:
        return f"no row and column tables of {record.rows} × {record.dim} entries at input sites (found: " \
               f"{', '.join(found) or 'none'})"
    return [found["row"][0], found["column"][0]], found["row"][1], found["column"][1]


def compare_axis_tables(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """Factorised tables read at per-patch indices (module docstring)."""
    from refpos.encodings.axis_tables_mistakes import AxisTableInputs, axis_table_inputs

    tables = _tables(record, sites)
    if isinstance(tables, str):
        return absent(run, f"{tables} (sites: {', '.join(s.path for s in sites) or 'none'})")
    owners, rows, cols = tables
    paths = tuple(s.path for s in owners)
    if not all(embedding_site(s) for s in owners):
        return Outcome("not reached", f"{paths[0]}: the tables are added inside {owners[0].owner or 'the model'}'s "
                       "own forward, whose output is not the embedding", paths)
    if (skip := after_normalisation(owners, run)) is not None:
        return skip
    cases = []
    for name in owners[0].captures:
        gained, noise = None, 0.0
        for site in owners:
            capture = site.captures.get(name)
            if capture is None or not capture.owner_out or not capture.owner_zeroed:
                return Outcome("not reached", f"{site.owner}: no output recorded at the {name} size", paths)
            out, zeroed = capture.owner_out[0].astype(np.float64), capture.owner_zeroed[0].astype(np.float64)
            part = rows_of(out - zeroed, record.dim)
            if part is None:
                return Outcome("not reached", f"{site.owner}: output {out.shape} has no axis of width {record.dim}",
                               paths)
            gained = part if gained is None else gained + part
            noise += 2 * unit(run) * float(np.max(np.abs(out)))
        indices = fed_indices(run, name, gained.shape[0])
        if indices is None:
            return Outcome("not reached", f"{paths[0]}: the survey does not know the indices it fed the "
                           f"{run.input_name} input at the {name} size", paths)
        inputs: AxisTableInputs = axis_table_inputs(indices, rows, cols, record.variant)
        reference, bound = inputs.reference()
        cases.append((gained, reference, bound * (unit(run) / U32) + noise, mistakes_of("axis_tables", inputs)))
    return graded(cases, paths, f"{paths[0]} axis_tables")


__all__ = ["compare_axis_tables", "fed_indices"]
