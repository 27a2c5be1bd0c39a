"""Hypothesis strategies for Fourier features (docs/fourier.md): the inputs of the contract functions
``fourier_features`` and ``perceiver_fourier_features`` (``spec_tests/README.md``).

>>> from hypothesis import given
>>> @given(fourier_inputs())
... def test_features(inputs):
...     coords, gaussian = inputs
...     assert coords.shape[-1] == gaussian.shape[0]
>>> test_features()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st


@st.composite
def fourier_inputs(draw: Any, max_points: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates ``(P, n)`` in [0, 1] and a Gaussian matrix ``G`` ``(n, m)`` of scale 0.5–2 (SAM's is 1)."""
    seed, n, m = draw(st.integers(0, 2**32 - 1)), draw(st.integers(1, 3)), draw(st.integers(1, 32))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([0.5, 1.0, 2.0]))
    return rng.random((draw(st.integers(1, max_points)), n)), scale * rng.standard_normal((n, m))


@st.composite
def perceiver_settings(draw: Any) -> dict[str, Any]:
    """Index dims of a grid (1 to 3 axes), bands, resolutions and the two switches of Perceiver's encoding."""
    dims = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    return {"index_dims": dims, "num_bands": draw(st.integers(1, 12)),
            "max_resolution": [draw(st.integers(2, 64)) for _ in dims], "concat_pos": draw(st.booleans()),
            "sine_only": draw(st.booleans())}
