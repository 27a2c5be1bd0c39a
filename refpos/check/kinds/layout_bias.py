"""``refpos check layout_bias``: a document model's relative bias from a call of ``layout_bias`` (the 1-D, x and y
bucket tables, the places, the boxes, the largest distances, the head width), against
:mod:`refpos.encodings.layout_bias` within the bound of a float32 port per entry
(:func:`refpos.encodings.layout_bias_mistakes.layout_bias_bound`), the mistake named by
:func:`~refpos.encodings.layout_bias_mistakes.identify_layout_bias` (docs/layout-bias.md#mistakes).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.encodings.layout_bias_mistakes import (
    LAYOUT_BIAS_MISTAKES,
    LayoutBiasInputs,
    identify_layout_bias,
    layout_bias_inputs,
)


def layout_bias(rel_table: Any, x_table: Any, y_table: Any, positions: Any, bbox: Any, head_dim: int,
                max_distance: int = 128, max_2d_distance: int = 256) -> LayoutBiasInputs:
    """The inputs of a ``layout_bias`` call: the bias every layer adds, ``(..., H, T, T)``."""
    return layout_bias_inputs(rel_table, x_table, y_table, positions, bbox, max_distance=max_distance,
                              max_2d_distance=max_2d_distance, head_dim=head_dim)


def examples() -> list[tuple[str, dict[str, Any]]]:
    """LayoutLMv3's buckets (32 to 128, x and y 64 to 256) over two heads of width 8, float32 tables: 40 tokens
    whose boxes differ by small, logarithmic and saturated distances (every mistake moves a bucket), then 200 tokens
    (1-D distances past the largest)."""
    rng = np.random.default_rng(41)

    def tables() -> dict[str, np.ndarray]:
        return {name: rng.standard_normal((rows, 2)).astype(np.float32).astype(np.float64)
                for name, rows in (("rel_table", 32), ("x_table", 64), ("y_table", 64))}

    def page(tokens: int) -> np.ndarray:
        corners = np.sort(rng.integers(0, 1000, (tokens, 2, 2)), axis=-2)  # (x0, x1), (y0, y1) ordered
        return np.ascontiguousarray(corners.transpose(0, 2, 1).reshape(tokens, 4)[:, [0, 2, 1, 3]])  # x0, y0, x1, y1

    common = {"max_distance": 128, "max_2d_distance": 256, "head_dim": 8}
    return [("layout_bias", {**tables(), "positions": np.arange(40), "bbox": page(40), **common}),
            ("layout_bias", {**tables(), "positions": np.arange(200), "bbox": page(200), **common})]


LAYOUT_BIAS_CHECK = KindCheck(
    kind="layout_bias", calls=(layout_bias,), reference=LayoutBiasInputs.reference, identify=identify_layout_bias,
    mistakes={m.name: m.description for m in LAYOUT_BIAS_MISTAKES},
    wrong=partial(mistake_output, LAYOUT_BIAS_MISTAKES), examples=examples)

__all__ = ["LAYOUT_BIAS_CHECK", "examples", "layout_bias"]
