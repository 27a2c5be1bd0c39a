"""Hypothesis strategies for Shaw's key term over clipped frame distances (docs/relative.md#shaw-key-term): the
inputs of the contract function ``shaw_key_terms`` (``spec_tests/README.md``).

>>> from hypothesis import given
>>> @given(shaw_key_calls())
... def test_calls(call):
...     assert call["table"].shape[1] == call["q"].shape[-1]
>>> test_calls()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st


@st.composite
def shaw_key_calls(draw: Any, max_frames: int = 9, max_clip: int = 5, max_width: int = 6) -> dict[str, Any]:
    """Keyword arguments of ``shaw_key_terms``: queries ``(H, T, d)`` and a table ``(rows, d)`` of float32 values,
    a clip ``[−L, R]`` (asymmetric or not, the frames often past it), an offset ``o ≥ L`` whose rows ``o − L … o + R``
    the table holds (spare rows around them sometimes), either sign, blocks of frames or none, and the softmax's
    scale (absent) or 1 (a bias per head read by one-hot queries)."""
    frames, heads, width = draw(st.integers(1, max_frames)), draw(st.integers(1, 3)), draw(st.integers(1, max_width))
    left, right = draw(st.integers(0, max_clip)), draw(st.integers(0, max_clip))
    offset = left + draw(st.integers(0, 2))
    rows = offset + right + 1 + draw(st.integers(0, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return {"q": rng.standard_normal((heads, frames, width)).astype(np.float32).astype(np.float64),
            "table": rng.standard_normal((rows, width)).astype(np.float32).astype(np.float64),
            "left": left, "right": right, "offset": offset,
            "sign": draw(st.sampled_from(["key_minus_query", "query_minus_key"])),
            "block": draw(st.one_of(st.none(), st.integers(1, max_frames))),
            **draw(st.sampled_from([{}, {"scale": 1.0}]))}
