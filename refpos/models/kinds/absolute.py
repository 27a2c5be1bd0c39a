r"""The absolute kinds: a learned table or a sinusoid added to a stack's input (:mod:`refpos.encodings.learned`,
:mod:`refpos.encodings.sinusoidal`), as a family's code builds it — the table's length and width keys, the offset
its positions are read at (:class:`AbsoluteFacts`), the layer record (:class:`AbsoluteLayer`) and the builder.

Learned and sinusoidal positions are added to the stack's input, before its first layer: every layer of such a
stack carries the same record, with ``at = "input"``.

Examples
--------
>>> from refpos.models import model_positions
>>> bart = {"model_type": "bart", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
...         "decoder_attention_heads": 2, "d_model": 8, "max_position_embeddings": 16}
>>> [(r.stack, r.kind, r.offset, r.table_size) for r in model_positions(bart)]
[('encoder', 'learned', 2, 18), ('decoder', 'learned', 2, 18)]
>>> roberta = model_positions({"model_type": "roberta", "num_hidden_layers": 1, "num_attention_heads": 2,
...                            "hidden_size": 8, "max_position_embeddings": 16, "pad_token_id": 1}).layers[0]
>>> roberta.rows(input_ids=[[1, 1, 5, 6]]).tolist()  # left padding: the padding reads its own row
[[1, 1, 2, 3]]
>>> roberta.rows(positions=[2, 3, 7]).tolist()  # the ids passed are RoBERTa's rows
[2, 3, 7]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.encoding import Encoding
from refpos.encodings.learned import LearnedAbsolute
from refpos.encodings.sinusoidal import LAYOUTS as SINUSOID_LAYOUTS
from refpos.encodings.sinusoidal import SPACINGS, Sinusoidal, sinusoidal
from refpos.models.kinds.record import EXAMPLE_GEOMETRY, EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord
from refpos.models.sources import COUNTS, Given
from refpos.validation import as_positions, check_int

#: what a table's rows can be read at: the position ids passed, else what the model builds them from — the token's
#: slot (most), the attention mask's running count (OPT), the non-padding input ids' (RoBERTa; FSMT's with the
#: cache's length added to every token), the key's index
ROW_INPUTS = ("position_ids", "row_ids", "cache_position", "mask_cumsum", "mask_count", *COUNTS, "key_index")


@dataclass(frozen=True)
class AbsoluteFacts:
    """A learned table or a sinusoid added to a stack's input.

    ``table``: the config keys of the table's length, the first present wins (``["n_positions",
    "max_position_embeddings"]``); ``dim``: the key of its width when it is not the stack's (ALBERT, ELECTRA:
    ``embedding_size``); ``offset``: added to every position (OPT and BART: 2), or ``offset_key``: the position
    offset is that key plus one (``pad_token_id``: M2M100, RoBERTa count positions from ``padding_idx + 1``); the
    padding token ``input_ids_cumsum`` skips is the offset less one (MPNet: ``offset = 2``, its padding_idx 1); a
    sinusoid's ``layout`` (``concat``, ``interleaved``), ``spacing`` (``paper``, ``tensor2tensor``) and ``base``;
    ``padding_row``: the config key of a row a sinusoid's table holds zeros in (fairseq's padding token:
    ``pad_token_id``); ``reads`` (:data:`ROW_INPUTS`, in order of precedence): what the rows are read at — the
    position ids passed, else the token's slot (default); OPT: ``["position_ids", "mask_count"]``; RoBERTa:
    ``["row_ids", "input_ids_cumsum"]`` (the ids passed are its table's rows: it builds them counting from
    ``padding_idx + 1``).
    """

    table: tuple[str, ...] = ()
    offset: int = 0
    offset_key: str | None = None
    layout: str = "concat"
    spacing: str = "paper"
    base: float = 10000.0
    dim: str | None = None
    reads: tuple[str, ...] = ("position_ids", "cache_position")
    padding_row: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.table, str):
            object.__setattr__(self, "table", (self.table,))
        elif isinstance(self.table, list):
            object.__setattr__(self, "table", tuple(self.table))
        if isinstance(self.reads, list):
            object.__setattr__(self, "reads", tuple(self.reads))

    def check(self, where: str, encoding: str = "learned") -> None:
        check_fact(where, isinstance(self.offset, int) and self.offset >= 0, f"{encoding}.offset", self.offset)
        check_fact(where, self.offset == 0 or self.offset_key is None, f"{encoding}.offset_key (with offset)",
                   self.offset_key)
        check_fact(where, self.layout in SINUSOID_LAYOUTS, f"{encoding}.layout", self.layout)
        check_fact(where, self.spacing in SPACINGS, f"{encoding}.spacing", self.spacing)
        check_fact(where, all(isinstance(k, str) for k in self.table), f"{encoding}.table", self.table)
        check_fact(where, bool(self.reads) and all(r in ROW_INPUTS for r in self.reads), f"{encoding}.reads",
                   self.reads)
        # the padding token is the offset less one: offset_key's value, or a fixed offset of 1 or more (MPNet's 2)
        for counted in (*COUNTS, "row_ids"):
            check_fact(where, counted not in self.reads or self.offset_key is not None or self.offset >= 1,
                       f"{encoding}.reads ({counted} needs the padding token: offset_key, or an offset of 1 or more)",
                       self.reads)


@dataclass(frozen=True)
class LearnedFacts(AbsoluteFacts):
    """:class:`AbsoluteFacts` of a learned table, which must name its length key."""

    def check(self, where: str, encoding: str = "learned") -> None:
        super().check(where, encoding)
        check_fact(where, bool(self.table), "learned.table (required)", self.table)


@dataclass(frozen=True)
class SinusoidFacts(AbsoluteFacts):
    """:class:`AbsoluteFacts` of a sinusoid (its length key is optional: a sinusoid has no table to overrun)."""

    def check(self, where: str, encoding: str = "sinusoidal") -> None:
        super().check(where, encoding)


@dataclass(frozen=True)
class AbsoluteLayer(LayerRecord):
    """A learned table or a sinusoid added to the stack's input: position ``p`` reads row ``p + offset``
    (``table_size`` rows: a larger position is an error); a sinusoid of ``dim`` channels."""

    encoding_name: str = "learned"
    dim: int = 2
    offset: int = 0
    table_size: int | None = None
    layout: str = "concat"
    spacing: str = "paper"
    base: float = 10000.0
    at: str = "input"
    padding_row: int | None = None

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.encoding_name

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "dim": self.dim, "offset": self.offset, "table_size": self.table_size}
        if self.encoding_name == "sinusoidal":
            out.update(layout=self.layout, spacing=self.spacing, base=self.base)
            if self.padding_row is not None:
                out.update(padding_row=self.padding_row)
        return out

    def rows(self, positions: Any = None, *, cache_position: Any = None, attention_mask: Any = None,
             input_ids: Any = None) -> np.ndarray:
        """The table rows a call's tokens read, ``p + offset`` with ``p`` read as the family's code reads it
        (``reads``: the position ids passed, else the slot, the mask's running count (OPT) or the non-padding
        input ids' (RoBERTa, whose padding reads the padding row); RoBERTa's ids passed are rows, ``p = id −
        offset``); a row outside the table is a ``ValueError``."""
        given = Given.of(positions=positions, cache_position=cache_position, attention_mask=attention_mask,
                         input_ids=input_ids)
        return self.rows_at(self.read("rows", "query", given, padding_idx=self.offset - 1))

    def rows_at(self, positions: Any) -> np.ndarray:
        """The table rows positions already read land on, ``p + offset``; a row outside the table is a
        ``ValueError`` (so is a position int64 does not hold: a uint64 ``2**64 − 1`` is not the ``−1`` a cast would
        make of it)."""
        p = np.asarray(to_numpy(as_positions(positions, xp=np, allow_negative=True)))
        rows = p + self.offset
        if rows.size and (rows.min() < 0 or (self.table_size is not None and rows.max() >= self.table_size)):
            raise ValueError(f"positions + offset {self.offset} must lie in [0, {self.table_size}) (the table's "
                             f"rows), got {int(rows.min())} … {int(rows.max())}")
        return rows

    def sinusoid(self, positions: Any) -> np.ndarray:
        """The sinusoid ``(..., dim)`` at positions already read (row ``p + offset`` of the family's table)."""
        self.rows_at(positions)
        return np.asarray(sinusoidal(np.asarray(to_numpy(positions), dtype=np.int64), self.dim, base=self.base,
                                     layout=self.layout, spacing=self.spacing, offset=self.offset,
                                     padding_row=self.padding_row, xp=np))

    def _encoding(self, **weights: Any) -> Encoding:
        if self.encoding_name == "sinusoidal":
            return Sinusoidal(base=self.base, layout=self.layout, spacing=self.spacing, offset=self.offset,
                              padding_row=self.padding_row)
        if "table" not in weights:
            raise ValueError(f"{self.stack} layer {self.index} (learned): pass table=, the trained position table "
                             f"({self.table_size}, {self.dim})")
        return LearnedAbsolute(weights["table"], offset=self.offset)


def build(stack: Stack, encoding: str) -> list[LayerRecord]:
    """Learned or sinusoidal layers: the table's length and width, and the position offset (``offset``, or
    ``offset_key`` + 1)."""
    shape, view, facts = stack.geometry(), stack.view, stack.facts
    size = None
    if facts.table:
        found = view.first(facts.table)
        if found is None and encoding == "learned":
            raise ValueError(f"{view.name(facts.table[0])}: the config gives no position-table length (none of "
                             f"{list(facts.table)})")
        size = None if found is None else check_int(view.name(found[0]), found[1], minimum=1)
    dim = shape.width if facts.dim is None else view.count((facts.dim,), "position-table width")
    offset = facts.offset
    if facts.offset_key is not None:
        offset = check_int(view.name(facts.offset_key), view.value(facts.offset_key, 0), minimum=0) + 1
    if encoding == "sinusoidal" and dim % 2:
        raise ValueError(f"the sinusoid's width {dim} is odd: refpos builds even widths only")
    if size is not None and encoding == "learned" and not any(count in facts.reads for count in COUNTS):
        # the offset rows come on top of the stated length (OPT, BART); a table read at the running count from
        # padding_idx + 1 holds them within it (RoBERTa's offset_key, MPNet's fixed offset 2)
        size += facts.offset
    zeroed = None
    if facts.padding_row is not None and view.value(facts.padding_row, None) is not None:
        zeroed = check_int(view.name(facts.padding_row), view.value(facts.padding_row, None), minimum=0)
    return [AbsoluteLayer(stack.name, i, None, encoding_name=encoding, dim=dim, offset=offset, table_size=size,
                          layout=facts.layout, spacing=facts.spacing, base=facts.base, reads=(("rows", facts.reads),),
                          padding_row=zeroed)
            for i in range(shape.layers)]


def _draw_learned(draw: Any, st: Any) -> dict[str, Any]:
    return {"length": draw(st.integers(1, 64)), "dim": draw(st.integers(1, 16)), "offset": draw(st.integers(0, 2))}


def _draw_sinusoid(draw: Any, st: Any) -> dict[str, Any]:
    return {"dim": 2 * draw(st.integers(1, 64)), "layout": draw(st.sampled_from(SINUSOID_LAYOUTS)),
            "spacing": draw(st.sampled_from(SPACINGS))}


LEARNED = EncodingKind(
    name="learned", summary="a trained table row per position, added to the input", record=AbsoluteLayer,
    build=lambda stack: build(stack, "learned"), hook="input", reads=ROW_INPUTS, doc="docs/learned.md#the-math",
    facts=LearnedFacts, check="learned", golden="learned", contract=("learned_lookup",),
    spec="spec_tests/test_sinusoidal.py", draw=_draw_learned,
    example={"config": {**EXAMPLE_GEOMETRY, "max_position_embeddings": 64},
             "facts": {"table": ["max_position_embeddings"]}}, inert=("rotary",))

SINUSOIDAL = EncodingKind(
    name="sinusoidal", summary="sines and cosines of the position at geometric frequencies, added to the input",
    record=AbsoluteLayer, build=lambda stack: build(stack, "sinusoidal"), hook="input", reads=ROW_INPUTS,
    doc="docs/sinusoidal.md#the-math", facts=SinusoidFacts, check="sinusoid", golden="sinusoid",
    contract=("sinusoidal",), spec="spec_tests/test_sinusoidal.py", draw=_draw_sinusoid,
    example={"config": dict(EXAMPLE_GEOMETRY), "facts": {"layout": "concat", "spacing": "paper"}},
    inert=("lengths", "rotary"))

__all__ = ["LEARNED", "ROW_INPUTS", "SINUSOIDAL", "AbsoluteFacts", "AbsoluteLayer", "LearnedFacts", "SinusoidFacts",
           "build"]
