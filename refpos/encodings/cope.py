r"""CoPE: contextual position encoding (Golovneva et al. 2024; facebookresearch/RAM ``projects/cope``).

See docs/other-encodings.md#cope. Positions are counted by gates instead of tokens:

.. math::
    g_{ij} = \sigma\!\left(\frac{q_i\cdot k_j}{\sqrt d}\right)\ (j \le i), \qquad
    p_{ij} = \min\!\Big(\sum_{t=j}^{i} g_{it},\ n_{pos} - 1\Big)

and the position logit interpolates the learned table ``e`` ``(d, npos)`` between its integer
columns: ``z_i = q_i e``, ``pos_ij = z_i[⌈p⌉]·(p - ⌊p⌋) + z_i[⌊p⌋]·(1 - (p - ⌊p⌋))``. The logits are
``(q·k + pos)/√d`` (the default; the pipeline's ``qk_terms`` hook adds ``pos`` before the scale).
CoPE is causal: use it with ``self_attention(..., causal=True)``.
"""

from __future__ import annotations

import math

from refpos.backend import Array, array_namespace
from refpos.core.heads import repeat_kv
from refpos.encoding import Encoding
from refpos.validation import as_positions, check_float, check_length, floating_array, same_libraries


def cope_gates(q: Array, k: Array, q_positions: Array, k_positions: Array, *, scale: float | None = None) -> Array:
    r"""The gates ``σ(q_i·k_j·scale)`` on the causal triangle ``p_j <= p_i``, 0 elsewhere: ``(..., H, Tq, Tk)``.

    ``scale`` defaults to ``d^-1/2``; ``k`` may have fewer (grouped) heads than ``q``.
    """
    same_libraries(q=q, k=k, q_positions=q_positions, k_positions=k_positions)
    xp = array_namespace(q, k)
    d = q.shape[-1]
    scale = d**-0.5 if scale is None else check_float("scale", scale)
    k = repeat_kv(k, q.shape[-3])  # (..., H, Tk, d)
    s = xp.matmul(q, xp.matrix_transpose(k)) * scale  # (..., H, Tq, Tk)
    q_positions = as_positions(q_positions, name="q_positions", xp=xp)
    k_positions = as_positions(k_positions, name="k_positions", xp=xp)
    past = k_positions[..., None, :] <= q_positions[..., :, None]  # (..., Tq, Tk)
    if past.ndim == 3:
        past = past[:, None, ...]  # (B, 1, Tq, Tk)
    gates = 1.0 / (1.0 + xp.exp(-s))
    return xp.where(past, gates, xp.zeros_like(gates))


def cope_positions(gates: Array, npos: int) -> Array:
    r"""Contextual positions from gates ``(..., Tq, Tk)``: reverse cumulative sum over keys, clamped.

    Notes
    -----
    .. math:: p_{ij} = \min\!\Big(\sum_{t \ge j} g_{it},\ n_{pos} - 1\Big)

    With gates 0 on future keys the sum runs over ``t = j … i``. Gates ≡ 1 give ``p_ij = i - j + 1``.
    """
    gates = floating_array(gates, name="gates")
    npos = check_length("npos", npos, minimum=1)
    xp = array_namespace(gates)
    suffix = xp.flip(xp.cumulative_sum(xp.flip(gates, axis=-1), axis=-1), axis=-1)  # (..., Tq, Tk)
    return xp.minimum(suffix, xp.full_like(suffix, float(npos - 1)))


