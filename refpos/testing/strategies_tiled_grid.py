"""Hypothesis strategies for a tiled image's positions (docs/tiled-grid.md): the inputs of the contract function
``tiled_input_positions`` (``spec_tests/README.md``).

>>> from hypothesis import given
>>> @given(tiled_grid_calls())
... def test_calls(call):
...     assert call["tile_table"].shape[1] == call["max_num_tiles"] * call["embedding"].size
>>> test_calls()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st


@st.composite
def tiled_grid_calls(draw: Any, max_tiles: int = 4, max_rows: int = 5, max_width: int = 4, max_ids: int = 6
                     ) -> dict[str, Any]:
    """Keyword arguments of ``tiled_input_positions``: ``T`` tiles of ``N`` rows of width ``D``, tables of float32
    values with one row per aspect-ratio id, an id among them and three gates of float32 values in [−4, 4]
    (``tanh`` from near −1 to near 1)."""
    tiles, rows = draw(st.integers(1, max_tiles)), draw(st.integers(1, max_rows))
    width, ids = draw(st.integers(1, max_width)), draw(st.integers(1, max_ids))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def table(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32).astype(np.float64)

    gates = [float(np.float32(draw(st.floats(-4.0, 4.0, allow_nan=False)))) for _ in range(3)]
    return {"embedding": table(rows, width), "tile_table": table(ids, tiles * rows * width), "gate": gates[0],
            "pre_table": table(ids, tiles * width), "pre_gate": gates[1], "post_table": table(ids, tiles * width),
            "post_gate": gates[2], "aspect_ratio_id": draw(st.integers(0, ids - 1)), "max_num_tiles": tiles}
