r"""The axis-tables kind: two learned 1-D tables, a row table and a column table, each patch adding the row of
each at the indices it carries (Pix2Struct, Kosmos-2.5, Gemma 4's towers) — which variant a family's code reads
and the keys of its table length and width (:class:`AxisTablesFacts`), the record (:class:`AxisTablesLayer`) and
the builder.

The formula is :mod:`refpos.encodings.axis_tables` (docs/axis-tables.md#the-math), the variants
:data:`refpos.encodings.axis_tables.AXIS_TABLE_VARIANTS`. The tables are added once, to the patches before the
first layer: the record sits at a stack's input site (``vision.input``); the tables are weights of the checkpoint.

Examples
--------
>>> from refpos.models import model_positions
>>> tower = {"model_type": "pix2struct_vision_model", "num_hidden_layers": 2, "num_attention_heads": 2,
...          "hidden_size": 32, "seq_len": 4096}
>>> print(model_positions(tower).summary())
vision input: axis_tables(pix2struct)
vision layers 0-1: none ×2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.backend import Array
from refpos.encodings.axis_tables import AXIS_TABLE_VARIANTS, axis_table_positions
from refpos.models.kinds.record import GEOMETRY_KEYS, EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord
from refpos.validation import check_table_shapes


@dataclass(frozen=True)
class AxisTablesFacts:
    """``variant``: a name of :data:`~refpos.encodings.axis_tables.AXIS_TABLE_VARIANTS`; ``rows``: the config key
    of each table's length (Pix2Struct's ``seq_len``, Kosmos-2.5's ``max_num_patches``, Gemma 4's
    ``position_embedding_size``); ``width``: the key of the tables' width (absent: the stack's width)."""

    variant: str = "pix2struct"
    rows: str = "seq_len"
    width: str | None = None

    def check(self, where: str) -> None:
        check_fact(where, self.variant in AXIS_TABLE_VARIANTS, "axis_tables.variant", self.variant)


@dataclass(frozen=True)
class AxisTablesLayer(LayerRecord):
    """A stack's factorised positions: the variant, each table's length ``rows`` and width ``dim``; the tables are
    weights of the checkpoint."""

    variant: str = "pix2struct"
    rows: int = 4096
    dim: int = 768
    kind: ClassVar[str] = "axis_tables"

    @property
    def label(self) -> str:
        return f"axis_tables({self.variant})"

    def params(self) -> dict[str, Any]:
        record = AXIS_TABLE_VARIANTS[self.variant]
        return {"variant": self.variant, "rows": self.rows, "dim": self.dim, "first": record.first,
                "padding": record.padding, "storage": record.storage, "at": "input"}

    def reference(self, indices: Array, row_table: Array, column_table: Array) -> Array:
        """What each patch adds (:func:`~refpos.encodings.axis_tables.axis_table_positions`), the tables checked
        against the record's ``(rows, dim)``."""
        check_table_shapes({"row_table": (row_table, (self.rows, self.dim)),
                            "column_table": (column_table, (self.rows, self.dim))})
        return axis_table_positions(indices, row_table, column_table, self.variant)

    def _why_not(self) -> str:
        return ("the rows are read at the indices each patch carries, not at token positions: "
                "AxisTablesLayer.reference computes them")


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`AxisTablesLayer`: the stack's input embedding."""
    facts: AxisTablesFacts = stack.facts
    keys = (facts.width,) if facts.width is not None else GEOMETRY_KEYS[stack.role]["width"]
    return [AxisTablesLayer(stack.name, 0, None, variant=facts.variant, rows=stack.view.int(facts.rows, minimum=1),
                            dim=stack.view.count(keys, "tables' width"), reads=(("rows", ("patch_indices",)),))]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"variant": draw(st.sampled_from(tuple(AXIS_TABLE_VARIANTS))), "rows": draw(st.integers(1, 16)),
            "dim": draw(st.integers(1, 16))}


AXIS_TABLES = EncodingKind(
    name="axis_tables", summary="a learned row table and column table read at the indices each patch carries, their "
    "rows added to it (Pix2Struct, Kosmos-2.5, Gemma 4's towers)", record=AxisTablesLayer, build=build,
    hook="input", reads=("patch_indices",), doc="docs/axis-tables.md#the-math", facts=AxisTablesFacts,
    check="axis_tables", golden="axis_tables", contract=("axis_table_positions",),
    spec="spec_tests/test_axis_tables.py", draw=_draw, modalities=("vision",),
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16, "seq_len": 64},
             "facts": {}},
    inert=("lengths", "rotary"))

__all__ = ["AXIS_TABLES", "AxisTablesFacts", "AxisTablesLayer", "build"]
