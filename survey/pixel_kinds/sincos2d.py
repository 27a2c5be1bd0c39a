r"""The ``sincos2d`` comparison: a fixed 2-D sin–cos table added at the input (ViT-MAE's), observed as the table the
model's code builds and the rows the embedding's output gains.

* **The table built** (the site's values before the survey's seeded draw, :attr:`survey.pixels.Site.initial`)
  against the variant's :func:`~refpos.encodings.sincos2d.sincos_2d_grid` at the record's native grid, within the
  kind's bound (:meth:`refpos.encodings.sincos2d_mistakes.Sincos2dInputs.bound`: a float32 port's angle and
  ``sin``/``cos``), with each catalogued mistake of ``refpos check sincos2d`` graded wrong.
* **The rows read** at each size: the embedding's output minus its output with the table zeroed, against the
  drawn table at the native grid and against the record's resampling of it (``way``, a
  :data:`~refpos.encodings.grid_variants.GRID_VARIANTS` record) at the resampled one, with the ``grid`` kind's
  catalogued mistakes graded wrong there. Bound: the subtraction's ``2u·max|output|`` (as :mod:`.tables`), plus
  the resampling's :func:`~refpos.encodings.grid_mistakes.grid_tolerance`. A model that keeps only some patches (a
  random masking, in an order of its own) gains rows of the table in that order: each observed row is compared
  with the reference row nearest to it, and every mistake with the same rows of its own output.

A table a stage after the stack adds (``at = "output"``, one record per path: Granite-Docling's connector) is held
by a position module the survey records as a function: **the table built** as above, at the record's shuffled grid,
and **the rows added**: the module's output minus its input at each size its forward called it, against the table
as built (rows read one row off graded wrong), within the subtraction's ``2u·max|output|``. A path the run's
forward does not take (the connector's fine path, taken with ``fine=True``) shows its table built alone; the same
module class adds it, as the path the run took shows.

A sine map added inside attention (``at = "query_key"``, ``"cross_keys"``: DETR's) is compared on the inputs of each
layer's projections (:mod:`survey.pixel_kinds.sincos2d_query_key`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import (
    Outcome,
    absent,
    after_normalisation,
    built_alone,
    check_target,
    embedding_site,
    graded,
    mistakes_of,
    rows_of,
    unit,
)
from survey.pixel_kinds.sincos2d_query_key import compare_query_key
from survey.pixels import PixelRun, Site, additive


def _table(record: Any, sites: list[Site]) -> tuple[Site, str] | None:
    """The input site holding a table of the record's ``cls_rows + h·w`` rows of ``features`` columns."""
    rows = record.record.parameters.get("cls_rows", 0) + record.grid[0] * record.grid[1]
    for site in sites:
        for name, table in site.params.items():
            if additive(site) and table.size == rows * record.features:
                return site, name
    return None


def _aligned(observed: np.ndarray, reference: np.ndarray, bound: Any, mistakes: dict[str, np.ndarray | None]
             ) -> tuple:
    """A case whose observed rows are some of the reference's in an order of the model's: each row against the
    reference row nearest to it, every mistake's same rows (a mistake of another shape as it is: told apart)."""
    index = np.argmin(np.abs(observed[:, None, :] - reference[None, :, :]).max(axis=-1), axis=1)
    picked = {name: None if m is None else (m[index] if m.shape == reference.shape else m)
              for name, m in mistakes.items()}
    return observed, reference[index], bound, picked


