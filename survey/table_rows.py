r"""The rows a position table at a stack's input is read at, in every case (:mod:`survey.cases`).

Run A finds the table and its offset: the embedding lookup whose rows are the probe's ids plus a constant ``c``
(:func:`survey.observed.read_offset`; OPT's ``c = 2``), checked against refpos's offset by
:func:`survey.biases.check_absolute`. Run A passes ids, so it cannot tell which input the model reads its rows
from when it is handed none, nor how it counts a padded batch. Each case's forward looks the same table up again
(its :attr:`~survey.records.Run.lookups`), and refpos's record says which input its rows are read at (``reads``:
``rows`` ← OPT's ``position_ids``, else ``mask_count``). The rows refpos predicts for the case's tokens are

.. math::  r_j = s_j + c,

``s`` the positions that source gives in the case (:func:`survey.seen.positions_of`: the ids passed, else what
the model builds, from the slot or from the mask), and they must be the rows the model read, exactly (integers:
no tolerance). RoBERTa's ids count from ``padding_idx + 1`` (refpos's ``row_ids``): an id passed is its row. A
decoding step reads the table for its own tokens alone, the last lookup of the case; a model padding its sequence
to a multiple of its window reads more rows after the tokens' (LED), which are not compared.

This is what tells OPT's ``Σm·m − 1`` (−1 at padding: row 1) from BLOOM's ``(Σm − 1)·m`` (row 2) on the left-padded
case without ids, and both from π0's ``Σm − 1`` on the case with a masked token inside.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.claims import LayerClaim, LayerResult
from survey.probe import Probe
from survey.rotation import EPS32


def case_rows(claim: LayerClaim, probe: Probe, table: str, offset: int) -> LayerResult:
    """The rows ``table`` was read at in each case against refpos's (module docstring): a mismatch at the first case
    that differs, else exact (every case that looked the table up read refpos's rows, or none did), its cause naming
    each case whose inputs do not state the claim's source."""
    from survey.seen import seen_of

    unread = []
    for seen in seen_of(probe)[1:]:
        reads = [lookup for lookup in getattr(seen.run, "lookups", []) if lookup.table == table]
        if not reads:
            continue
        try:
            expected = expected_rows(claim, seen, offset)
        except ValueError:  # a source the survey cannot read off the case's inputs: named on the row
            unread.append(seen.name)
            continue
        indices = np.asarray(reads[-1].indices)
        observed = indices.reshape(-1, indices.shape[-1])[0] if indices.ndim else indices.reshape(1)
        if observed.size < expected.size:
            continue
        observed = observed[: expected.size]
        if not np.array_equal(observed, expected):
            at = int(np.flatnonzero(observed != expected)[0])
            return LayerResult(claim.stack, -1, claim.kind, "mismatch", float(np.abs(observed - expected).max()),
                               f"{seen.name}: position table {table}: transformers reads rows "
                               f"{_shown(observed)}, refpos {_shown(expected)} (rows ← "
                               f"{' else '.join(claim.source('rows'))} + {offset}; first at token {at})")
    return _unread(claim, unread)


def _unread(claim: LayerClaim, names: list[str]) -> LayerResult:
    """No case differs: exact, the cases whose inputs do not state the claim's source named."""
    cause = (f"table rows not compared in {', '.join(names)}: the case states none of "
             f"{', '.join(claim.source('rows'))}") if names else ""
    return LayerResult(claim.stack, -1, claim.kind, "exact", None, cause)


def sinusoid_bound(positions: np.ndarray) -> float:
    r"""The float32 bound of a sinusoid computed at table rows ``positions`` (the position plus the table's offset):
    its angle ``r·ω`` rounded thrice, and the sine's own rounding, :math:`(3\max r + 4)\,u`."""
    return (3 * float(np.max(np.abs(positions))) + 4) * EPS32


def case_sinusoid(claim: LayerClaim, probe: Probe, single: bool) -> LayerResult:
    """A sinusoid added at a stack's input in each case: the positional modules' outputs and the rows read off a
    stored sinusoid (:attr:`~survey.records.Run.positional`, ``indexed``) against refpos's sinusoid at the case's
    positions (:func:`expected_rows` less the offset), within :func:`sinusoid_bound`; a mismatch where no output of
    the case's shape is within it, else exact (also where a case has no output of that shape), its cause naming
    each case whose inputs do not state the claim's source."""
    from survey.observed import role
    from survey.seen import seen_of

    offset = int(claim.params.get("offset", 0))
    unread = []
    for seen in seen_of(probe)[1:]:
        try:
            positions = expected_rows(claim, seen, offset) - offset
        except ValueError:  # a source the survey cannot read off the case's inputs: named on the row
            unread.append(seen.name)
            continue
        try:
            expected = np.asarray(claim.params["sinusoid"](positions), dtype=np.float64)
        except ValueError:  # a position the claim's table has no row for: the run A check reads the table
            continue
        outputs = [out for module, out in seen.run.positional.items() if single or role(module) == claim.stack]
        outputs += [read.vectors for read in getattr(seen.run, "indexed", [])
                    if single or role(read.table) == claim.stack]
        firsts = [v.reshape(-1, *v.shape[-2:])[0] for v in outputs if v.ndim >= 2]
        errors = [float(np.abs(v[: expected.shape[0]] - expected).max()) for v in firsts
                  if v.shape[-1] == expected.shape[-1] and v.shape[0] >= expected.shape[0]]
        if errors and min(errors) > sinusoid_bound(positions + offset):  # the angle is taken at the row
            return LayerResult(claim.stack, -1, claim.kind, "mismatch", min(errors),
                               f"{seen.name}: the sinusoid added at the input: max |Δ| {min(errors):.3g} against "
                               f"refpos's at rows ← {' else '.join(claim.source('rows'))}")
    return _unread(claim, unread)


def expected_rows(claim: LayerClaim, seen: Any, offset: int) -> np.ndarray:
    """The rows refpos reads for the case's tokens: the claim's source's positions plus ``offset``; where the
    source is ``row_ids`` (RoBERTa's: the ids passed are the rows) and ids were passed, the ids themselves."""
    from survey.seen import read

    reading = tuple("position_ids" if name == "row_ids" else name for name in claim.source("rows"))
    found = read(seen, reading, "query", padding_idx=offset - 1)  # a table's padding row is its offset less one
    return found + rows_offset(claim, seen.inputs.position_ids is not None, offset)


def rows_offset(claim: LayerClaim, ids_passed: bool, offset: int) -> int:
    """What refpos adds to the positions a table is read at: the table's ``offset``, or nothing where the claim
    reads ``row_ids`` first and ids were passed (RoBERTa's ids are its table's rows)."""
    return 0 if ids_passed and claim.source("rows")[0] == "row_ids" else offset


def _shown(rows: Any) -> str:
    values = [int(v) for v in np.asarray(rows).reshape(-1)]
    return str(values) if len(values) <= 12 else f"[{', '.join(map(str, values[:12]))}, …]"


__all__ = ["case_rows", "case_sinusoid", "expected_rows", "rows_offset", "sinusoid_bound"]
