r"""The ``sinusoidal`` comparison on audio and feature runs: a text-style sinusoid record (one per layer, read from
a table at the stack's input: Whisper's encoder, Speech2Text's fairseq table) against the table the model's code
builds and the rows the frames read.

* **The table built**: its values before the survey's seeded draw (Whisper's ``embed_positions`` is a frozen
  parameter the draw replaces; Speech2Text's a buffer), rows ``offset …`` against refpos's sinusoid at positions
  ``0 …`` (row ``p + offset``: fairseq's rows below ``padding_idx + 1`` are not positions). Bound: the float32
  table's, the kind ``sinusoid1d``'s ``β_p = u·((8 + ln base)·|r| + 4)`` per row ``r`` at ``u = 2⁻²⁴`` (these
  tables are built in float32), the row's index being the angle's argument.
* **The rows read** (:func:`survey.pixel_kinds.tables.readrows_of`): the frames read rows ``offset, offset + 1, …``
  of the stored table (as drawn), the claim reading one row earlier or later as the wrong answers.

The wrong answers of the built table are the ``sinusoid1d`` check target's catalogued mistakes, on the sinusoid the
record names (its spacing, layout and base) read as a ``sinusoid1d`` variant at the table's row indices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, absent, after_normalisation, built_alone, check_target, graded, mistakes_of
from survey.pixel_kinds.tables import module_read, readrows_of, table_site
from survey.pixels import PixelRun, Site


def _as_variant(record: Any) -> Any:
    """The record's sinusoid as a ``sinusoid1d`` variant at given positions (its spacing, layout and base)."""
    from refpos.encodings.sinusoid1d_variants import SinusoidVariant

    return SinusoidVariant(f"{record.stack} sinusoidal", {"spacing": record.spacing, "layout": record.layout,
                                                          "base": record.base}, "given", "one", "table rows", (),
                           "refpos.models.kinds.absolute.AbsoluteLayer.sinusoid", "the record's own sinusoid")


def compare_sinusoidal(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One layer's sinusoid at the input: the table built and the rows read (module docstring)."""
    from refpos.encodings.sinusoid1d_mistakes import Sinusoid1dInputs

    if record.at != "input":
        return Outcome("not reached", f"{record.stack} layer {record.index}: the survey compares a sinusoid at the "
                       "input only")
    found = table_site(record, sites, run)
    if found is None:
        return absent(run, f"no sinusoid table of {record.dim} columns at an input site for {record.stack}")
    site, name = found
    built = site.initial.get(name, site.params[name]).astype(np.float64).reshape(-1, record.dim)
    rows = np.arange(record.offset, built.shape[0])
    inputs = Sinusoid1dInputs(_as_variant(record), record.dim, {"positions": rows})
    as_variant, bound = check_target("sinusoid1d").reference(inputs)
    reference = np.asarray(record.sinusoid(rows - record.offset), dtype=np.float64)
    if np.any(np.abs(reference - np.asarray(as_variant)) > bound):
        return Outcome("not reached", f"{site.path}: refpos's sinusoid is not the sinusoid1d variant of its spacing, "
                       "layout and base (the survey has no catalogue for it)", (site.path,))
    cases = [(built[record.offset:], reference, bound, mistakes_of("sinusoid1d", inputs))]
    if not all(module_read(site, c, record.dim) for c in site.captures.values()) \
            and (skip := after_normalisation([site], run)) is not None:  # the rows read not linear in the table
        return built_alone(cases, skip, (site.path,), f"{site.path} sinusoidal")
    cases += readrows_of(site, name, record.dim, run, record.offset)
    return graded(cases, (site.path,), f"{site.path} sinusoidal")
