"""The reference adapter's Shaw key term over clipped frame distances (docs/relative.md#shaw-key-term; the contract
of ``spec_tests/README.md``).

NumPy in and out: the kind's formula (:mod:`refpos.encodings.shaw_key`) is each query's product with the table's
rows of clipped distances, in NumPy float64, 0 at the pairs of two blocks (the mask is the caller's).
:mod:`refpos.testing.adapter` re-exports it; ``spec_tests/test_shaw_key.py`` is its spec.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.shaw_key_mistakes import ShawKeyInputs
from refpos.testing.adapter_arrays import to_host


def shaw_key_terms(q: np.ndarray, table: np.ndarray, left: int, right: int, offset: int, sign: str,
                   block: int | None = None, scale: float | None = None) -> np.ndarray:
    """The logit terms ``(..., H, T, T)``: ``σ·q_i·E[clip(s·(j − i), −L, R) + o]`` at the pairs of one block of
    ``block`` frames (every pair where ``block`` is ``None``), 0 at the pairs of two blocks; ``s`` +1 for
    ``"key_minus_query"``, −1 for ``"query_minus_key"``, ``σ`` the ``scale`` (``None``: ``d^{-1/2}``). A row outside
    the table, queries and table of different widths: ValueError naming them; a bad clip, offset, sign or block:
    ValueError naming it."""
    inputs = ShawKeyInputs(to_host(q), to_host(table), left, right, offset, sign, block, scale)
    return inputs.output()