def compare_sincos2d(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A fixed sin–cos grid at the input (module docstring)."""
    from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance
    from refpos.encodings.grid_variants import GRID_VARIANTS
    from refpos.encodings.sincos2d_mistakes import Sincos2dInputs

    if record.at == "output" and record.grid is not None and record.record.builder == "grid":
        return _compare_output(record, run, sites)
    if record.at in ("query_key", "cross_keys"):
        return compare_query_key(record, run)
    if record.at != "input" or record.grid is None or record.record.builder != "grid":
        return Outcome("not reached", f"{record.stack} layer {record.index}: the survey compares a sin–cos table of "
                       f"a fixed patch grid added at the input (this one: {record.variant} at {record.at})")
    found = _table(record, sites)
    if found is None:
        return absent(run, f"no table of {record.grid} patches × {record.features} at an input site for "
                       f"{record.stack} (sites: {', '.join(s.path for s in sites) or 'none'})")
    site, name = found
    (height, width), cls_rows = record.grid, record.record.parameters.get("cls_rows", 0)
    built = site.initial.get(name, site.params[name]).astype(np.float64).reshape(-1, record.features)
    inputs = Sincos2dInputs(record.variant, {"height": height, "width": width, "dim": record.features,
                                             **dict(record.settings)})
    reference, bound = check_target("sincos2d").reference(inputs)
    cases = [(built, np.asarray(reference, dtype=np.float64), bound, mistakes_of("sincos2d", inputs))]
    if not embedding_site(site):
        return Outcome("not reached", f"{site.path}: the table is added inside {site.owner or 'the model'}'s own "
                       "forward, whose output is not the embedding (the survey sees no input site)", (site.path,))
    if (skip := after_normalisation([site], run)) is not None:  # the rows read not linear in the table
        return built_alone(cases, skip, (site.path,), f"{site.path} sincos2d({record.variant})")
    table = site.params[name].astype(np.float64).reshape(-1, record.features)
    patch = (run.shapes["native"][-2] / height, run.shapes["native"][-1] / width)
    for size, capture in site.captures.items():
        if not capture.owner_out or not capture.owner_zeroed:
            return Outcome("not reached", f"{site.owner}: no output recorded at the {size} size", (site.path,))
        out = capture.owner_out[0].astype(np.float64)
        observed = rows_of(out - capture.owner_zeroed[0].astype(np.float64), record.features)
        noise = 2 * unit(run) * float(np.max(np.abs(out)))
        grid = (round(run.shapes[size][-2] / patch[0]), round(run.shapes[size][-1] / patch[1]))
        if observed is None:
            return Outcome("not reached", f"{site.owner}: output {out.shape} has no axis of width "
                           f"{record.features}", (site.path,))
        if grid == record.grid:
            shifted = {f"rows read from {shift}": np.roll(table, -shift, axis=0) for shift in (-1, 1)}
            cases.append(_aligned(observed, table, noise, shifted))
            continue
        if record.way is None:
            return Outcome("wrong", f"the table is claimed fixed at {record.grid}, transformers read it at {grid}",
                           (site.path,))
        resampling = GridInputs(table, grid, GRID_VARIANTS[record.way], prefix_tokens=cls_rows,
                                source_grid=record.grid)
        resampled = np.asarray(resampling.resample(), dtype=np.float64)
        cases.append(_aligned(observed, resampled, grid_tolerance(resampling, run.dtype) + noise,
                              mistakes_of("grid", resampling)))
    return graded(cases, (site.path,), f"{site.path} sincos2d({record.variant})")


def _compare_output(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One path of a stage after the stack (module docstring): the table built, and the rows its module adds."""
    from refpos.encodings.sincos2d_mistakes import Sincos2dInputs

    found = _table(record, sites)
    if found is None:
        return absent(run, f"no table of {record.grid} tokens × {record.features} in a position module for "
                      f"{record.stack} path {record.index} (sites: {', '.join(s.path for s in sites) or 'none'})")
    site, name = found
    (height, width) = record.grid
    built = site.initial.get(name, site.params[name]).astype(np.float64).reshape(-1, record.features)
    inputs = Sincos2dInputs(record.variant, {"height": height, "width": width, "dim": record.features,
                                             **dict(record.settings)})
    reference, bound = check_target("sincos2d").reference(inputs)
    cases = [(built, np.asarray(reference, dtype=np.float64), bound, mistakes_of("sincos2d", inputs))]
    table = site.params[name].astype(np.float64).reshape(-1, record.features)
    for capture in site.captures.values():
        if capture.module_in is None or capture.module_out is None:
            continue  # a path the forward did not take at this size
        out = capture.module_out.astype(np.float64)
        observed = rows_of(out - capture.module_in.astype(np.float64), record.features)
        if observed is None:
            return Outcome("not reached", f"{site.path}: output {out.shape} has no axis of width {record.features}",
                           (site.path,))
        noise = 2 * unit(run) * float(np.max(np.abs(out)))
        shifted = {f"rows read from {shift}": np.roll(table, -shift, axis=0) for shift in (-1, 1)}
        cases.append((observed, table, noise, shifted))
    return graded(cases, (site.path,), f"{site.path} sincos2d({record.variant}) after the stack")
