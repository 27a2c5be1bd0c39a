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

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from refpos.encodings.layout_bias import X_CORNER, Y_CORNER, layout_bias, layout_buckets
from refpos.mistake_match import KindMistake, identify_output
from refpos.validation import check_int

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


@dataclass(frozen=True)
class LayoutBiasInputs:
    """One call of ``layout_bias``: the tables (``"1d"``, and ``"x"``, ``"y"`` where spatial; float64, checked),
    the places, the boxes, the two largest distances and the head width."""

    tables: dict[str, np.ndarray]
    positions: np.ndarray
    bbox: np.ndarray | None
    max_distance: int
    max_2d_distance: int
    head_dim: int

    @property
    def params(self) -> dict[str, Any]:
        """The parameters :func:`bias_with` and :func:`mistaken` take, as the tables state them."""
        return {"num_buckets": self.tables["1d"].shape[0], "max_distance": self.max_distance,
                "num_2d_buckets": self.tables["x"].shape[0] if "x" in self.tables else 64,
                "max_2d_distance": self.max_2d_distance, "spatial": "x" in self.tables}

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        """The bias and, per entry, a float32 port's bound (:func:`layout_bias_bound`)."""
        return (bias_with(self.tables, self.positions, self.bbox, self.params, self.head_dim),
                layout_bias_bound(self.tables, self.positions, self.bbox, self.params, self.head_dim))

    @cached_property
    def wrong_outputs(self) -> dict[str, tuple[np.ndarray, np.ndarray] | None]:
        """Each mistake's output and bound (the right one's, the same rows' magnitudes at most rearranged) at these
        inputs; ``None`` where it cannot show (the spatial mistakes without the spatial tables, a mistake that
        buckets past a table or gives no other bucket count)."""
        out: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
        for name in MISTAKES:
            wrong = mistaken(name, self.params)
            if not self.params["spatial"] and name in SPATIAL:
                out[name] = None
                continue
            try:
                bias = bias_with(self.tables, self.positions, self.bbox, wrong, self.head_dim)
                bound = layout_bias_bound(self.tables, self.positions, self.bbox, {**wrong, "scaled": True},
                                          self.head_dim)
            except ValueError:  # bucketed past its table, or a count T5's buckets refuse
                out[name] = None
                continue
            out[name] = (bias, bound * (1.0 if wrong.get("scaled", True) else np.sqrt(self.head_dim)))
        return out


#: the mistakes of the spatial part (none shows without the x and y tables)
SPATIAL = ("axes_swapped", "y_top_edge", "x_right_edge", "buckets_2d_halved", "max_2d_distance_halved",
           "max_2d_distance_plus_one", "no_spatial")


def layout_bias_inputs(rel_table: Any, x_table: Any, y_table: Any, positions: Any, bbox: Any = None, *,
                       max_distance: int = 128, max_2d_distance: int = 256, head_dim: int) -> LayoutBiasInputs:
    """The inputs of one call of :func:`~refpos.encodings.layout_bias.layout_bias`, checked (its own errors, naming
    the parameter)."""
    layout_bias(rel_table, x_table, y_table, positions, bbox, max_distance=max_distance,
                max_2d_distance=max_2d_distance, head_dim=head_dim)  # every argument checked, by name
    tables = {"1d": np.asarray(rel_table, dtype=np.float64)}
    if x_table is not None:
        tables.update(x=np.asarray(x_table, dtype=np.float64), y=np.asarray(y_table, dtype=np.float64))
    return LayoutBiasInputs(tables, np.asarray(positions, dtype=np.int64),
                            None if x_table is None else np.asarray(bbox, dtype=np.int64),
                            check_int("max_distance", max_distance), check_int("max_2d_distance", max_2d_distance),
                            check_int("head_dim", head_dim))


def _mistake(name: str) -> Callable[[LayoutBiasInputs], tuple[np.ndarray, np.ndarray] | None]:
    def compute(inputs: LayoutBiasInputs) -> tuple[np.ndarray, np.ndarray] | None:
        return inputs.wrong_outputs[name]
    return compute


#: the mistakes :func:`identify_layout_bias` names
LAYOUT_BIAS_MISTAKES: tuple[KindMistake, ...] = tuple(KindMistake(name, text, _mistake(name))
                                                      for name, text in MISTAKES.items())


def identify_layout_bias(candidate: Any, inputs: LayoutBiasInputs) -> str | None:
    """The catalogued mistake ``candidate`` matches, or ``None`` (a correct port, or an output no mistake explains)."""
    return identify_output(candidate, inputs.reference(), LAYOUT_BIAS_MISTAKES, inputs)


__all__ = ["LAYOUT_BIAS_MISTAKES", "MISTAKES", "SPATIAL", "U32", "LayoutBiasInputs", "bias_with",
           "identify_layout_bias", "layout_bias_bound", "layout_bias_inputs", "mistaken"]
