r"""The hook interface through which every positional encoding enters the attention pipeline.

An encoding acts at one or two of these points of :func:`refpos.self_attention`:

======================  ===========================================  ==============================
point                   hook                                         encodings
======================  ===========================================  ==============================
input embeddings        ``embed(positions, d_model, xp)``            sinusoidal, learned absolute
full projected q, k     ``project_qk(q, k)``                         DroPE (QK-norm)
queries and keys        ``rotate(q, k, q_positions, k_positions)``   RoPE (every variant), xPos
logits, additive        ``bias(q_positions, k_positions, n_heads)``  distance bias, ALiBi, T5, ...
logits from q           ``qk_terms(q, k, q_positions, k_positions)`` Shaw a^K, Transformer-XL, CoPE
values                  ``value_terms(q_positions, k_positions)``    Shaw a^V
softmax scale           ``softmax_scale(head_dim)``                  T5 (1), DeepSeek YaRN (mscale²)
per-query temperature   ``temperature(q_positions)``                 query scales (Llama 4, Ministral-3)
======================  ===========================================  ==============================

Every hook of the base class means "no effect", so ``Encoding()`` is NoPE. A query scaled by its position
(:math:`s(p)\,q`, :mod:`refpos.models.query_scales`) is a per-query temperature of the logits, since
:math:`(s\,q)\cdot k = s\,(q\cdot k)`: :class:`QueryScaled` adds one to any encoding. ``bias_scaled`` says
whether the additive bias enters before the softmax scale (the worked example, Falcon) or after it (ALiBi, T5).

Shapes: ``q`` and ``k`` are ``(B, H, T, d)``; positions are integer arrays ``(T,)`` or ``(B, T)``; a
bias is ``(H or 1, Tq, Tk)`` or ``(B, H or 1, Tq, Tk)``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from refpos.backend import Array, array_namespace, to_numpy


class Encoding:
    """Base class of all encodings; used on its own it is NoPE (no positional information)."""

    #: short name used in traces, goldens and the CLI
    name: str = "nope"
    #: True: the bias is added to q·kᵀ before the softmax scale (the worked example's order); False: after it
    bias_scaled: bool = False
    #: where each hook's positions come from: use (``"rotation"``, ``"scale"``, ``"query"``, ``"key"``,
    #: ``"rows"``) → the inputs read, in order of precedence (``refpos.models.sources``); empty: every hook reads
    #: the ``positions`` passed. A layer record's encoding carries the record's (``LayerRecord.encoding``).
    reads: ClassVar[dict[str, tuple[str, ...]]] = {}

    def embed(self, positions: Array, d_model: int, xp: ModuleType) -> Array | None:
        """Absolute position vectors P added to the input, ``(T, d_model)`` or ``(B, T, d_model)``."""
        return None

    def project_qk(self, q: Array, k: Array) -> tuple[Array, Array]:
        """Transform the projected q ``(B, T, Hq·d)`` and k ``(B, T, Hkv·d)`` before the head split."""
        return q, k

    def rotate(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> tuple[Array, Array]:
        """Position-dependent transform of q ``(B, Hq, Tq, d)`` and k ``(B, Hkv, Tk, d)``."""
        return q, k

    def qk_terms(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> Array | None:
        """Extra terms added to q·kᵀ before scaling, ``(B, Hq, Tq, Tk)``."""
        return None

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array | None:
        """Additive logit bias, ``(H or 1, Tq, Tk)`` or ``(B, H or 1, Tq, Tk)``."""
        return None

    def value_terms(self, q_positions: Array, k_positions: Array) -> Callable[[Array], Array] | None:
        """A function of the attention weights ``(B, Hq, Tq, Tk)`` whose result is added to A·V."""
        return None

    def softmax_scale(self, head_dim: int) -> float:
        """The factor multiplying the logits; the default is ``head_dim ** -0.5``."""
        return head_dim**-0.5

    def temperature(self, q_positions: Array) -> Array | None:
        """Per-query factor of the logits, the shape of ``q_positions`` (``(Tq,)`` or ``(B, Tq)``)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NoPE(Encoding):
    """No positional encoding at all: order reaches the model only through a causal mask."""

    name = "nope"


class QueryScaled(Encoding):
    """``inner`` with its query multiplied by ``scale(p)`` at position ``p`` (a per-query temperature).

    ``scale`` maps integer positions (NumPy, any shape) to float64 factors of the same shape, e.g. a
    :class:`refpos.models.query_scales.QueryScale`. Every other hook is ``inner``'s.
    """

    def __init__(self, inner: Encoding, scale: Callable[[Any], Any]) -> None:
        if not isinstance(inner, Encoding):
            raise TypeError(f"inner must be a refpos.Encoding, got {type(inner).__name__}")
        if not callable(scale):
            raise TypeError(f"scale must be callable (positions -> factors), got {type(scale).__name__}")
        self.inner, self.scale = inner, scale
        self.name = f"{inner.name}+scale"
        self.bias_scaled = inner.bias_scaled

    def embed(self, positions: Array, d_model: int, xp: ModuleType) -> Array | None:
        return self.inner.embed(positions, d_model, xp)

    def project_qk(self, q: Array, k: Array) -> tuple[Array, Array]:
        return self.inner.project_qk(q, k)

    def rotate(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> tuple[Array, Array]:
        return self.inner.rotate(q, k, q_positions, k_positions)

    def qk_terms(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> Array | None:
        return self.inner.qk_terms(q, k, q_positions, k_positions)

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array | None:
        return self.inner.bias(q_positions, k_positions, n_heads)

    def value_terms(self, q_positions: Array, k_positions: Array) -> Callable[[Array], Array] | None:
        return self.inner.value_terms(q_positions, k_positions)

    def softmax_scale(self, head_dim: int) -> float:
        return self.inner.softmax_scale(head_dim)

    def temperature(self, q_positions: Array) -> Array:
        """``scale(p)`` times ``inner``'s temperature, in the namespace and on the device of the positions."""
        xp = array_namespace(q_positions)  # the scale is a host formula of integer positions
        factors = xp.asarray(np.asarray(self.scale(np.asarray(to_numpy(q_positions))), dtype=np.float64))
        inner = self.inner.temperature(q_positions)
        return factors if inner is None else factors * inner

    def __repr__(self) -> str:
        return f"QueryScaled({self.inner!r}, {self.scale!r})"
