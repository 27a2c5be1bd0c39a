r"""The ``learned`` and ``sinusoid1d`` comparisons: a 1-D table at the input, the rows the frames read (and for
the sinusoid, the table the model's code builds).

The rows read are observed one of two ways, at each size:

* a position module fed no floating tensor (an ``nn.Embedding`` called with position ids, a mask or token ids):
  its output is the rows it read, within ``2u·max|output|`` (a gather, times the amplitude at most);
* else the embedding's output minus its output with the table zeroed (an addition is linear in the table), within
  the subtraction's ``2u·max|output|``; where that output is not linear in the table (a table added before a
  normalisation in the same forward: BART's encoder), not compared
  (:func:`survey.pixel_kinds.base.after_normalisation`).

A per-layer record of one stack's table (a decoder's learned table, one record per layer) reads the table an
earlier record of the stack accounted for: the site is looked up among the sites still free, then among all, the
record's own stack's first (a site whose path names the stack), and by its rows where the record states them.

A sinusoid table stored without its amplitude (Canary's ``1/√d``, applied in the module's forward: the table's
entries reach 1, the amplitude's reach ``|a| < 2/3``) is compared times the amplitude; the rows its output gains
carry the amplitude from the model's own forward.
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
from survey.pixel_kinds.relative_sinusoid import compare_relative_sinusoid
from survey.pixels import PixelRun, Site, additive


def _tables(record: Any, site: Site) -> list[str]:
    """The names of the site's tables of ``record.dim`` columns (and ``record.table_size`` rows where stated)."""
    rows = getattr(record, "table_size", None)
    return [name for name, table in site.params.items()
            if additive(site) and table.ndim >= 2 and table.shape[-1] == record.dim
            and (rows is None or table.size // record.dim == rows)]


def table_site(record: Any, sites: list[Site], run: PixelRun) -> tuple[Site, str] | None:
    """The input site holding ``record``'s table and that table's name (module docstring)."""
    stack = record.stack.split(".")[0]
    for pool in (sites, run.sites):
        found = [site for site in pool if _tables(record, site)]
        mine = [site for site in found if stack in site.path.split(".")]
        if found:
            site = (mine or found)[0]
            return site, _tables(record, site)[0]
    return None


def module_read(site: Site, capture: Any, dim: int) -> bool:
    """Whether the rows read at one size are the position module's own output (fed no floating tensor)."""
    return site.is_module and capture.module_in is None and capture.module_out is not None \
        and capture.module_out.shape[-1] == dim


def _gained(site: Site, capture: Any, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(rows read (n, dim), the output they were read from)`` at one size (module docstring), or ``None``."""
    if module_read(site, capture, dim):
        out = capture.module_out.astype(np.float64)
        return out.reshape(-1, dim), out
    if embedding_site(site) and capture.owner_out and capture.owner_zeroed:
        out = capture.owner_out[0].astype(np.float64)
        rows = rows_of(out - capture.owner_zeroed[0].astype(np.float64), dim)
        return None if rows is None else (rows, out)
    return None


def readrows_of(site: Site, name: str, dim: int, run: PixelRun, first: int, scale: float = 1.0) -> list[tuple]:
    """One case per size: the rows the frames read (module docstring) against the table's rows ``first, first + 1,
    …`` times ``scale``, the claim reading one row earlier or later as the wrong answers."""
    table = site.params[name].astype(np.float64).reshape(-1, dim) * scale
    cases = []
    for capture in site.captures.values():
        read = _gained(site, capture, dim)
        if read is None:
            continue
        observed, out = read
        # rows past the table's end are no rows: a claim reading them is graded wrong by the shape; so is the claim
        # read one row later or earlier where that leaves the table
        offsets = {f"rows read from {first + shift}": table[max(first + shift, 0):first + shift + observed.shape[0]]
                   for shift in (-1, 1)}
        cases.append((observed, table[first:first + observed.shape[0]], 2 * unit(run) * float(np.max(np.abs(out))),
                      offsets))
    return cases


def compare_learned(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """A learned 1-D table at the input: the frames read rows ``offset, offset + 1, …`` of it."""
    found = table_site(record, sites, run)
    if found is None or record.at != "input":
        return absent(run, f"no learned table of {record.dim} columns at an input site for {record.stack}")
    site, name = found
    if not embedding_site(site) and not site.is_module:
        return Outcome("not reached", f"{site.path}: the table is added inside {site.owner or 'the model'}'s own "
                       "forward, whose output is not the embedding (the survey sees no input site)", (site.path,))
    if not all(module_read(site, c, record.dim) for c in site.captures.values()) \
            and (skip := after_normalisation([site], run)) is not None:  # rows read at the owner: linear in them?
        return skip
    cases = readrows_of(site, name, record.dim, run, record.offset)
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
    found = table_site(record, sites, run)
    if found is None:
        return absent(run, f"no sinusoid table of {record.dim} columns at an input site for {record.stack}")
    site, name = found
    built = site.initial.get(name, site.params[name]).astype(np.float64).reshape(-1, record.dim)
    inputs = Sinusoid1dInputs(record.variant, record.dim, {"positions": np.arange(built.shape[0]),
                                                           **dict(record.settings)})
    reference, bound = check_target("sinusoid1d").reference(inputs)
    amplitude = float(inputs.keywords()["amplitude"])
    scale = amplitude if abs(amplitude) < 2 / 3 and np.max(np.abs(built)) > 1.5 * abs(amplitude) else 1.0
    cases = [(built * scale, np.asarray(reference, dtype=np.float64), bound, mistakes_of("sinusoid1d", inputs))]
    if not all(module_read(site, c, record.dim) for c in site.captures.values()) \
            and (skip := after_normalisation([site], run)) is not None:  # the rows read not linear in the table
        return built_alone(cases, skip, (site.path,), f"{site.path} sinusoid1d")
    read = readrows_of(site, name, record.dim, run, record.past or 0, scale)
    return graded(cases + read, (site.path,), f"{site.path} sinusoid1d")
