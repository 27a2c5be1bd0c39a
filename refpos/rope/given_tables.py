r"""RoPE with the tables given: the rotation a kernel applies to cos/sin tables it is handed.

Many rotation kernels compute no angle: they take the tables as inputs and only rotate. ONNX's
``RotaryEmbedding`` and onnxruntime's contrib op read rows of a ``cos_cache``/``sin_cache`` by
``position_ids``; vLLM's and FlashInfer's ``cos_sin_cache`` kernels do the same; transformers'
``apply_rotary_pos_emb(q, k, cos, sin)`` takes rows already gathered. What such a kernel implements is
the rotation alone, and this is it: with per-pair tables ``C`` and ``S`` of ``N`` rows (row ``p`` holds
``A·cos(p·ω_j)`` and ``A·sin(p·ω_j)`` for whatever rule built them), a token at position ``p`` has pair
``j`` turned by

.. math:: u'_j = u_j\,C_{p,j} - v_j\,S_{p,j}, \qquad v'_j = v_j\,C_{p,j} + u_j\,S_{p,j}

in the layout's channels (docs/conventions.md#pair-layouts), pass-through channels unchanged. With
M-RoPE sections pair ``j`` reads row :math:`p_{a(j)}` of its axis (docs/mrope.md#the-math). A position
is a row index: it must lie in ``0 … N − 1`` (a negative one does not count from the end, one past the
last row does not repeat it).

Examples
--------
>>> import numpy as np
>>> from refpos.rope.config import RopeConfig
>>> from refpos.rope.core import apply_rope, rope_cos_sin
>>> rope = RopeConfig(head_dim=8)
>>> rows = np.arange(6)
>>> cos, sin = (t[:, :4] for t in rope_cos_sin(rows, rope))   # per-pair tables of rows 0 … 5
>>> x = np.arange(1.0, 9.0) / 8
>>> bool(np.array_equal(apply_rope_tables(x[None], [3], cos, sin, rope), apply_rope(x[None], [3], rope)))
True
"""

from __future__ import annotations

from typing import Any

from refpos.backend import array_namespace
from refpos.rope.config import RopeConfig
from refpos.rope.core import align_positions, prepare_inputs, rope_pair_slices, rope_span
from refpos.rope.mrope import pair_axes, token_positions
from refpos.validation import floating_array

Array = Any


def _check_tables(cos: Any, sin: Any, n_pairs: int, xp: Any) -> tuple[Array, Array]:
    """``cos`` and ``sin`` as float arrays ``(N, n_pairs)`` of the same shape."""
    cos, sin = floating_array(cos, name="cos", xp=xp), floating_array(sin, name="sin", xp=xp)
    for name, table in (("cos", cos), ("sin", sin)):
        if table.ndim != 2 or table.shape[-1] != n_pairs:
            raise ValueError(f"{name} must have shape (N, {n_pairs}): one row per position, one column per "
                             f"rotated pair; got {tuple(table.shape)}")
    if cos.shape != sin.shape:
        raise ValueError(f"cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must have the same shape")
    return cos, sin


def gathered_tables(positions: Array, cos: Array, sin: Array, rope: RopeConfig) -> tuple[Array, Array]:
    """The rows the tokens read, ``(..., T, m)`` each: row ``p`` for 1-D positions ``(..., T)``, row
    :math:`p_{a(j)}` for pair ``j`` with M-RoPE positions ``(3, ..., T)``."""
    xp = array_namespace(cos)
    n_rows, n_pairs = cos.shape
    low, high = int(xp.min(positions)), int(xp.max(positions))
    if low < 0 or high >= n_rows:
        raise ValueError(f"positions must index the table rows 0 … {n_rows - 1} (a position is a row, never "
                         f"counted from the end nor clipped to the last row); got {low if low < 0 else high}")
    if rope.mrope_section is None:
        flat = xp.reshape(positions, (-1,))  # the array API's take wants 1-D indices
        c, s = (xp.reshape(xp.take(t, flat, axis=0), (*positions.shape, n_pairs)) for t in (cos, sin))
        return c, s  # (..., T, m)
    axes = xp.asarray(pair_axes(rope.mrope_section, rope.mrope_scheme), dtype=xp.int64)  # (m,)
    rows = xp.moveaxis(xp.take(positions, axes, axis=0), 0, -1)  # (..., T, m): pair j's row p_{a(j)}
    flat = xp.reshape(rows * cos.shape[1] + xp.arange(cos.shape[1], dtype=xp.int64), (-1,))  # row·m + j
    c, s = (xp.reshape(xp.take(xp.reshape(t, (-1,)), flat, axis=0), rows.shape) for t in (cos, sin))
    return c, s


def apply_rope_tables(x: Any, positions: Any, cos: Any, sin: Any, rope: RopeConfig) -> Array:
    r"""Rotate ``x`` ``(..., T, head_dim)`` with the given per-pair tables ``cos``, ``sin`` ``(N, m)``.

    Parameters
    ----------
    x : float array ``(..., T, head_dim)``
    positions : int array ``(T,)`` or ``(..., T)``
        Row indices into the tables, ``0 ≤ p < N`` (``ValueError`` otherwise); ``(B, T)`` with ``x``
        ``(B, H, T, D)`` apply to every head; ``(3, ..., T)`` with M-RoPE sections.
    cos, sin : float arrays ``(N, m)``
        ``m = rope.n_pairs``: one column per rotated pair (``head_dim/2`` for ``proportional``).
    rope : RopeConfig
        Only the geometry is read: ``head_dim``, the rotated width, placement, layout and M-RoPE
        sections; the frequencies are the tables'.

    Notes
    -----
    .. math:: u'_j = u_j C_{p,j} - v_j S_{p,j}, \qquad v'_j = v_j C_{p,j} + u_j S_{p,j}
    """
    if not isinstance(rope, RopeConfig):
        raise TypeError(f"rope must be a RopeConfig, got {type(rope).__name__}")
    x = floating_array(x, name="x")
    x, positions, single = prepare_inputs(x, positions, rope)
    xp = array_namespace(x)
    cos, sin = _check_tables(cos, sin, rope.n_pairs, xp)
    c, s = gathered_tables(align_positions(positions, x, rope), cos, sin, rope)  # (..., T, m)
    tokens = token_positions(align_positions(positions, x, rope), rope.mrope_section).shape
    out = xp.empty((*xp.broadcast_shapes(x.shape[:-1], tokens), x.shape[-1]), dtype=x.dtype)
    start, stop = rope_span(rope)
    out[..., :start] = x[..., :start]  # pass-through channels before the rotated span
    out[..., stop:] = x[..., stop:]  # and after it
    u_in, v_in, u_out, v_out = rope_pair_slices(rope, start, stop)
    u, v = x[..., u_in], x[..., v_in]  # (..., T, m)
    c, s = xp.astype(c, x.dtype), xp.astype(s, x.dtype)
    out[..., u_out] = u * c - v * s  # u' = u C − v S
    out[..., v_out] = v * c + u * s  # v' = v C + u S
    return out[0, :] if single else out
