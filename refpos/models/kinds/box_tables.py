r"""The box-tables kind: learned tables read at each token's bounding box and added to its input (LayoutLM's x, y,
height and width tables) — the config key of the tables' rows and the names of the four modules
(:class:`BoxTablesFacts`), the record (:class:`BoxTablesLayer`) and the builder.

The formula is :mod:`refpos.encodings.box_tables` (docs/box-tables.md#the-math): a function of the checkpoint's
four tables and of the ``bbox`` input. The record sits at the stack's input site (``encoder.input``), beside the
1-D learned table its family row states as the stack's own encoding.

Examples
--------
>>> from refpos.models import model_positions
>>> layoutlm = {"model_type": "layoutlm", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
...             "max_position_embeddings": 64, "max_2d_position_embeddings": 32}
>>> print(model_positions(layoutlm).summary())
encoder input: box_tables(4 tables × 32 rows)
encoder layers 0-1: learned ×2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from refpos.encodings.box_tables import COMBINES, box_positions, box_reads
from refpos.models.kinds.record import EXAMPLE_GEOMETRY, EncodingKind, Stack, check_fact, stack_width
from refpos.models.records import LayerRecord
from refpos.validation import check_table_shapes


@dataclass(frozen=True)
class BoxTablesFacts:
    """``rows``: the config key of every table's row count (``max_2d_position_embeddings``), ``rows_default`` its
    class default; ``x``, ``y``, ``h``, ``w``: the names of the modules holding the x, y, height and width
    tables; ``combine``: the six rows summed (``"sum"``, LayoutLM) or concatenated (``"concat"``, LayoutLMv3: the
    x and y tables ``coordinate`` wide, the h and w tables ``shape`` wide, config keys with their class defaults
    ``coordinate_default`` and ``shape_default``); ``clip_extents``: each extent clipped into ``[0, clip_extents]``
    before it is read (LayoutLMv3's 1023; 0: read as it is)."""

    rows: str = "max_2d_position_embeddings"
    rows_default: int = 1024
    x: str = "x_position_embeddings"
    y: str = "y_position_embeddings"
    h: str = "h_position_embeddings"
    w: str = "w_position_embeddings"
    combine: str = "sum"
    coordinate: str = "coordinate_size"
    coordinate_default: int = 128
    shape: str = "shape_size"
    shape_default: int = 128
    clip_extents: int = 0

    def check(self, where: str) -> None:
        check_fact(where, isinstance(self.rows_default, int) and self.rows_default >= 1, "box_tables.rows_default",
                   self.rows_default)
        check_fact(where, self.combine in COMBINES, "box_tables.combine", self.combine)
        check_fact(where, isinstance(self.clip_extents, int) and self.clip_extents >= 0, "box_tables.clip_extents",
                   self.clip_extents)
        check_fact(where, all(isinstance(v, int) and v >= 1 for v in (self.coordinate_default, self.shape_default)),
                   "box_tables widths' defaults", (self.coordinate_default, self.shape_default))
        check_fact(where, len({self.x, self.y, self.h, self.w}) == 4, "box_tables module names",
                   (self.x, self.y, self.h, self.w))

    def modules(self) -> dict[str, str]:
        """Table (``x``, ``y``, ``h``, ``w``) -> the module holding it."""
        return {"x": self.x, "y": self.y, "h": self.h, "w": self.w}


@dataclass(frozen=True)
class BoxTablesLayer(LayerRecord):
    """A stack's box positions: four tables of ``rows`` rows (weights of the checkpoint), held by the modules ``x``,
    ``y``, ``h``, ``w``, their six rows summed (each table ``dim`` wide) or concatenated (``combine="concat"``: the x
    and y tables ``coordinate_dim`` wide, the h and w tables ``shape_dim``, ``4·coordinate_dim + 2·shape_dim =
    dim``); ``clip_extents``: the extents clipped into ``[0, clip_extents]`` first (0: not clipped)."""

    rows: int = 1024
    dim: int = 768
    x: str = "x_position_embeddings"
    y: str = "y_position_embeddings"
    h: str = "h_position_embeddings"
    w: str = "w_position_embeddings"
    combine: str = "sum"
    coordinate_dim: int = 768
    shape_dim: int = 768
    clip_extents: int = 0
    kind: ClassVar[str] = "box_tables"

    @property
    def label(self) -> str:
        return f"box_tables(4 tables × {self.rows} rows{', concatenated' if self.combine == 'concat' else ''})"

    def params(self) -> dict[str, Any]:
        return {"rows": self.rows, "dim": self.dim, "x": self.x, "y": self.y, "h": self.h, "w": self.w,
                "combine": self.combine, "coordinate_dim": self.coordinate_dim, "shape_dim": self.shape_dim,
                "clip_extents": self.clip_extents, "at": "input"}

    def widths(self) -> dict[str, int]:
        """Table -> its width."""
        return {"x": self.coordinate_dim, "y": self.coordinate_dim, "h": self.shape_dim, "w": self.shape_dim}

    def modules(self) -> dict[str, str]:
        """Table (``x``, ``y``, ``h``, ``w``) -> the module holding it."""
        return {"x": self.x, "y": self.y, "h": self.h, "w": self.w}

    def reads_at(self, bbox: Any) -> dict[str, tuple[np.ndarray, ...]]:
        """The rows each table is read at (:func:`~refpos.encodings.box_tables.box_reads`), checked against the
        record's ``rows``."""
        return box_reads(bbox, dict.fromkeys(("x", "y", "h", "w"), self.rows), self.clip_extents or None)

    def reference(self, x_table: Any, y_table: Any, h_table: Any, w_table: Any, bbox: Any) -> np.ndarray:
        """What each token gains from its box, ``(..., dim)``
        (:func:`~refpos.encodings.box_tables.box_positions`), the tables checked against the record."""
        check_table_shapes({f"{name}_table": (table, (self.rows, self.widths()[name]))
                            for name, table in zip("xyhw", (x_table, y_table, h_table, w_table), strict=True)})
        return box_positions(x_table, y_table, h_table, w_table, bbox, combine=self.combine,
                             clip_extents=self.clip_extents or None)

    def _why_not(self) -> str:
        return ("the rows are functions of the four tables and each token's box, not of token positions: "
                "BoxTablesLayer.reference computes them")


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`BoxTablesLayer`: the stack's input embedding (concatenated rows must fill the stack's width)."""
    facts: BoxTablesFacts = stack.facts
    view = stack.view
    dim = stack_width(view, stack.role)
    widths = {"coordinate_dim": dim, "shape_dim": dim}
    if facts.combine == "concat":
        widths = {"coordinate_dim": view.int(facts.coordinate, facts.coordinate_default, minimum=1),
                  "shape_dim": view.int(facts.shape, facts.shape_default, minimum=1)}
        if 4 * widths["coordinate_dim"] + 2 * widths["shape_dim"] != dim:
            raise ValueError(f"{view.name(facts.coordinate)} and {view.name(facts.shape)}: the six concatenated box "
                             f"rows are 4·{widths['coordinate_dim']} + 2·{widths['shape_dim']} wide, the stack "
                             f"{dim}")
    return [BoxTablesLayer(stack.name, 0, None, rows=view.int(facts.rows, facts.rows_default, minimum=1), dim=dim,
                           **facts.modules(), combine=facts.combine, clip_extents=facts.clip_extents, **widths,
                           reads=(("rows", ("bbox",)),))]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"rows": draw(st.integers(2, 64)), "dim": draw(st.integers(1, 16)), "tokens": draw(st.integers(1, 8))}


BOX_TABLES = EncodingKind(
    name="box_tables", summary="learned x, y, height and width tables read at each token's bounding box, added to "
    "its input (LayoutLM)", record=BoxTablesLayer, build=build, hook="input", reads=("bbox",),
    doc="docs/box-tables.md#the-math", facts=BoxTablesFacts, check="box_tables", golden="box_tables",
    contract=("box_positions",), spec="spec_tests/test_box_tables.py", draw=_draw,
    example={"config": {**EXAMPLE_GEOMETRY, "max_2d_position_embeddings": 32}, "facts": {}},
    inert=("rotary",))

__all__ = ["BOX_TABLES", "BoxTablesFacts", "BoxTablesLayer", "build"]
