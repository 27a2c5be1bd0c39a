"""The seeded calls of the input-site kinds whose records hold no weights (the weights are the checkpoint's) for
``refpos golden model``: a tiled grid's tables and gates, a box-tables layer's four tables and its boxes, and the
box-tables reference (:data:`refpos.golden.cases.model_kinds.MODEL_KINDS` names them)."""

from __future__ import annotations

from typing import Any

import numpy as np

#: channels of a seeded table (the model's width is in the record; every channel is computed alike)
SEEDED_WIDTH = 4


def tiled_grid_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """A ``tiled_grid`` layer's call: seeded tables at the record's rows, ids and tiles, gates in [−1, 1], the last
    aspect-ratio id."""
    width = min(layer.dim, SEEDED_WIDTH)
    t = {"embedding": (layer.rows, width), "tile_table": (layer.ids, layer.tiles * layer.rows * width),
         **dict.fromkeys(("pre_table", "post_table"), (layer.ids, layer.tiles * width))}
    gates = dict(zip(("gate", "pre_gate", "post_gate"), rng.uniform(-1.0, 1.0, 3).tolist(), strict=True))
    return [("tiles", {**{k: rng.standard_normal(s) for k, s in t.items()}, **gates, "aspect_ratio_id": layer.ids - 1})]


def box_tables_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """A ``box_tables`` layer's call: seeded tables of the record's rows, six boxes within half the table (each
    corner below half, each extent below half), a box of zero extent and one at the last rows."""
    rows, half = layer.rows, max(layer.rows // 2, 1)
    x0, y0 = rng.integers(0, half, 6), rng.integers(0, half, 6)
    boxes = np.stack([x0, y0, x0 + rng.integers(0, half, 6), y0 + rng.integers(0, half, 6)], axis=-1)
    boxes = np.concatenate([boxes, [[0, 0, 0, 0], [rows - 1, rows - 1, rows - 1, rows - 1]]])
    width = min(layer.dim, SEEDED_WIDTH)
    return [("boxes", {**{f"{t}_table": rng.standard_normal((rows, width)) for t in "xyhw"},
                       "bbox": boxes.astype(np.int64)[None]})]


def box_tables_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The output of a ``box_tables`` layer's call and a float32 port's bound: what each token gains from its box
    (``BoxInputs``), the tables' rows checked against the record's.

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.box_tables_mistakes import box_inputs

    tables = [a[f"{t}_table"] for t in "xyhw"]
    for name, table in zip(("x_table", "y_table", "h_table", "w_table"), tables, strict=True):
        if np.shape(table)[0] != layer.rows:
            raise ValueError(f"{name}: the record's tables have {layer.rows} rows, got {np.shape(table)[0]}")
    return box_inputs(*tables, a["bbox"]).reference()


def box_tables_shapes(layer: Any) -> dict[str, tuple[int, int]]:
    """The rows each table of a ``box_tables`` call must have (its width free)."""
    return {f"{t}_table": (layer.rows, -1) for t in "xyhw"}


__all__ = ["SEEDED_WIDTH", "box_tables_free", "box_tables_reference", "box_tables_shapes", "tiled_grid_free"]