def cope_position_logits(q: Array, e: Array, positions: Array) -> Array:
    r"""The interpolated position logits ``(..., H, Tq, Tk)`` for q ``(..., H, Tq, d)``, e ``(d, npos)``.

    Notes
    -----
    .. math::
        z_i = q_i\, e, \qquad
        \text{pos}_{ij} = z_{i,\lceil p_{ij}\rceil}\,(p_{ij} - \lfloor p_{ij}\rfloor)
                        + z_{i,\lfloor p_{ij}\rfloor}\,\big(1 - (p_{ij} - \lfloor p_{ij}\rfloor)\big)
    """
    same_libraries(q=q, e=e, positions=positions)
    xp = array_namespace(q, e, positions)
    z = xp.matmul(q, e)  # (..., H, Tq, npos)
    lo, hi = xp.floor(positions), xp.ceil(positions)  # (..., H, Tq, Tk)
    frac = positions - lo
    z = xp.broadcast_to(z, (*positions.shape[:-1], z.shape[-1]))  # (..., H, Tq, npos)
    z_hi = xp.take_along_axis(z, xp.astype(hi, xp.int64), axis=-1)  # (..., H, Tq, Tk)
    z_lo = xp.take_along_axis(z, xp.astype(lo, xp.int64), axis=-1)
    return z_hi * frac + z_lo * (1.0 - frac)


def cope_logits(
    q: Array, k: Array, e: Array, q_positions: Array, k_positions: Array, *, gates: Array | None = None
) -> Array:
    r"""CoPE logits ``(q·kᵀ + pos)/√d`` ``(..., H, Tq, Tk)``, future keys set to ``-inf``.

    ``gates`` overrides the computed gates (for the equivalences: ≡ 1 is a relative encoding at
    ``i - j + 1``, ≡ 0 is NoPE); entries on future keys are ignored.
    """
    same_libraries(q=q, k=k, e=e, q_positions=q_positions, k_positions=k_positions, gates=gates)
    q, k = floating_array(q, name="q"), floating_array(k, name="k")
    e = floating_array(e, name="e")
    xp = array_namespace(q)
    if e.ndim != 2 or e.shape[0] != q.shape[-1]:
        raise ValueError(f"e must have shape (d, npos) with d={q.shape[-1]}, got {tuple(e.shape)}")
    q_positions = as_positions(q_positions, name="q_positions", xp=xp)
    k_positions = as_positions(k_positions, name="k_positions", xp=xp)
    past = k_positions[..., None, :] <= q_positions[..., :, None]  # (..., Tq, Tk)
    if past.ndim == 3:
        past = past[:, None, ...]  # (B, 1, Tq, Tk)
    if gates is None:
        gates = cope_gates(q, k, q_positions, k_positions)  # (..., H, Tq, Tk)
    else:
        gates = floating_array(gates, name="gates", xp=xp)
        logits_shape = (*q.shape[:-1], k.shape[-2])  # (..., H, Tq, Tk)
        gates = xp.broadcast_to(xp.where(past, gates, xp.zeros_like(gates)), logits_shape)
    pos = cope_position_logits(q, e, cope_positions(gates, e.shape[1]))  # (..., H, Tq, Tk)
    scores = (xp.matmul(q, xp.matrix_transpose(repeat_kv(k, q.shape[-3]))) + pos) / math.sqrt(q.shape[-1])
    return xp.where(past, scores, -math.inf)


class CoPE(Encoding):
    """CoPE as a pipeline encoding (``qk_terms``), default ``(q·k + pos)/√d``; use with ``causal=True``.

    ``e`` ``(d, npos)`` is the learned position table shared by the heads (zero-initialised in the
    anchor). The gates use ``d^-1/2``: a ``scale=`` passed to the pipeline does not reach them.
    """

    name = "cope"

    def __init__(self, e: Array) -> None:
        self.e = floating_array(e, name="e")
        if self.e.ndim != 2:
            raise ValueError(f"e must be a matrix (head_dim, npos), got shape {tuple(self.e.shape)}")

    def qk_terms(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> Array:
        if q.shape[-1] != self.e.shape[0]:
            raise ValueError(f"e has {self.e.shape[0]} rows but the head dim is {q.shape[-1]}")
        gates = cope_gates(q, k, q_positions, k_positions)  # (..., H, Tq, Tk)
        return cope_position_logits(q, self.e, cope_positions(gates, self.e.shape[1]))

    def __repr__(self) -> str:
        return f"CoPE(head_dim={self.e.shape[0]}, npos={self.e.shape[1]})"
