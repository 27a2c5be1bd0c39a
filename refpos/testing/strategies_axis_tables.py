"""Hypothesis strategies for factorised tables read at per-patch indices (docs/axis-tables.md): the inputs of the
contract function ``axis_table_positions`` (``spec_tests/README.md``).

>>> from hypothesis import given
>>> @given(axis_table_calls())
... def test_calls(call):
...     assert call["indices"].shape[-1] == 2
>>> test_calls()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

#: the variants of refpos.encodings.axis_tables.AXIS_TABLE_VARIANTS, with whether an id −1 marks padding
VARIANTS = {"pix2struct": False, "gemma4": True, "gemma4_unified": True}


@st.composite
def axis_table_calls(draw: Any, max_rows: int = 10, max_patches: int = 12) -> dict[str, Any]:
    """Keyword arguments of ``axis_table_positions``: a variant, two tables of float32 values (their lengths drawn
    apart, one width) and indices inside them, −1 anywhere for a variant that marks padding with it."""
    variant = draw(st.sampled_from(tuple(VARIANTS)))
    rows, cols, width = draw(st.integers(1, max_rows)), draw(st.integers(1, max_rows)), draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    row_table = rng.standard_normal((rows, width)).astype(np.float32).astype(np.float64)
    column_table = rng.standard_normal((cols, width)).astype(np.float32).astype(np.float64)
    first, second = (rows, cols) if variant == "pix2struct" else (cols, rows)  # Gemma 4's ids are (x, y)
    low = -1 if VARIANTS[variant] else 0
    count = draw(st.integers(1, max_patches))
    pairs = [[draw(st.integers(low, first - 1)), draw(st.integers(low, second - 1))] for _ in range(count)]
    return {"indices": np.array(pairs, dtype=np.int64), "row_table": row_table, "column_table": column_table,
            "variant": variant}
