r"""DroPE: a RoPE model with its positional embedding dropped (docs/nope-drope.md#drope), and NoPE.

DroPE (Gelberg, Eguchi, Akiba, Cetin 2025, arXiv 2512.12167; SakanaAI/DroPE) takes an LM pretrained with
RoPE, removes the rotation, and recalibrates briefly at the original context length. The official code
replaces the incoming ``(cos, sin)`` by ``(1, 0)``: the **identity rotation** (not zeros, which would
annihilate q and k; SakanaAI/DroPE#3). So, for a model whose rotary magnitude factor is 1,

.. math:: \text{DroPE} \equiv \text{RoPE with every position id } 0 \equiv \text{NoPE}.

Options of the official code: RMSNorm (weights 1 at load) over the **full projected width** of q
(``n_heads·head_dim``) and/or k (``n_kv·head_dim``), before the head split (not per-head QK-norm), and a
``softmax_scale`` that replaces ``1/√d`` when set (no shipped config sets it).

**Unverified** (not confirmed against the paper's text or code): whether a length-dependent softmax
temperature is applied at long context; recalibration budgets (0.5–2 % of pretraining tokens) and
benchmark numbers quoted by secondary sources. Weights and training are out of scope here.

NoPE is :class:`refpos.encodings.NoPE` (or ``encoding=None``): order reaches the model only through the causal mask.

Examples
--------
>>> import numpy as np, refpos
>>> x = np.random.default_rng(0).standard_normal((4, 8))
>>> w = refpos.AttentionWeights.identity(8, xp=np)
>>> a, _ = refpos.self_attention(x, w, encoding=DroPE(), causal=True)
>>> b, _ = refpos.self_attention(x, w, encoding=None, causal=True)
>>> bool(np.all(a == b))
True
"""

from __future__ import annotations

from typing import Any

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.validation import check_choice, check_float, floating_array

#: the official code's ``attention_type`` values and the QK-norm each one means
ATTENTION_TYPES = {"nope": None, "qk_norm_nope": "qk", "q_norm_nope": "q", "k_norm_nope": "k"}


def rms_norm(x: Array, weight: Array | None = None, *, eps: float = 1e-6) -> Array:
    r"""RMSNorm over the last axis: :math:`x / \sqrt{\overline{x^2} + \epsilon}\,\cdot w` (``w = 1`` if None)."""
    x = floating_array(x, name="x")
    xp = array_namespace(x)
    eps = check_float("eps", eps, minimum=0.0)
    y = x / xp.sqrt(xp.mean(x * x, axis=-1, keepdims=True) + eps)
    if weight is None:
        return y
    weight = floating_array(weight, name="weight", xp=xp)
    if tuple(weight.shape) != (x.shape[-1],):
        raise ValueError(f"weight must have shape ({x.shape[-1]},), got {tuple(weight.shape)}")
    return y * weight


class DroPE(Encoding):
    """DroPE as a :class:`refpos.Encoding`: identity rotation, optional full-width QK-norm, softmax scale.

    Parameters
    ----------
    qk_norm : {None, "q", "k", "qk"}
        Which projections get RMSNorm over their full projected width (``project_qk`` hook).
    q_norm_weight, k_norm_weight : array, optional
        RMSNorm weights of widths ``n_heads·head_dim`` and ``n_kv·head_dim`` (default: ones).
    eps : float
        RMSNorm epsilon (default 1e-6).
    softmax_scale : float, optional
        Replaces ``head_dim^{-1/2}`` when given.
    """

    name = "drope"

    def __init__(
        self,
        *,
        qk_norm: str | None = None,
        q_norm_weight: Array | None = None,
        k_norm_weight: Array | None = None,
        eps: float = 1e-6,
        softmax_scale: float | None = None,
    ) -> None:
        self.qk_norm = None if qk_norm is None else check_choice("qk_norm", qk_norm, ("q", "k", "qk"))
        if q_norm_weight is not None and self.qk_norm not in ("q", "qk"):
            raise ValueError("q_norm_weight given but qk_norm does not normalise q")
        if k_norm_weight is not None and self.qk_norm not in ("k", "qk"):
            raise ValueError("k_norm_weight given but qk_norm does not normalise k")
        self.q_norm_weight, self.k_norm_weight = q_norm_weight, k_norm_weight
        self.eps = check_float("eps", eps, minimum=0.0)
        self.scale = None if softmax_scale is None else check_float("softmax_scale", softmax_scale, positive=True)

    @classmethod
    def from_attention_type(cls, attention_type: str, **kwargs: Any) -> DroPE:
        """From the official config's ``attention_type``: nope, qk_norm_nope, q_norm_nope, k_norm_nope."""
        check_choice("attention_type", attention_type, tuple(ATTENTION_TYPES))
        return cls(qk_norm=ATTENTION_TYPES[attention_type], **kwargs)

    def project_qk(self, q: Array, k: Array) -> tuple[Array, Array]:
        if self.qk_norm in ("q", "qk"):
            q = rms_norm(q, self.q_norm_weight, eps=self.eps)  # over n_heads·head_dim
        if self.qk_norm in ("k", "qk"):
            k = rms_norm(k, self.k_norm_weight, eps=self.eps)  # over n_kv·head_dim
        return q, k

    def rotate(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> tuple[Array, Array]:
        """The identity rotation (cos = 1, sin = 0): ``x·1 + rh(x)·0 = x`` exactly, so q and k are returned."""
        return q, k

    def softmax_scale(self, head_dim: int) -> float:
        return head_dim**-0.5 if self.scale is None else self.scale

    def __repr__(self) -> str:
        return f"DroPE(qk_norm={self.qk_norm!r}, eps={self.eps}, softmax_scale={self.scale})"
