"""Hypothesis strategies for a token's box positions (docs/box-tables.md): the inputs of the contract function
``box_positions`` (``spec_tests/README.md``).

>>> from hypothesis import given
>>> @given(box_calls())
... def test_calls(call):
...     assert call["bbox"].shape[-1] == 4
>>> test_calls()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st


@st.composite
def box_calls(draw: Any, max_rows: int = 48, max_width: int = 6, max_tokens: int = 6) -> dict[str, Any]:
    """Keyword arguments of ``box_positions``: four tables of float32 values (the x and y tables of one row count,
    the height and width tables of their own), and boxes ``(1, T, 4)`` whose corners, heights and widths are rows
    of their tables (``x0 ≤ x1``, ``y0 ≤ y1``)."""
    rows = {t: draw(st.integers(2, max_rows)) for t in "xyhw"}
    width, tokens = draw(st.integers(1, max_width)), draw(st.integers(1, max_tokens))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    tables = {f"{t}_table": rng.standard_normal((rows[t], width)).astype(np.float32).astype(np.float64)
              for t in "xyhw"}
    boxes = []
    for _ in range(tokens):
        x0 = draw(st.integers(0, rows["x"] - 1))
        x1 = draw(st.integers(x0, min(rows["x"] - 1, x0 + rows["w"] - 1)))
        y0 = draw(st.integers(0, rows["y"] - 1))
        y1 = draw(st.integers(y0, min(rows["y"] - 1, y0 + rows["h"] - 1)))
        boxes.append([x0, y0, x1, y1])
    return {**tables, "bbox": np.asarray(boxes, dtype=np.int64)[None]}
