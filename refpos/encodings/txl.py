r"""Transformer-XL relative attention (Dai et al. 2019, §3.3; kimiyoung/transformer-xl).

See docs/relative.md#transformer-xl. With ``mlen`` cached tokens, query ``i`` (absolute ``mlen + i``) and key
``j``, the score before the ``1/√d`` scale is

.. math::
    A_{ij} = \underbrace{q_i\cdot k_j}_{(a)} + \underbrace{u\cdot k_j}_{(c)}
           + \underbrace{(q_i + v)\cdot W_R R_{mlen+i-j}}_{(b)+(d)}

``R`` is the paper-frequency sinusoid in the concatenated ``[sin | cos]`` layout, at the descending
positions ``klen-1, …, 0`` (optionally clamped to ``clamp_len``); ``W_R`` is ``r_net``; ``u`` is
``r_w_bias`` and ``v`` is ``r_r_bias``, shape ``(H, d)``. Future keys (``j > mlen + i``) have no valid
distance: **use Transformer-XL with a causal mask** (``self_attention(..., causal=True)``); the
``rel_shift`` form leaves leftovers there, the direct form zeros.
"""

from __future__ import annotations

import math
from typing import Any

from refpos.backend import Array, array_namespace, get_xp
from refpos.core.heads import repeat_kv
from refpos.encoding import Encoding
from refpos.encodings.sinusoidal import sinusoidal
from refpos.validation import (
    MAX_WIDTH,
    as_positions,
    check_choice,
    check_int,
    check_length,
    check_memory,
    check_size,
    floating_array,
    same_libraries,
)

TXL_FORMS = ("rel_shift", "direct")


def txl_rel_shift(x: Array) -> Array:
    r"""Transformer-XL's ``_rel_shift``: ``(..., qlen, klen) -> (..., qlen, klen)``.

    Left-pad one zero column, view as ``(klen + 1, qlen)``, drop the first row, view back. On the valid
    entries ``j <= i + klen - qlen`` the result is ``x[i, j + qlen - 1 - i]``; the others hold leftovers
    and must be masked.

    Notes
    -----
    .. math:: \operatorname{shift}(x)_{ij} = x_{i,\; j + q_{len} - 1 - i}, \qquad j \le i + k_{len} - q_{len}
    """
    xp = array_namespace(x)
    *lead, qlen, klen = x.shape
    x = xp.concat([xp.zeros((*lead, qlen, 1), dtype=x.dtype), x], axis=-1)  # (..., qlen, klen+1)
    x = xp.reshape(x, (*lead, klen + 1, qlen))[..., 1:, :]  # (..., klen, qlen)
    return xp.reshape(x, (*lead, qlen, klen))  # (..., qlen, klen)


def txl_position_table(klen: int, dim: int, *, clamp_len: int | None = None, xp: Any = None) -> Array:
    r"""``R``: the concatenated paper sinusoid at positions ``klen-1, …, 0``, shape ``(klen, dim)``.

    Row ``t`` encodes the distance ``klen - 1 - t``; ``clamp_len`` caps the distances (TXL ``clamp_len``).
    """
    xp = get_xp(xp)
    klen = check_length("klen", klen)
    check_size("dim", dim, maximum=MAX_WIDTH, bytes_each=8 * klen, what="the (klen, dim) float64 table")
    check_memory("the (klen, dim) float64 table", 8 * klen * (dim + 2), f"klen={klen}, dim={dim}")
    distances = xp.arange(klen - 1, -1, -1, dtype=xp.int64)  # (klen,) descending
    if clamp_len is not None:
        clamp_len = check_length("clamp_len", clamp_len)
        distances = xp.minimum(distances, xp.full_like(distances, clamp_len))
    return sinusoidal(distances, dim, layout="concat", spacing="paper")


