"""Hypothesis strategies for fixed 2-D sin–cos embeddings (docs/sincos2d.md): the inputs of the contract functions
``sincos_2d_grid``, ``sine_position_map`` and ``sine_coordinates`` (``spec_tests/README.md``).

>>> from hypothesis import given
>>> @given(grid_settings())
... def test_grid(settings):
...     assert settings["dim"] % 4 == 0
>>> test_grid()
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

#: the temperatures models use (10000 everywhere, 20 in Grounding DINO and DAB-DETR) and one more
TEMPERATURES = (10000.0, 20.0, 100.0)


@st.composite
def grid_settings(draw: Any, max_side: int = 12) -> dict[str, Any]:
    """Keywords of ``sincos_2d_grid``: sizes, a dim that is a multiple of 4, the temperature, axes, flatten, cls."""
    return {"height": draw(st.integers(1, max_side)), "width": draw(st.integers(1, max_side)),
            "dim": 4 * draw(st.integers(1, 16)), "temperature": draw(st.sampled_from(TEMPERATURES)),
            "axes": draw(st.sampled_from(["yx", "xy"])),
            "flatten": draw(st.sampled_from(["row_major", "column_major"])),
            "cls_rows": draw(st.integers(0, 2))}


@st.composite
def padding_masks(draw: Any, max_side: int = 10, max_batch: int = 3) -> np.ndarray:
    """A batch of pixel masks ``(B, H, W)``: each image valid in its top-left ``h × w`` corner, padded below and to
    the right (how a detector's processor pads a batch), at least one valid pixel per image."""
    batch = draw(st.integers(1, max_batch))
    height, width = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    mask = np.zeros((batch, height, width), dtype=bool)
    for b in range(batch):
        mask[b, : draw(st.integers(1, height)), : draw(st.integers(1, width))] = True
    return mask


@st.composite
def mask_settings(draw: Any) -> dict[str, Any]:
    """Keywords of ``sine_position_map`` besides the mask: the width per axis, temperature(s), normalisation."""
    normalize = draw(st.booleans())
    temperature = draw(st.one_of(st.sampled_from(TEMPERATURES),
                                 st.lists(st.sampled_from(TEMPERATURES), min_size=2, max_size=2)))
    out = {"num_features": 2 * draw(st.integers(1, 16)), "temperature": temperature, "normalize": normalize}
    if normalize:
        out["offset"] = draw(st.sampled_from([0.0, -0.5]))
    return out


@st.composite
def coordinate_inputs(draw: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """Coordinates ``(P, n)`` in [0, 1] (n of 1, 2 or 4) and the keywords of ``sine_coordinates``."""
    seed, points, n = draw(st.integers(0, 2**32 - 1)), draw(st.integers(1, 6)), draw(st.sampled_from([1, 2, 4]))
    coords = np.random.default_rng(seed).random((points, n))
    return coords, {"num_features": 2 * draw(st.integers(1, 16)), "temperature": draw(st.sampled_from(TEMPERATURES)),
                    "scale": draw(st.sampled_from([2 * np.pi, 1.0])), "swap_xy": draw(st.booleans()),
                    "layout": draw(st.sampled_from(["interleaved", "concat"])),
                    "rule": draw(st.sampled_from(["paired", "doubled"]))}
