r"""What a wrong port of the layout bias (:mod:`refpos.encodings.layout_bias`) computes, by name, and the bound of a
right float32 one (docs/layout-bias.md#mistakes).

Each mistake is the parameters of :func:`~refpos.encodings.layout_bias.layout_bias` a port changes
(:data:`MISTAKES`): the box coordinates each axis reads, the bucket counts and largest distances, the sign of the
relative position, the scale. A mistake that would index past a table (twice the buckets) is caught by the
port's own lookup, not by a value, and is not listed.

The bound. transformers computes the bias in float32: the three rows are read exactly (a gather of the float32
tables), then ``X + Y`` and ``+ R`` round once each, and the division by ``√d`` (``√d`` rounded to float32, the
quotient rounded) twice more, so with :math:`u = 2^{-24}`

.. math:: |\Delta B_{hij}| \le 4u\,(1 + 4u)\,\frac{|R[\cdot]| + |X[\cdot]| + |Y[\cdot]|}{\sqrt{d}}

per entry, whatever the order of the two additions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.layout_bias import X_CORNER, Y_CORNER, layout_buckets

#: float32's unit roundoff
U32 = 2.0**-24

#: mistake -> what a port does instead (the parameters of layout_bias it changes)
MISTAKES: dict[str, str] = {
    "axes_swapped": "the x table read at the y coordinate and the y table at the x coordinate",
    "y_top_edge": "the y table read at the top edge y0, not the bottom edge y1",
    "x_right_edge": "the x table read at the right edge x1, not the left edge x0",
    "buckets_halved": "half the 1-D buckets (rel_pos_bins / 2)",
    "buckets_2d_halved": "half the x and y buckets (rel_2d_pos_bins / 2)",
    "max_distance_halved": "half the 1-D largest distance (max_rel_pos / 2)",
    "max_2d_distance_halved": "half the x and y largest distance (max_rel_2d_pos / 2)",
    "max_2d_distance_plus_one": "the x and y largest distance one more (max_rel_2d_pos + 1)",
    "distance_sign_flipped": "query minus key, not key minus query",
    "unscaled": "the bias not divided by √d",
    "no_spatial": "the x and y tables left out",
}


def mistaken(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters ``params`` of a layout bias (``num_buckets``, ``max_distance``, ``num_2d_buckets``,
    ``max_2d_distance``, ``x_corner``, ``y_corner``, ``sign``, ``scaled``, ``spatial``) as mistake ``name`` has
    them."""
    p = {"x_corner": X_CORNER, "y_corner": Y_CORNER, "sign": 1, "scaled": True, "spatial": True, **params}
    change = {"axes_swapped": {"x_corner": p["y_corner"], "y_corner": p["x_corner"]},
              "y_top_edge": {"y_corner": 1}, "x_right_edge": {"x_corner": 2},
              "buckets_halved": {"num_buckets": p["num_buckets"] // 2},
              "buckets_2d_halved": {"num_2d_buckets": p["num_2d_buckets"] // 2},
              "max_distance_halved": {"max_distance": p["max_distance"] // 2},
              "max_2d_distance_halved": {"max_2d_distance": p["max_2d_distance"] // 2},
              "max_2d_distance_plus_one": {"max_2d_distance": p["max_2d_distance"] + 1},
              "distance_sign_flipped": {"sign": -1}, "unscaled": {"scaled": False}, "no_spatial": {"spatial": False}}
    if name not in change:
        raise ValueError(f"mistake must be one of {sorted(change)}, got {name!r}")
    return {**p, **change[name]}


def bias_with(tables: dict[str, np.ndarray], positions: Any, bbox: Any, params: dict[str, Any],
              head_dim: int) -> np.ndarray:
    """The bias ``(..., H, T, T)`` a port with parameters ``params`` (:func:`mistaken`'s) computes from ``tables``
    (``"1d"``, and ``"x"``, ``"y"`` where spatial) at ``positions`` and ``bbox``; a bucket past a table is a
    ``ValueError``."""
    sign = params.get("sign", 1)
    spatial = params.get("spatial", True) and "x" in tables
    pos = sign * np.asarray(positions, dtype=np.int64)
    box = None if not spatial else sign * np.asarray(bbox, dtype=np.int64)
    buckets = layout_buckets(pos, box, num_buckets=params["num_buckets"], max_distance=params["max_distance"],
                             num_2d_buckets=params.get("num_2d_buckets", 64),
                             max_2d_distance=params.get("max_2d_distance", 256),
                             x_corner=params.get("x_corner", X_CORNER), y_corner=params.get("y_corner", Y_CORNER))
    total = 0.0
    for name, index in buckets.items():
        if index.size and index.max() >= tables[name].shape[0]:
            raise ValueError(f"the {name} buckets reach {int(index.max())}, past the table's {tables[name].shape[0]} "
                             "rows")
        total = total + tables[name][index]
    out = np.moveaxis(np.asarray(total, dtype=np.float64), -1, -3)
    return out / np.sqrt(head_dim) if params.get("scaled", True) else out


def layout_bias_bound(tables: dict[str, np.ndarray], positions: Any, bbox: Any, params: dict[str, Any],
                      head_dim: int) -> np.ndarray:
    r"""The module docstring's bound per entry, ``(..., H, T, T)``: :math:`4u(1 + 4u)\sum|\text{rows}|/\sqrt{d}`
    of the rows the right bias reads."""
    magnitude = bias_with({k: np.abs(v) for k, v in tables.items()}, positions, bbox, {**params, "scaled": False},
                          head_dim)
    return 4 * U32 * (1 + 4 * U32) * magnitude / np.sqrt(head_dim)


__all__ = ["MISTAKES", "U32", "bias_with", "layout_bias_bound", "mistaken"]