def txl_position_scores(q: Array, k: Array, r_head_k: Array, u: Array, v: Array) -> Array:
    r"""Terms (b)+(c)+(d) of the TXL score (unscaled), by ``rel_shift``: ``(..., H, qlen, klen)``.

    ``q`` ``(..., H, qlen, d)``, ``k`` ``(..., H, klen, d)``, ``r_head_k = W_R R`` ``(H, klen, d)`` with rows
    at distances ``klen-1 … 0``, ``u`` and ``v`` ``(H, d)``. Valid on ``j <= mlen + i`` only.

    Notes
    -----
    .. math:: P_{ij} = u\cdot k_j + \operatorname{shift}\big((q + v)\, (W_R R)^\top\big)_{ij}
    """
    same_libraries(q=q, k=k, r_head_k=r_head_k, u=u, v=v)
    xp = array_namespace(q, k, r_head_k)
    content_bias = xp.matmul(u[:, None, :], xp.matrix_transpose(k))  # (..., H, 1, klen)
    bd = xp.matmul(q + v[:, None, :], xp.matrix_transpose(r_head_k))  # (..., H, qlen, klen)
    return content_bias + txl_rel_shift(bd)


def txl_scores(q: Array, k: Array, r_head_k: Array, u: Array, v: Array) -> Array:
    r"""The full Transformer-XL logits ``(..., H, qlen, klen)``: ``((q+u)·k + shift((q+v)·Rᵀ))/√d``.

    Future keys (``j > klen - qlen + i``) are set to ``-inf`` (the TXL attention mask). Shapes as in
    :func:`txl_position_scores`.
    """
    same_libraries(q=q, k=k, r_head_k=r_head_k, u=u, v=v)
    q, k, r_head_k = (floating_array(a, name=n) for a, n in ((q, "q"), (k, "k"), (r_head_k, "r_head_k")))
    u, v = floating_array(u, name="u"), floating_array(v, name="v")
    xp = array_namespace(q)
    qlen, klen, d = q.shape[-2], k.shape[-2], q.shape[-1]
    if qlen > klen:
        raise ValueError(f"q must not have more positions than k (qlen={qlen}, klen={klen})")
    if r_head_k.shape[-2] != klen:
        raise ValueError(f"r_head_k must have klen={klen} rows, got shape {tuple(r_head_k.shape)}")
    ac = xp.matmul(q + u[:, None, :], xp.matrix_transpose(k))  # (..., H, qlen, klen)
    bd = txl_rel_shift(xp.matmul(q + v[:, None, :], xp.matrix_transpose(r_head_k)))  # (..., H, qlen, klen)
    scores = (ac + bd) / math.sqrt(d)
    i = xp.arange(klen - qlen, klen, dtype=xp.int64)[:, None]
    j = xp.arange(klen, dtype=xp.int64)[None, :]
    return xp.where(j <= i, scores, -math.inf)


