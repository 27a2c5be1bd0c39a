"""Hypothesis strategies for the 1-D audio and time-series sinusoids (docs/sinusoid1d.md): the inputs of the contract
functions ``sinusoid_1d`` and ``padded_sinusoid`` (``spec_tests/README.md``).

>>> from hypothesis import given
>>> @given(sinusoid_settings())
... def test_settings(settings):
...     assert settings["dim"] % 2 == 0
>>> test_settings()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st


@st.composite
def sinusoid_settings(draw: Any) -> dict[str, Any]:
    """Keywords of ``sinusoid_1d``: an even dim, spacing, layout, which of the pair first, base, scale, amplitude."""
    return {"dim": 2 * draw(st.integers(1, 64)), "spacing": draw(st.sampled_from(["paper", "tensor2tensor"])),
            "layout": draw(st.sampled_from(["interleaved", "concat"])), "first": draw(st.sampled_from(["sin", "cos"])),
            "base": draw(st.sampled_from([10000.0, 2500.0])), "frequency_scale": draw(st.sampled_from([1.0, 2.0])),
            "amplitude": draw(st.sampled_from([1.0, 0.125, 0.7]))}


@st.composite
def signed_positions(draw: Any, max_abs: int = 3000) -> np.ndarray:
    """Integer positions of either sign (the distances of a relative table, or absolute positions)."""
    return np.array(draw(st.lists(st.integers(-max_abs, max_abs), min_size=1, max_size=16)), dtype=np.int64)


@st.composite
def step_masks(draw: Any, max_len: int = 16, max_batch: int = 3) -> np.ndarray:
    """Step masks ``(B, T)`` with at least one real step per row, padding anywhere (left, right or inside)."""
    batch, length = draw(st.integers(1, max_batch)), draw(st.integers(1, max_len))
    rows = [draw(st.lists(st.booleans(), min_size=length, max_size=length).filter(any)) for _ in range(batch)]
    return np.array(rows, dtype=bool)
