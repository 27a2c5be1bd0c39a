r"""The ``learned`` and ``sinusoid1d`` comparisons: a 1-D table at the input, the rows the frames read (and for
the sinusoid, the table the model's code builds)."""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, check_target, embedding_site, graded, mistakes_of, rows_of, unit
from survey.pixel_kinds.relative_sinusoid import compare_relative_sinusoid
from survey.pixels import PixelRun, Site, additive


def _table_site(record: Any, sites: list[Site]) -> tuple[Site, str] | None:
    """The first input site holding a table of ``record.dim`` columns, and that table's name."""
    for site in sites:
        for name, table in site.params.items():
            if additive(site) and table.ndim >= 2 and table.shape[-1] == record.dim:
                return site, name
    return None


def _readrows_of(site: Site, name: str, record: Any, run: PixelRun, first: int) -> list[tuple]:
    """One case per size: the rows the embedding's output gained (it minus its output with the table zeroed) against
    the table's rows ``first, first + 1, …`` (the frames in order), within the subtraction's ``2u·max|output|``."""
    table = site.params[name].astype(np.float64).reshape(-1, record.dim)
    cases = []
    for capture in site.captures.values():
        if not capture.owner_out or not capture.owner_zeroed:
            continue
        out = capture.owner_out[0].astype(np.float64)
        observed = rows_of(out - capture.owner_zeroed[0].astype(np.float64), record.dim)
        if observed is None or first + observed.shape[0] > table.shape[0]:
            continue
        # the claim read one row later or earlier: a row outside the table is no row (its shape differs: wrong)
        offsets = {f"rows read from {first + shift}": table[max(first + shift, 0):first + shift + observed.shape[0]]
                   for shift in (-1, 1)}
        cases.append((observed, table[first:first + observed.shape[0]], 2 * unit(run) * float(np.max(np.abs(out))),
                      offsets))
    return cases


def compare_learned(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A learned 1-D table at the input: the frames read rows ``offset, offset + 1, …`` of it."""
    found = _table_site(record, sites)
    if found is None or record.at != "input":
        return Outcome("wrong", f"no learned table of {record.dim} columns at an input site for {record.stack}")
    site, name = found
    if not embedding_site(site):
        return Outcome("not reached", f"{site.path}: the table is added inside {site.owner or 'the model'}'s own "
                       "forward, whose output is not the embedding (the survey sees no input site)", (site.path,))
    cases = _readrows_of(site, name, record, run, record.offset)
    if not cases:
        return Outcome("not reached", f"{site.owner}: no rows of {name} recorded at the input", (site.path,))
    return graded(cases, (site.path,), f"{site.path} learned")


def compare_sinusoid1d(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A 1-D sinusoid at the input: the table the model's code builds (its values before the survey's seeded draw)
    against the variant's, with the kind's catalogued mistakes, and the rows the frames read (from ``past``); a
    table of relative distances: :func:`survey.pixel_kinds.relative_sinusoid.compare_relative_sinusoid`."""
    from refpos.encodings.sinusoid1d_mistakes import Sinusoid1dInputs

    if record.at == "relative":
        return compare_relative_sinusoid(record, run, sites)
    found = _table_site(record, sites)
    if found is None:
        return Outcome("wrong", f"no sinusoid table of {record.dim} columns at an input site for {record.stack}")
    site, name = found
    built = site.initial.get(name, site.params[name]).astype(np.float64).reshape(-1, record.dim)
    inputs = Sinusoid1dInputs(record.variant, record.dim, {"positions": np.arange(built.shape[0]),
                                                           **dict(record.settings)})
    reference, bound = check_target("sinusoid1d").reference(inputs)
    cases = [(built, np.asarray(reference, dtype=np.float64), bound, mistakes_of("sinusoid1d", inputs))]
    read = _readrows_of(site, name, record, run, record.past or 0) if embedding_site(site) else []
    return graded(cases + read, (site.path,),
                  f"{site.path} sinusoid1d")
