"""Where a layer's positions come from: the inputs of one forward, and the positions each source reads off them.

A transformers forward hands a layer several numbers per token that a position could be: the position id it
was passed (``position_ids``), the token's slot in the sequence (``cache_position``: its index plus the tokens
already cached), the running count of the attention mask's ones (BLOOM's and Falcon's ALiBi), the key's index.
They agree on an unpadded sequence counted from 0 and nowhere else; the survey's cases
(:mod:`survey.cases`) set them apart.

refpos's layer records say which one each use of positions reads (``reads``: ``(use, sources)`` pairs, the
sources in order of precedence; the uses are :data:`USES`). A record that says nothing reads the position ids
for every use: the one input refpos's per-layer functions take. :func:`reads_of` turns a record into the
survey's ``{use: sources}``, :meth:`Inputs.read` reads the positions.

=================  ==================================================================================
source             the positions read, per key (or query) token
=================  ==================================================================================
``position_ids``   the ids passed; where none were, the record's next source the survey reads (what the model
                   builds: PaliGemma's ``slot_plus_one``, OPT's ``mask_count``), else the slot
``decoder_position_ids``  none: the survey passes the decoder of an encoder–decoder model no ids of its own
the counts         refpos's :data:`~refpos.models.sources.COUNTS`: the running count of the queries' tokens that
                   are not the padding token, after the tokens cached (``input_ids_cumsum``; FSMT's
                   ``input_ids_cumsum_plus_cache``), with refpos's own formula
                   (:func:`refpos.models.sources.counted_ids`); read where the claim names its padding token (a
                   table's: its offset less one) and the forward's tokens are known, for the queries only
the others         refpos's :data:`~refpos.models.sources.DERIVED`, each read with refpos's own formula
                   (:func:`refpos.models.sources.derived`) off the case's slots and mask: the slot
                   (``cache_position``, ``key_index``), the slot plus one (``slot_plus_one``), and BLOOM's, OPT's
                   and π0's counts of the mask's ones (``mask_cumsum``, ``mask_count``, ``mask_cumsum_minus_one``)
=================  ==================================================================================

A source none of whose inputs the forward states is a ``ValueError``: never another input read in its place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.models.sources import COUNTS, DERIVED, counted_ids, derived

#: what positions serve in a layer: the rotation, the query scale, the query's and the key's side of a bias,
#: the rows of an input table
USES = ("rotation", "scale", "query", "key", "rows")
#: the sources the survey can read off a forward's inputs
SOURCES = ("position_ids", *DERIVED)
#: the sources read off the forward's tokens, given the padding token (:func:`refpos.models.sources.counted_ids`)
COUNTED = COUNTS
#: what a record that states nothing reads
DEFAULT = ("position_ids",)


@dataclass(frozen=True)
class Inputs:
    """The inputs of one forward over ``Tk`` keys, of which the last ``queries`` are its queries."""

    position_ids: np.ndarray | None  # (Tk,) passed; None: the model chose (its slot)
    slots: np.ndarray  # (Tk,)
    attention_mask: np.ndarray | None  # (Tk,); None: no mask (every key)
    queries: int
    #: the tokens run, the queries' last (None: not known)
    input_ids: np.ndarray | None = None

    def read(self, sources: tuple[str, ...], side: str = "query", padding_idx: int | None = None) -> np.ndarray:
        """The positions ``sources`` give (the first the inputs have), for the queries or for every key;
        ``padding_idx`` is the token :data:`COUNTED` does not count.

        Where no ids were passed, a record's later source is what the model builds in their place (PaliGemma's
        ``slot_plus_one``, OPT's ``mask_count``, RoBERTa's ``input_ids_cumsum``); a record that states none builds
        the slot."""
        for at, source in enumerate(sources):
            found = self._read(source, side, padding_idx)
            later = sources[at + 1:]
            if source == "position_ids" and self.position_ids is None and any(
                    s in (*SOURCES, *COUNTED) for s in later):
                continue  # none passed: the model builds them from a later source
            if found is not None:
                return found[-self.queries:] if side == "query" else found
        raise ValueError(f"sources: none of {sources} is among the inputs this forward states")

    def _read(self, source: str, side: str, padding_idx: int | None) -> np.ndarray | None:
        if source in COUNTED:  # the queries' tokens counted, after the slots cached before them
            if side != "query" or self.input_ids is None or padding_idx is None:
                return None
            first = int(self.slots[-self.queries])
            return counted_ids(self.input_ids[-self.queries:], padding_idx, past=first, name=source)
        if source == "position_ids":
            return self.slots if self.position_ids is None else self.position_ids
        if source in DERIVED:  # refpos's formula (derived), read off the case's slots and mask
            mask = np.ones(self.slots.size, dtype=np.int64) if self.attention_mask is None else self.attention_mask
            return derived(source, self.slots, mask)
        return None

    def which(self, sources: list[tuple[str, ...]], side: str = "query") -> dict[tuple[str, ...], np.ndarray]:
        """Each of ``sources`` with its positions, those giving the same positions as an earlier one left out."""
        out: dict[tuple[str, ...], np.ndarray] = {}
        for source in sources:
            found = self.read(source, side)
            if not any(np.array_equal(found, seen) for seen in out.values()):
                out[source] = found
        return out


def inputs_of(case: Any, probe: Any) -> Inputs:
    """The inputs of a :class:`survey.probe.Case` (or of run A when ``case`` is None)."""
    if case is None:
        t = probe.positions.size
        return Inputs(probe.positions if probe.position_ids_taken else None, np.arange(t), None, t,
                      getattr(probe, "input_ids", None))
    return Inputs(case.position_ids, case.slots, case.attention_mask, case.queries or case.slots.size,
                  case.input_ids)


def reads_of(record: Any) -> dict[str, tuple[str, ...]]:
    """``{use: sources}`` of a refpos layer record (its ``reads``), every use reading :data:`DEFAULT` where the
    record states none. A source the survey cannot read is kept: the claim is then not reached on it."""
    stated = getattr(record, "reads", None) or ()
    found = {use: DEFAULT for use in USES}
    for pair in stated:
        if isinstance(pair, (tuple, list)) and len(pair) == 2:
            use, sources = pair
            found[str(use)] = tuple(sources) if isinstance(sources, (tuple, list)) else (str(sources),)
    scale = getattr(record, "query_scale", None)
    scale_reads = getattr(scale, "reads", None) if scale is not None else None
    if scale_reads and "scale" not in dict(stated):
        found["scale"] = tuple(scale_reads)
    return found


def name(sources: tuple[str, ...]) -> str:
    """How the page writes a source list: ``position_ids``, or ``position_ids, else cache_position``."""
    return ", else ".join(sources)


__all__ = ["COUNTED", "DEFAULT", "SOURCES", "USES", "Inputs", "inputs_of", "name", "reads_of"]
