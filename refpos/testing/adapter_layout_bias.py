"""The reference adapter's layout bias (docs/layout-bias.md; the contract of ``spec_tests/README.md``).

NumPy in and out: the kind's formula (:mod:`refpos.encodings.layout_bias`) is three bucket tables read at T5
buckets of the token and box distances, summed and divided by √d, in NumPy float64. :mod:`refpos.testing.adapter`
re-exports it; ``spec_tests/test_layout_bias.py`` is its spec.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.layout_bias_mistakes import layout_bias_inputs
from refpos.testing.adapter_arrays import to_host


def layout_bias(rel_table: np.ndarray, x_table: np.ndarray | None, y_table: np.ndarray | None, positions: Any,
                bbox: Any, head_dim: int, max_distance: int = 128, max_2d_distance: int = 256) -> np.ndarray:
    """The bias every layer adds, ``(..., H, T, T)``:
    ``(R[b(p_j − p_i)] + X[b2(x0_j − x0_i)] + Y[b2(y1_j − y1_i)]) / √head_dim`` with T5's bidirectional buckets
    (the tables' rows are the bucket counts). Tables not 2-D or of other head counts, one spatial table without the
    other, spatial tables without ``bbox``, counts or distances T5's buckets refuse: ValueError naming the
    parameter; non-integer places or boxes: TypeError or ValueError naming them."""
    tables = [None if t is None else to_host(t) for t in (rel_table, x_table, y_table)]
    inputs = layout_bias_inputs(*tables, to_host(positions), None if bbox is None else to_host(bbox),
                                max_distance=max_distance, max_2d_distance=max_2d_distance, head_dim=head_dim)
    return inputs.reference()[0]


__all__ = ["layout_bias"]
