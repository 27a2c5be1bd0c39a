r"""The full self-attention pipeline, returning every intermediate by name.

.. code-block:: text

    X ──(+ P)──> X+P ──W_Q, W_K, W_V──> Q, K, V ──(rotate q, k)──> S = Q·Kᵀ (+ q·r terms)
      ──(+ B before the scale?)──> scaled ──(+ B after)──> mask ──> A = softmax ──> O = A·V ──W_O──> out

An encoding (:class:`refpos.Encoding`) plugs in through its hooks; ``encoding=None`` is NoPE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from refpos.backend import Array
from refpos.core.attention import attention
from refpos.core.heads import merge_heads, split_heads
from refpos.encoding import Encoding, NoPE
from refpos.models.sources import PLAIN, Given
from refpos.validation import as_positions, check_int, real_floating_namespace, same_library


@dataclass(frozen=True)
class AttentionWeights:
    """Projection matrices of one attention layer.

    ``w_q`` is ``(d_model, n_heads·head_dim)``, ``w_k`` and ``w_v`` are ``(d_model, n_kv_heads·head_dim)``,
    ``w_o`` is ``(n_heads·head_dim, d_out)`` or ``None`` (no output projection).
    """

    w_q: Array
    w_k: Array
    w_v: Array
    w_o: Array | None = None
    n_heads: int = 1
    n_kv_heads: int | None = None  # None: equal to n_heads (multi-head attention)

    def __post_init__(self) -> None:
        n_heads = check_int("n_heads", self.n_heads, minimum=1)
        n_kv = n_heads if self.n_kv_heads is None else check_int("n_kv_heads", self.n_kv_heads, minimum=1)
        if n_heads % n_kv:
            raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv}")
        for name in ("w_q", "w_k", "w_v", "w_o"):
            if name != "w_o" or self.w_o is not None:
                real_floating_namespace(name, getattr(self, name))  # a TypeError naming it: a list, None, ints
        for name in ("w_q", "w_k", "w_v"):
            if getattr(self, name).ndim != 2:
                raise ValueError(f"{name} must be a matrix (d_model, heads·head_dim)")
        d_model = self.w_q.shape[0]
        if self.w_k.shape[0] != d_model or self.w_v.shape[0] != d_model:
            raise ValueError("w_q, w_k and w_v must have the same number of rows (d_model)")
        if self.w_q.shape[1] % n_heads:
            raise ValueError(f"w_q has {self.w_q.shape[1]} columns, not a multiple of n_heads={n_heads}")
        head_dim = self.w_q.shape[1] // n_heads
        if self.w_k.shape[1] != n_kv * head_dim:
            raise ValueError(f"w_k must have n_kv_heads·head_dim = {n_kv * head_dim} columns, got {self.w_k.shape[1]}")
        if self.w_v.shape[1] % n_kv:
            raise ValueError(f"w_v has {self.w_v.shape[1]} columns, not a multiple of n_kv_heads={n_kv}")
        if self.w_o is not None and self.w_o.shape[0] != n_heads * (self.w_v.shape[1] // n_kv):
            raise ValueError("w_o must have n_heads·value_dim rows")

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @classmethod
    def identity(cls, d_model: int, *, xp: Any = None) -> AttentionWeights:
        """One head with ``W_Q = W_K = W_V = I`` and no output projection (the worked example)."""
        from refpos.backend import get_xp

        xp = get_xp(xp)
        eye = xp.eye(check_int("d_model", d_model, minimum=1), dtype=xp.float64)
        return cls(w_q=eye, w_k=eye, w_v=eye)


def self_attention(
    x: Array,
    weights: AttentionWeights,
    *,
    encoding: Encoding | None = None,
    positions: Array | None = None,
    cache_position: Array | None = None,
    attention_mask: Array | None = None,
    input_ids: Array | None = None,
    padding_idx: int | None = None,
    causal: bool = False,
    mask: Array | None = None,
    scale: float | None = None,
    softcap: float | None = None,
    fully_masked: str = "zeros",
) -> tuple[Array, dict[str, Array]]:
    """Run one self-attention layer and return ``(out, trace)``.

    Parameters
    ----------
    x : array ``(T, d_model)`` or ``(B, T, d_model)``
    weights : AttentionWeights
    encoding : Encoding, optional
        The positional encoding; ``None`` is NoPE.
    positions : int array ``(T,)`` or ``(B, T)``, optional
        The position ids. Per-row positions serve left-padded batches.
    cache_position, attention_mask, input_ids, padding_idx : optional
        The other inputs a layer's positions may come from (``refpos.models.sources``): the tokens' slots
        ``(T,)``, the 0/1 attention mask ``(T,)`` or ``(B, T)`` (here only a source of positions: pass ``mask``
        to mask keys), the input ids with their padding token. Each hook reads what the encoding's ``reads``
        names (a layer record's encoding: what the layer's code reads; a plain encoding: ``positions``); a call
        that gives none of what a hook reads is refused, except a call that gives no input at all, a fresh
        sequence whose ids and slots are ``0 … T-1``.
    causal, mask, scale, softcap, fully_masked
        As in :func:`refpos.attention`; ``scale=None`` asks the encoding (``d^-1/2`` unless it says
        otherwise, e.g. T5's 1).

    Returns
    -------
    out : array ``(T, d_out)`` or ``(B, T, d_out)``
    trace : dict
        Every intermediate by name, in pipeline order: ``X``, ``P``, ``X+P``, ``Q``, ``K``, ``V``,
        ``Q_rot``, ``K_rot`` (when the encoding rotates), ``S``, ``B``, ``S+B``, ``scaled``,
        ``scaled+B``, ``logits``, ``allowed``, ``A``, ``O`` and ``out``. Heads are ``(B, H, T, d)``;
        an unbatched input gives unbatched entries.
    """
    if not isinstance(weights, AttentionWeights):
        raise TypeError("weights must be a refpos.AttentionWeights (w_q, w_k, w_v, w_o, n_heads, n_kv_heads), got "
                        f"{type(weights).__name__}")
    xp = real_floating_namespace("x", x)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        if getattr(weights, name) is not None:
            same_library(f"weights.{name}", getattr(weights, name), xp)
    enc = NoPE() if encoding is None else encoding
    if not isinstance(enc, Encoding):
        raise TypeError(f"encoding must be a refpos.Encoding or None, got {type(enc).__name__}")
    if x.ndim not in (2, 3):
        raise ValueError(f"x must be (T, d_model) or (B, T, d_model), got shape {tuple(x.shape)}")
    unbatched = x.ndim == 2
    xb = x[None, ...] if unbatched else x  # (B, T, d_model)
    batch, t, d_model = xb.shape
    if weights.w_q.shape[0] != d_model:
        raise ValueError(f"x has d_model={d_model} but the weights expect {weights.w_q.shape[0]}")
    if positions is not None:
        positions = as_positions(positions, xp=xp)
        if positions.shape not in ((t,), (batch, t)):
            raise ValueError(f"positions must have shape ({t},) or ({batch}, {t}), got {tuple(positions.shape)}")
    given = Given.of(positions=positions, cache_position=cache_position, attention_mask=attention_mask,
                     input_ids=input_ids, length=t)
    if given.keys != t:
        raise ValueError(f"the inputs place {given.keys - t} cached tokens before the call's {t}: self_attention "
                         "runs a sequence without a cache (cache_position must start at 0, attention_mask cover "
                         "the call's tokens)")

    def read(use: str, side: str) -> Array:
        """The positions the encoding's ``use`` reads (module docstring of ``refpos.models.sources``); a use a
        record's encoding does not read gets the token indices, which its hook does not look at."""
        source = enc.reads.get(use, PLAIN if not enc.reads else ("key_index",))
        # ids counted from the padding token plus one (RoBERTa's): the record's offset is that count's start
        pad = padding_idx if padding_idx is not None or "row_ids" not in source else int(enc.offset) - 1
        found = given.read(source, side, who=f"{enc.name} ({use})", padding_idx=pad)
        if found is positions:
            return found
        return as_positions(xp.asarray(found), xp=xp, allow_negative=True)  # read in NumPy, used in x's library

    trace: dict[str, Array] = {"X": xb}
    p = enc.embed(read("rows", "query"), d_model, xp)
    h = xb if p is None else xb + p
    if p is not None:
        trace["P"] = p
        trace["X+P"] = h
    q_flat, k_flat = enc.project_qk(h @ weights.w_q, h @ weights.w_k)  # (B, T, H·d)
    q = split_heads(q_flat, weights.n_heads)  # (B, Hq, T, d)
    k = split_heads(k_flat, weights.kv_heads)  # (B, Hkv, T, d)
    v = split_heads(h @ weights.w_v, weights.kv_heads)  # (B, Hkv, T, dv)
    trace.update(Q=q, K=k, V=v)
    turned = read("rotation", "query")  # self-attention: the keys are the same tokens
    q_rot, k_rot = enc.rotate(q, k, turned, turned)
    if q_rot is not q or k_rot is not k:
        trace.update(Q_rot=q_rot, K_rot=k_rot)
    q_at, k_at = read("query", "query"), read("key", "key")
    bias = enc.bias(q_at, k_at, weights.n_heads)
    if bias is not None and bias.ndim == 3:
        bias = bias[None, ...]  # (1, H, T, T)
    head_dim = q.shape[-1]
    o = attention(
        q_rot,
        k_rot,
        v,
        bias=bias,
        mask=mask,
        causal=causal,
        scale=enc.softmax_scale(head_dim) if scale is None else scale,
        softcap=softcap,
        bias_scaled=enc.bias_scaled,
        qk_terms=enc.qk_terms(q_rot, k_rot, q_at, k_at),
        temperature=_per_query(enc.temperature(read("scale", "query"))),
        value_terms=enc.value_terms(q_at, k_at),
        fully_masked=fully_masked,
        trace=trace,
    )
    merged = merge_heads(o)  # (B, T, Hq·dv)
    out = merged if weights.w_o is None else merged @ weights.w_o
    trace["out"] = out
    if unbatched:
        trace = {name: (a[0, ...] if _has_batch_axis(name, a, batch) else a) for name, a in trace.items()}
        out = out[0, ...]
    return out, trace


def _per_query(temperature: Array | None) -> Array | None:
    """A temperature of positions ``(T,)`` or ``(B, T)`` broadcast over the heads: ``(..., 1, T)``."""
    return None if temperature is None else temperature[..., None, :]


_BATCHED = ("X", "P", "X+P", "Q", "K", "V", "Q_rot", "K_rot", "S", "B", "S+B", "scaled", "scaled+B",
            "logits", "A", "O", "out")


def _has_batch_axis(name: str, a: Array, batch: int) -> bool:
    """True for trace entries that carry the batch axis (dropped again for an unbatched input)."""
    if name not in _BATCHED or a.ndim < 3:
        return False
    return name != "P" or a.ndim == 3