class TransformerXL(Encoding):
    """Transformer-XL relative attention as a pipeline encoding (``qk_terms``); needs ``causal=True``.

    Parameters
    ----------
    w_r : array ``(d_r, H·d)``
        ``r_net``: maps the sinusoid ``R`` (width ``d_r``, even) to per-head keys.
    u, v : arrays ``(H, d)``
        ``r_w_bias`` and ``r_r_bias``.
    clamp_len : int, optional
        Distances above it read ``R[clamp_len]``.
    form : {"rel_shift", "direct"}
        ``rel_shift`` (the anchor; consecutive positions, queries at the end of the keys) or the
        direct per-pair computation (any positions; future entries 0).
    """

    name = "transformer_xl"

    def __init__(self, w_r: Array, u: Array, v: Array, *, clamp_len: int | None = None,
                 form: str = "rel_shift") -> None:
        self.w_r = floating_array(w_r, name="w_r")
        self.u = floating_array(u, name="u")
        self.v = floating_array(v, name="v")
        if self.u.ndim != 2 or tuple(self.v.shape) != tuple(self.u.shape):
            raise ValueError(f"u and v must both have shape (H, d), got {tuple(self.u.shape)}, {tuple(self.v.shape)}")
        n_heads, d = self.u.shape
        if self.w_r.ndim != 2 or self.w_r.shape[1] != n_heads * d:
            raise ValueError(f"w_r must have shape (d_r, H·d) = (d_r, {n_heads * d}), got {tuple(self.w_r.shape)}")
        self.clamp_len = None if clamp_len is None else check_int("clamp_len", clamp_len, minimum=0)
        self.form = check_choice("form", form, TXL_FORMS)

    def _project(self, r: Array) -> Array:
        """``W_R R`` split into heads: ``(..., N, d_r) -> (..., H, N, d)``."""
        xp = array_namespace(r)
        n_heads, d = self.u.shape
        rk = xp.reshape(r @ self.w_r, (*r.shape[:-1], n_heads, d))  # (..., N, H, d)
        return xp.moveaxis(rk, -2, -3)  # (..., H, N, d)

    def qk_terms(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> Array:
        xp = array_namespace(q)
        if q.shape[-3] != self.u.shape[0] or q.shape[-1] != self.u.shape[1]:
            raise ValueError(f"u has shape {tuple(self.u.shape)} but q has {q.shape[-3]} heads of dim {q.shape[-1]}")
        k = repeat_kv(k, q.shape[-3])  # (..., H, Tk, d)
        q_positions = as_positions(q_positions, name="q_positions", xp=xp)
        k_positions = as_positions(k_positions, name="k_positions", xp=xp)
        if self.form == "rel_shift":
            klen, qlen = k_positions.shape[-1], q_positions.shape[-1]
            expected = k_positions[..., :1] + xp.arange(klen, dtype=xp.int64)
            if bool(xp.any(k_positions != expected)) or bool(xp.any(q_positions != k_positions[..., klen - qlen:])):
                raise ValueError("the rel_shift form needs consecutive key positions and queries at the end "
                                 "of the keys; use form='direct'")
            r = txl_position_table(klen, self.w_r.shape[0], clamp_len=self.clamp_len, xp=xp)  # (klen, d_r)
            return txl_position_scores(q, k, self._project(r), self.u, self.v)
        return self._direct(q, k, q_positions, k_positions)

    def _direct(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> Array:
        r"""Per pair: :math:`u\cdot k_j + (q_i + v)\cdot W_R R_{p_i - p_j}` where ``p_j <= p_i``, else 0."""
        xp = array_namespace(q)
        dist = q_positions[..., :, None] - k_positions[..., None, :]  # (..., Tq, Tk)
        valid = dist >= 0
        dist = xp.where(valid, dist, xp.zeros_like(dist))
        if self.clamp_len is not None:
            dist = xp.minimum(dist, xp.full_like(dist, self.clamp_len))
        r = sinusoidal(dist, self.w_r.shape[0], layout="concat", spacing="paper")  # (..., Tq, Tk, d_r)
        rk = self._project(r)  # (..., Tq, H, Tk, d)
        rk = xp.moveaxis(rk, -3, -4)  # (..., H, Tq, Tk, d)
        qv = (q + self.v[:, None, :])[..., :, None, :]  # (..., H, Tq, 1, d)
        bd = xp.matmul(qv, xp.matrix_transpose(rk))[..., 0, :]  # (..., H, Tq, Tk)
        content_bias = xp.matmul(self.u[:, None, :], xp.matrix_transpose(k))  # (..., H, 1, Tk)
        return xp.where(valid[..., None, :, :], content_bias + bd, xp.zeros_like(bd))

    def __repr__(self) -> str:
        return (f"TransformerXL(heads={self.u.shape[0]}, d={self.u.shape[1]}, d_r={self.w_r.shape[0]}, "
                f"clamp_len={self.clamp_len}, form={self.form!r})")
