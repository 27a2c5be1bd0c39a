"""``refpos check shaw_key``: Shaw's key term over clipped frame distances from a call of ``shaw_key_terms`` (the
queries, the table, the clip, the offset, the sign of the distance, the frames per block, the scale), against
:mod:`refpos.encodings.shaw_key` within the bound of a float32 port per entry
(:meth:`refpos.encodings.shaw_key_mistakes.ShawKeyInputs.bound`), the mistake named by
:func:`~refpos.encodings.shaw_key_mistakes.identify_shaw_key` (docs/relative.md#shaw-key-term). The candidate holds
the terms at the attended pairs and 0 at the pairs of two blocks.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.encodings.shaw_key_mistakes import SHAW_KEY_MISTAKES, ShawKeyInputs, identify_shaw_key


def shaw_key_terms(q: Any, table: Any, left: int, right: int, offset: int, sign: str, block: int | None = None,
                   scale: float | None = None) -> ShawKeyInputs:
    """The inputs of a ``shaw_key_terms`` call: queries ``(..., H, T, d)`` and a table ``(rows, d)``."""
    return ShawKeyInputs(np.asarray(q, dtype=np.float64), np.asarray(table, dtype=np.float64), left, right, offset,
                         sign, block, scale)


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """wav2vec2-BERT's form (key minus query, clip 3 below and 2 above, offset 3, one block), the same clip in a
    table of spare rows (offset 5 of 10 rows: a wider or exchanged clip reads rows it holds) and Granite Speech's
    (query minus key, blocks of 4 frames, clip ±4 from row 6), 11 frames of 2 heads of 4 channels (float32 values):
    together they show every mistake."""
    rng = np.random.default_rng(29)

    def values(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32).astype(np.float64)

    return [("shaw_key_terms", {"q": values(2, 11, 4), "table": values(6, 4), "left": 3, "right": 2, "offset": 3,
                                "sign": "key_minus_query"}),
            ("shaw_key_terms", {"q": values(2, 11, 4), "table": values(10, 4), "left": 3, "right": 2, "offset": 5,
                                "sign": "key_minus_query"}),
            ("shaw_key_terms", {"q": values(2, 11, 4), "table": values(13, 4), "left": 4, "right": 4, "offset": 6,
                                "sign": "query_minus_key", "block": 4})]


SHAW_KEY_CHECK = KindCheck(
    kind="shaw_key", calls=(shaw_key_terms,), reference=ShawKeyInputs.reference, identify=identify_shaw_key,
    mistakes={m.name: m.description for m in SHAW_KEY_MISTAKES}, wrong=partial(mistake_output, SHAW_KEY_MISTAKES),
    examples=_examples)

__all__ = ["SHAW_KEY_CHECK", "shaw_key_terms"]
