"""How a config's layout-bias layer becomes a ``layout_bias`` call (the ``layout_bias`` record of
:data:`refpos.golden.cases.model_kinds.MODEL_KINDS`): the plan, seeded free inputs, the reference and the shapes the
record fixes; and the plan of a box-tables layer (concatenated rows have no contract call).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.golden.cases.model_kind_inputs import box_tables_free, box_tables_reference, box_tables_shapes
from refpos.validation import check_table_shapes

#: the tokens of a layout-bias case: enough for logarithmic and saturated x and y buckets
TOKENS = 12


def box_tables_plan(layer: Any) -> tuple[str, dict[str, Any]] | str:
    """A ``box_tables`` layer's call: ``box_positions`` where its rows are summed, else why none is written."""
    if layer.combine == "sum":
        return "box_positions", {}
    return ("its six box rows are concatenated (LayoutLMv3), which box_positions, their sum, does not compute; "
            "refpos/tests/test_anchors_layoutlmv3.py pins them")


def layout_bias_plan(layer: Any) -> tuple[str, dict[str, Any]] | str:
    """A ``layout_bias`` layer's call: ``layout_bias`` with the record's largest distances and head width, or why
    none is written (the box coordinates it reads are not LayoutLMv3's, which the contract function reads)."""
    if (layer.x_corner, layer.y_corner) != (0, 3):
        return (f"its x and y buckets read box coordinates {layer.x_corner} and {layer.y_corner}, and layout_bias "
                "reads LayoutLMv3's x0 and y1")
    return "layout_bias", {"max_distance": layer.max_distance, "max_2d_distance": layer.max_2d_distance,
                           "head_dim": layer.head_dim}


def layout_bias_shapes(layer: Any) -> dict[str, tuple[int, int]]:
    """The shapes the record fixes: each table ``(buckets, heads)``."""
    shapes = {"rel_table": (layer.num_buckets, layer.n_heads)}
    if layer.spatial:
        shapes.update(x_table=(layer.num_2d_buckets, layer.n_heads), y_table=(layer.num_2d_buckets, layer.n_heads))
    return shapes


def layout_bias_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """A ``layout_bias`` layer's call: seeded tables of the record's shapes, the places ``0 … 11`` and twelve boxes
    on a 1000-wide page (corners ordered)."""
    tables = {name: rng.standard_normal(shape) for name, shape in layout_bias_shapes(layer).items()}
    corners = np.sort(rng.integers(0, 1001, (TOKENS, 2, 2)), axis=1)
    call = {**tables, "positions": np.arange(TOKENS)}
    if layer.spatial:
        call["bbox"] = corners.reshape(1, TOKENS, 4).astype(np.int64)
    return [("pairs", call)]


def layout_bias_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``layout_bias`` layer's call and a float32 port's bound, the tables checked against the
    record's shapes.

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.layout_bias_mistakes import layout_bias_inputs

    check_table_shapes({name: (a.get(name), shape) for name, shape in layout_bias_shapes(layer).items()})
    return layout_bias_inputs(a["rel_table"], a.get("x_table"), a.get("y_table"), a["positions"], a.get("bbox"),
                              max_distance=a["max_distance"], max_2d_distance=a["max_2d_distance"],
                              head_dim=a["head_dim"]).reference()


#: the ``box_tables`` record's plan, free inputs, reference and shapes
BOX_TABLES = (box_tables_plan, box_tables_free, box_tables_reference, box_tables_shapes)
#: the ``layout_bias`` record's plan, free inputs, reference and shapes
LAYOUT_BIAS = (layout_bias_plan, layout_bias_free, layout_bias_reference, layout_bias_shapes)

__all__ = ["BOX_TABLES", "LAYOUT_BIAS", "TOKENS", "box_tables_plan", "layout_bias_free", "layout_bias_plan",
           "layout_bias_reference", "layout_bias_shapes"]
