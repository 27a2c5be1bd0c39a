"""The reference adapter's functions for convolutional positional embeddings (the contract of
``spec_tests/README.md``): wav2vec2's family and SEW (one weight-normalised or plain convolution), Data2Vec-audio
(stacked layers with layer norm); docs/conv-position.md.

:mod:`refpos.testing.adapter` imports them, so ``REFPOS_IMPL=refpos.testing.adapter`` provides them.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.conv_position import (
    add_conv_positions,
    conv_position_embedding,
    stacked_conv_position_embedding,
    weight_norm,
)
from refpos.testing.adapter_arrays import to_backend, to_host


def conv_positions(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, groups: int, activation: str,
                   stride: int = 1, weight_g: np.ndarray | None = None) -> np.ndarray:
    """The frames the encoder layers receive, ``x + e`` ``(B, T, C)`` (stride s > 1: SEW's ``avgpool_s(x) + e``,
    cut to the shorter): ``e = act(trim(conv(x)))``, a 1-D convolution over time with kernel ``weight``
    ``(C, C/G, K)`` (with ``weight_g`` ``(K,)`` given: the direction v, the kernel ``g_k·v/‖v[:, :, k]‖``, one norm
    per tap over all channels), ``groups`` G (output channel o reads the input channels of group ``⌊o/(C/G)⌋``),
    zero padding ``⌊K/2⌋``, stride s; ``trim`` drops the last frame when K is even; ``activation`` a transformers
    name (``"gelu"`` exact, ``"gelu_new"`` tanh, ``"relu"``, ``"swish"``). Unknown activation: ValueError."""
    xb = to_backend(x, np.float64)
    kernel = to_backend(weight, np.float64)
    if weight_g is not None:
        kernel = weight_norm(kernel, to_backend(weight_g, np.float64), dim=2)
    e = conv_position_embedding(xb, kernel, to_backend(bias, np.float64), groups=groups, activation=activation,
                                stride=stride)
    return to_host(add_conv_positions(xb, e, stride=stride))


def stacked_conv_positions(x: np.ndarray, weights: np.ndarray, biases: np.ndarray, groups: int, activation: str,
                           eps: float) -> np.ndarray:
    """Data2Vec-audio's ``x + e`` ``(B, T, C)``: ``e = h_L``, ``h_{l+1} = act(LN_eps(trim(conv(h_l; weights[l],
    biases[l]))))`` with ``h_0 = x``, ``weights`` ``(L, C, C/G, K)``, ``biases`` ``(L, C)``, padding ``⌊K/2⌋``,
    stride 1, ``LN`` over the channels without parameters, no weight norm."""
    xb = to_backend(x, np.float64)
    kernels = [to_backend(w, np.float64) for w in np.asarray(weights)]
    shifts = [to_backend(b, np.float64) for b in np.asarray(biases)]
    e = stacked_conv_position_embedding(xb, kernels, shifts, groups=groups, activation=activation, eps=eps)
    return to_host(add_conv_positions(xb, e, stride=1))
