"""Hypothesis strategies for a document model's layout bias (docs/layout-bias.md): the inputs of the contract
function ``layout_bias`` (``spec_tests/README.md``).

>>> from hypothesis import given
>>> @given(layout_calls())
... def test_calls(call):
...     assert call["bbox"].shape[-1] == 4
>>> test_calls()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st


@st.composite
def layout_calls(draw: Any, max_tokens: int = 10, max_heads: int = 3) -> dict[str, Any]:
    """Keyword arguments of ``layout_bias``: a 1-D table and x and y tables of float32 values (``(buckets, H)``, an
    even bucket count each, at least 4), places ``0 … T − 1`` from a drawn start, boxes ``(1, T, 4)`` of page
    coordinates (``0 … 1000``, ``x0 ≤ x1``, ``y0 ≤ y1``), largest distances beyond each exact range, and a head
    width."""
    buckets, buckets_2d = 2 * draw(st.integers(2, 24)), 2 * draw(st.integers(2, 40))
    heads, tokens = draw(st.integers(1, max_heads)), draw(st.integers(1, max_tokens))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def table(rows: int) -> np.ndarray:
        return rng.standard_normal((rows, heads)).astype(np.float32).astype(np.float64)

    corners = np.sort(rng.integers(0, 1001, (tokens, 2, 2)), axis=1)  # [[x0, y0], [x1, y1]] ordered
    start = draw(st.integers(0, 300))
    return {"rel_table": table(buckets), "x_table": table(buckets_2d), "y_table": table(buckets_2d),
            "positions": np.arange(start, start + tokens), "bbox": corners.reshape(1, tokens, 4),
            "max_distance": draw(st.integers(buckets // 4 + 1, 300)),
            "max_2d_distance": draw(st.integers(buckets_2d // 4 + 1, 1200)), "head_dim": draw(st.integers(1, 128))}


__all__ = ["layout_calls"]
