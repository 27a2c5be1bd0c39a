"""The seeded calls of the kinds whose records hold no weights (the weights are the checkpoint's) for
``refpos golden model``: a tiled grid's tables and gates, a box-tables layer's four tables and its boxes, a Shaw
key-term layer's queries and table of clipped distances, and the box-tables and Shaw key-term references and plans
(:data:`refpos.golden.cases.model_kinds.MODEL_KINDS` names them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.validation import check_table_shapes

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


#: the most frames of a Shaw key-term call (its (query, key) pairs within model_kinds.MAX_PAIRS, 2²⁰)
MAX_FRAMES = 1 << 10


def shaw_key_frames(layer: Any) -> int:
    """The frames of a ``shaw_key`` layer's call: one full block and a partial one (``c + ⌊c/2⌋`` frames, at least
    ``c + 1``) where the layer attends in blocks, else two frames past the wider clip (every distance beyond it on
    both sides: the clip binds)."""
    if layer.block is not None:
        return layer.block + max(layer.block // 2, 1)
    return max(layer.left, layer.right) + 2


def _bias(layer: Any) -> bool:
    """Whether a ``shaw_key`` layer reads its table as a bias per head (``term = "bias"``)."""
    return getattr(layer, "term", "query") == "bias"


def shaw_key_plan(layer: Any) -> tuple[str, dict[str, Any]] | str:
    """A ``shaw_key`` layer's call: ``shaw_key_terms`` with the record's clip, offset, sign and blocks (the scale
    the softmax's, ``d^{-1/2}``, the default; 1 for a bias per head, read by one-hot queries: the streaming window
    such a layer adds is no part of the call), or why a case would be too large."""
    frames = shaw_key_frames(layer)
    if frames > MAX_FRAMES:
        return (f"its call needs {frames} frames (clip -{layer.left}…{layer.right}, blocks of {layer.block}), past "
                f"the {MAX_FRAMES} a golden case holds")
    return "shaw_key_terms", {"left": layer.left, "right": layer.right, "offset": layer.offset, "sign": layer.sign,
                              "block": layer.block, **({"scale": 1.0} if _bias(layer) else {})}


def shaw_key_free(layer: Any, rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    """A ``shaw_key`` layer's call: seeded queries ``(H, T, d)`` of up to 2 heads at the record's head width (the
    scale is ``d^{-1/2}``: every channel is there) over :func:`shaw_key_frames` frames, and a seeded table of the
    record's rows; a bias per head's queries are head ``h``'s unit vector at every frame (its table a column per
    head)."""
    heads, frames = min(layer.n_heads, 2), shaw_key_frames(layer)
    if _bias(layer):
        one_hot = np.broadcast_to(np.eye(layer.n_heads)[:heads, None, :], (heads, frames, layer.n_heads)).copy()
        return [("frames", {"q": one_hot, "table": rng.standard_normal((layer.rows, layer.n_heads))})]
    return [("frames", {"q": rng.standard_normal((heads, frames, layer.head_dim)),
                        "table": rng.standard_normal((layer.rows, layer.head_dim))})]


def shaw_key_reference(layer: Any, a: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The terms of a ``shaw_key`` layer's call (0 at the pairs of two blocks) and a float32 port's bound
    (``ShawKeyInputs``), the table checked against the record's.

    See Also
    --------
    refpos.golden.cases.model_kinds.MODEL_KINDS : the registry naming it.
    """
    from refpos.encodings.shaw_key_mistakes import ShawKeyInputs

    width = layer.n_heads if _bias(layer) else layer.head_dim
    check_table_shapes({"table": (a["table"], (layer.rows, width))})
    return ShawKeyInputs(a["q"], a["table"], a["left"], a["right"], a["offset"], a["sign"], a.get("block"),
                         a.get("scale")).reference()


def shaw_key_shapes(layer: Any) -> dict[str, tuple[int, int]]:
    """The table's shape a ``shaw_key`` call must have: the record's rows and head width (its heads, a bias)."""
    return {"table": (layer.rows, layer.n_heads if _bias(layer) else layer.head_dim)}


__all__ = ["MAX_FRAMES", "SEEDED_WIDTH", "box_tables_free", "box_tables_reference", "box_tables_shapes",
           "shaw_key_frames", "shaw_key_free", "shaw_key_plan", "shaw_key_reference", "shaw_key_shapes",
           "tiled_grid_free"]
