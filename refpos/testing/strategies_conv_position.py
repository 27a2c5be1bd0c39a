"""Hypothesis strategies for convolutional positional embeddings (``conv_positions`` and
``stacked_conv_positions`` of the adapter contract, docs/conv-position.md), as NumPy float64.

>>> from hypothesis import find
>>> from refpos.testing.strategies_conv_position import conv_position_cases
>>> case = find(conv_position_cases(), lambda c: c["weight_g"] is not None and c["weight"].shape[2] % 2 == 0)
>>> sorted(case)
['activation', 'bias', 'groups', 'stride', 'weight', 'weight_g', 'x']
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

#: the activations drawn: transformers' names of the exact GELU, its tanh form, ReLU and SiLU
ACTIVATIONS = ("gelu", "gelu_new", "relu", "swish")

__all__ = ["ACTIVATIONS", "conv_position_cases", "stacked_conv_position_cases"]


@st.composite
def _layer_shape(draw: Any, max_groups: int, max_per_group: int, max_kernel: int) -> tuple[int, int, int]:
    groups = draw(st.integers(1, max_groups))
    return groups, groups * draw(st.integers(1, max_per_group)), draw(st.integers(1, max_kernel))


@st.composite
def conv_position_cases(draw: Any, max_groups: int = 4, max_per_group: int = 3, max_kernel: int = 8,
                        max_frames: int = 16, strides: tuple[int, ...] = (1, 2, 3),
                        activations: tuple[str, ...] = ACTIVATIONS) -> dict[str, Any]:
    """The keyword arguments of one ``conv_positions`` call: frames ``x`` ``(B, T, C)``, a kernel ``weight``
    ``(C, C/G, K)`` (the direction v when ``weight_g`` ``(K,)`` is drawn, else the kernel itself), ``bias``,
    ``groups``, ``activation`` and ``stride`` (T at least K, so that every stride leaves a frame)."""
    groups, channels, kernel = draw(_layer_shape(max_groups, max_per_group, max_kernel))
    frames = draw(st.integers(kernel, max(kernel, max_frames)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    normalised = draw(st.booleans())
    return {"x": rng.standard_normal((draw(st.integers(1, 2)), frames, channels)),
            "weight": rng.standard_normal((channels, channels // groups, kernel)) / np.sqrt(kernel * channels / groups),
            "bias": 0.1 * rng.standard_normal(channels), "groups": groups,
            "activation": draw(st.sampled_from(activations)), "stride": draw(st.sampled_from(strides)),
            "weight_g": rng.uniform(0.5, 1.5, kernel) if normalised else None}


@st.composite
def stacked_conv_position_cases(draw: Any, max_layers: int = 3, max_groups: int = 4, max_per_group: int = 3,
                                max_kernel: int = 7, max_frames: int = 16,
                                activations: tuple[str, ...] = ACTIVATIONS) -> dict[str, Any]:
    """The keyword arguments of one ``stacked_conv_positions`` call: ``x``, ``weights`` ``(L, C, C/G, K)``,
    ``biases`` ``(L, C)``, ``groups``, ``activation`` and ``eps`` (1e-5, transformers' layer norm); at least two
    channels, so that the layer norm has a spread to divide by."""
    groups, channels, kernel = draw(_layer_shape(max_groups, max_per_group, max_kernel))
    if channels < 2:
        groups, channels = 1, 2
    layers = draw(st.integers(1, max_layers))
    frames = draw(st.integers(kernel, max(kernel, max_frames)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return {"x": rng.standard_normal((1, frames, channels)),
            "weights": rng.standard_normal((layers, channels, channels // groups, kernel)),
            "biases": 0.1 * rng.standard_normal((layers, channels)), "groups": groups,
            "activation": draw(st.sampled_from(activations)), "eps": 1e-5}
