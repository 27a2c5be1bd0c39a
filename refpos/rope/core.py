r"""Applying RoPE: cos/sin tables, rotation of q/k in every layout and placement, matrix and complex forms.

Pair ``j`` of a query or key at position ``p`` is rotated by the angle :math:`\varphi_{p,j} = p\,\omega_j`
and scaled by the attention factor ``A`` (docs/rope.md#the-math):

.. math::
    u'_j = A\,(u_j \cos\varphi - v_j \sin\varphi), \qquad v'_j = A\,(v_j \cos\varphi + u_j \sin\varphi)

Which channels form the pair ``(u_j, v_j)`` is the **layout** (docs/conventions.md#pair-layouts), where the
rotated channels sit in the head is the **placement** (docs/rope.md#partial-rotary); both are stated once, in
:mod:`refpos.pairs`:

=================  ====================================================================================
layout             pairs inside the rotated span of width ``w`` (``m = w/2``)
=================  ====================================================================================
``half``           ``(j, j + m)``; output in the same order (NeoX, HF Llama, vLLM neox style)
``interleaved``    ``(2j, 2j + 1)``; output in the same order (GPT-J, Meta, ggml NORM)
``deinterleaved``  input ``(2j, 2j + 1)``, output written half-split ``[u'…, v'…]`` (HF DeepSeek-V3)
=================  ====================================================================================

Placement ``first`` rotates ``x[..., :d]``, ``last`` rotates ``x[..., D-d:]`` (DeepSeek MLA) and
``proportional`` spans all ``D`` channels with zero frequencies past ``n_rot`` (Gemma 4).

Angles are ``positions * ω`` elementwise in float64 (never a matmul, never a lower precision).

The steps of :func:`apply_rope` are functions of their own, so that every other form of RoPE takes the
same ones instead of restating them: :func:`prepare_inputs`, :func:`resolve_frequencies`,
:func:`align_positions`, :func:`rope_pair_tables` (:func:`pair_cos_sin` in 1-D), :func:`rope_span`,
:func:`rope_pair_slices`, :func:`split_span`, :func:`assemble_span` and :func:`seq_len_of` are used by
:mod:`refpos.rope.forms`, :mod:`~refpos.rope.dynamic`, :mod:`~refpos.rope.encoding`, the fast forms and
``refpos check``; ``refpos.rope`` exports only the two public entry points.

Examples
--------
>>> import numpy as np
>>> from refpos.rope.config import RopeConfig
>>> y = apply_rope(np.arange(1.0, 9.0) / 8, 3, RopeConfig(head_dim=8))
>>> round(float(y[0]), 12), round(float(np.linalg.norm(y)), 12)
(-0.211949067112, 1.785357107136)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

from refpos.backend import array_namespace
from refpos.pairs import pair_slices, place_pairs, span_bounds
from refpos.parallel import block_elements
from refpos.rope.config import RopeConfig
from refpos.rope.fast import is_fast_input, rotate_span
from refpos.rope.fast_gpu import is_fast_gpu_input
from refpos.rope.fast_gpu import rotate_span as rotate_span_gpu
from refpos.rope.mrope import mrope_cos_sin, rope_positions, token_positions
from refpos.rope.scaling import check_rope_config, check_seq_len, rope_frequencies
from refpos.validation import (
    check_broadcasts_to,
    check_frequencies,
    floating_array,
)

Array = Any


def seq_len_of(positions: Array) -> int | None:
    """HF's ``max(position_ids) + 1`` (``None`` for no positions)."""
    if math.prod(positions.shape) == 0:
        return None
    return int(array_namespace(positions).max(positions)) + 1


def resolve_frequencies(rope: RopeConfig, positions: Array, seq_len: int | None,
                 frequencies: tuple[Array, float] | None, xp: ModuleType) -> tuple[Array, float]:
    if frequencies is not None:
        return check_frequencies(frequencies, rope.n_pairs, xp)
    seq_len = check_seq_len(seq_len)
    return rope_frequencies(rope, seq_len=seq_len_of(positions) if seq_len is None else seq_len, xp=xp)


def pair_cos_sin(positions: Array, inv_freq: Array, attention_factor: float) -> tuple[Array, Array]:
    r"""``A·cos φ`` and ``A·sin φ`` per pair, ``(..., T, n_pairs)``, :math:`\varphi = p\,\omega_j`."""
    xp = array_namespace(inv_freq)
    angles = xp.astype(positions, xp.float64)[..., None] * inv_freq  # (..., T, n_pairs)
    return attention_factor * xp.cos(angles), attention_factor * xp.sin(angles)


def rope_pair_tables(positions: Array, inv_freq: Array, attention_factor: float,
                     rope: RopeConfig) -> tuple[Array, Array]:
    """The per-pair tables of 1-D RoPE or, with sections, of M-RoPE (:func:`refpos.rope.mrope.mrope_cos_sin`)."""
    if rope.mrope_section is not None:
        return mrope_cos_sin(positions, inv_freq, attention_factor, rope.mrope_section,
                             interleaved=rope.mrope_interleaved)
    return pair_cos_sin(positions, inv_freq, attention_factor)


def rope_cos_sin(
    positions: Any,
    rope: RopeConfig,
    *,
    seq_len: int | None = None,
    frequencies: tuple[Array, float] | None = None,
    xp: ModuleType | None = None,
) -> tuple[Array, Array]:
    r"""The cos and sin tables an implementation multiplies with, attention factor included (as HF).

    Parameters
    ----------
    positions : int or int array ``(..., T)``
        Non-negative integer positions. With M-RoPE (``rope.mrope_section`` set): ``(3, ..., T)``, rows
        t, h, w (transformers' ``position_ids``), or ``(T,)`` meaning t = h = w.
    rope : RopeConfig
    seq_len : int, optional
        ``L`` for ``dynamic`` / ``longrope``; ``None``: ``max(positions) + 1`` over every axis (HF).
    frequencies : (inv_freq, attention_factor), optional
        Use these instead of computing them from ``rope`` (e.g. from :class:`DynamicNTKState`).
    xp : namespace, optional
        Namespace for list/int positions (default: the current backend).

    Returns
    -------
    cos, sin : arrays ``(..., T, w)``, ``w = rope.rotary_width``
        ``A·cos φ`` and ``A·sin φ`` in the order the layout multiplies them: ``half`` and
        ``deinterleaved`` ``[c_0 … c_{m-1}, c_0 … c_{m-1}]`` (HF DeepSeek-V3 rotates the
        de-interleaved vector half-style), ``interleaved`` ``[c_0, c_0, c_1, c_1, …]``. With
        ``rh(x) = [-x_{m:}, x_{:m}]`` (half) or ``(-x_1, x_0, -x_3, x_2, …)`` (interleaved):
        ``y_rot = x ⊙ cos + rh(x) ⊙ sin``.
    """
    rope = check_rope_config(rope)
    positions = rope_positions(positions, rope.mrope_section, xp=xp)
    xp = array_namespace(positions)
    inv_freq, attention_factor = resolve_frequencies(rope, positions, seq_len, frequencies, xp)
    cos, sin = rope_pair_tables(positions, inv_freq, attention_factor, rope)  # (..., T, m)
    return place_pairs(cos, cos, rope.layout), place_pairs(sin, sin, rope.layout)  # (..., T, 2m)


def split_span(x: Array, rope: RopeConfig) -> tuple[Array, Array, Array]:
    """``(before, span, after)`` of the head axis: the rotated span and the pass-through channels."""
    start, stop = rope_span(rope)
    return x[..., :start], x[..., start:stop], x[..., stop:]


def prepare_inputs(x: Array, positions: Any, rope: RopeConfig) -> tuple[Array, Array, bool]:
    """Validate ``x (..., T, D)`` and its positions; one vector ``(D,)`` with one position is ``T = 1``."""
    x = floating_array(x, name="x")
    xp = array_namespace(x)
    if x.ndim < 1 or x.shape[-1] != rope.head_dim:
        raise ValueError(f"x must have head_dim={rope.head_dim} channels on its last axis, got shape "
                         f"{tuple(x.shape)}")
    positions = rope_positions(positions, rope.mrope_section, xp=xp)
    single = x.ndim == 1
    if single:
        if math.prod(token_positions(positions, rope.mrope_section).shape) != 1:
            raise ValueError(f"x of shape {tuple(x.shape)} is one vector: give one position, got shape "
                             f"{tuple(positions.shape)}")
        x = x[None, :]  # (T=1, D)
        per_token = (3, 1) if rope.mrope_section is not None else (1,)
        positions = xp.reshape(positions, per_token)  # (T=1,), or (3, T=1) for M-RoPE
    if positions.ndim == 0 or positions.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions {tuple(positions.shape)} must end in x's T axis, x has shape "
                         f"{tuple(x.shape)} (..., T, head_dim)")
    check_broadcasts_to("positions", token_positions(align_positions(positions, x, rope), rope.mrope_section),
                        x.shape[:-1], what=f"x's {tuple(x.shape[:-1])} (x: {tuple(x.shape)}, (..., T, head_dim))")
    return x, positions, single


def assemble_span(before: Array, rotated: Array, after: Array, single: bool) -> Array:
    """Concatenate pass-through and rotated channels (broadcast to the rotated shape)."""
    xp = array_namespace(rotated)
    out = xp.concat([xp.broadcast_to(part, (*rotated.shape[:-1], part.shape[-1]))
                     for part in (before, rotated, after)], axis=-1)
    return out[0, :] if single else out


def align_positions(positions: Array, x: Array, rope: RopeConfig) -> Array:
    """HF convention: positions ``(B, T)`` with x ``(B, H, T, D)`` get a head axis, ``(B, 1, T)``.

    M-RoPE positions ``(3, B, T)`` become ``(3, B, 1, T)`` likewise (the axis row stays in front).
    """
    token_ndim = token_positions(positions, rope.mrope_section).ndim
    if token_ndim >= 2 and x.ndim == token_ndim + 2:
        return array_namespace(positions).expand_dims(positions, axis=-2)
    return positions


def apply_rope(
    x: Array,
    positions: Any,
    rope: RopeConfig,
    *,
    seq_len: int | None = None,
    frequencies: tuple[Array, float] | None = None,
) -> Array:
    r"""Rotate ``x`` ``(..., T, head_dim)`` by its positions: the RoPE of queries or keys.

    Parameters
    ----------
    x : float array ``(..., T, head_dim)``, or one vector ``(head_dim,)`` with one position
    positions : int or int array ``(T,)`` or ``(..., T)``
        Broadcast against ``x.shape[:-1]``; positions ``(B, T)`` with ``x`` ``(B, H, T, D)`` apply to
        every head (HF's ``unsqueeze_dim=1``). With M-RoPE (``rope.mrope_section`` set): ``(3, ..., T)``,
        rows t, h, w, the rest as above (``(3, B, T)`` with ``(B, H, T, D)``), or ``(T,)`` for t = h = w.
    rope : RopeConfig
    seq_len : int, optional
        ``L`` for ``dynamic`` / ``longrope``; ``None``: ``max(positions) + 1`` over all positions (HF).
    frequencies : (inv_freq, attention_factor), optional
        Use these instead of computing them from ``rope``.

    Returns
    -------
    array like ``x``: the rotated span times ``A``; pass-through channels unchanged.

    Notes
    -----
    .. math:: R_p = A\,\mathrm{diag}\bigl(G(\varphi_{p,0}), \dots, G(\varphi_{p,m-1})\bigr),\qquad
        G(\varphi) = \begin{pmatrix}\cos\varphi & -\sin\varphi\\ \sin\varphi & \cos\varphi\end{pmatrix}

    in pair coordinates; every layout is ``Pᵀ R_p P`` for a fixed permutation ``P``.
    """
    rope = check_rope_config(rope)
    x, positions, single = prepare_inputs(x, positions, rope)
    xp = array_namespace(x)
    inv_freq, attention_factor = resolve_frequencies(rope, positions, seq_len, frequencies, xp)
    positions = align_positions(positions, x, rope)
    tokens = token_positions(positions, rope.mrope_section).shape  # (..., T): M-RoPE's rows share it
    out = xp.empty((*xp.broadcast_shapes(x.shape[:-1], tokens), x.shape[-1]), dtype=x.dtype)
    start, stop = rope_span(rope)
    out[..., :start] = x[..., :start]  # pass-through channels (DeepSeek: the nope part first)
    out[..., stop:] = x[..., stop:]  # pass-through channels (GPT-NeoX, Phi: after the rotated span)
    tables = partial(_cast_tables, positions, inv_freq, attention_factor, x.dtype, rope)  # rows -> their cos, sin
    _rotation_for(x)(x, tables, out, rope_pair_slices(rope, start, stop))  # fast forms: the same bits
    return out[0, :] if single else out


def _rotation_for(x: Array) -> Any:
    """The rotation for ``x``: the readable :func:`_rotate_span`, or a fast form with its signature and bits.

    NumPy: whole rows on every core (:mod:`refpos.rope.fast`); CuPy float32/float64: one fused kernel per
    formula (:mod:`refpos.rope.fast_gpu`). Both take the same ``tables`` as the readable form.
    """
    if is_fast_input(x):
        return rotate_span
    if is_fast_gpu_input(x):
        return rotate_span_gpu
    return _rotate_span


def _cast_tables(positions: Array, inv_freq: Array, attention_factor: float, dtype: Any, rope: RopeConfig,
                 rows: slice) -> tuple[Array, Array]:
    """The tables of one block of rows, :func:`rope_pair_tables` cast to
    x's dtype: ``(..., rows, m)`` each. M-RoPE positions ``(3, ..., T)`` are sliced on their T axis too."""
    xp = array_namespace(inv_freq)
    cos, sin = rope_pair_tables(positions[..., rows], inv_freq, attention_factor, rope)  # angles in float64
    return xp.astype(cos, dtype), xp.astype(sin, dtype)  # the rotation itself runs in x's dtype


def _rotate_span(x: Array, tables: Callable[[slice], tuple[Array, Array]], out: Array,
                 pairs: tuple[slice, slice, slice, slice]) -> None:
    """The readable rotation of the pairs ``(u_in, v_in, u_out, v_out)`` into ``out``: the reference for
    every backend. ``tables(rows)``: ``A·cos φ`` and ``A·sin φ`` of those rows, ``(..., rows, m)`` in x's dtype."""
    u_in, v_in, u_out, v_out = pairs
    # u' = u cos φ - v sin φ,  v' = v cos φ + u sin φ, written block by block along T so that the
    # temporaries stay small (cache-sized) and the output is the only full-size array
    t = x.shape[-2]
    xp = array_namespace(out)
    block = max(1, block_elements(_BLOCK_ELEMENTS, xp) // max(1, math.prod(out.shape[:-2]) * out.shape[-1]))
    for t0 in range(0, t, block):
        rows = slice(t0, min(t0 + block, t))
        u, v = x[..., rows, u_in], x[..., rows, v_in]  # (..., rows, m)
        c, s = tables(rows)  # (..., rows, m)
        out[..., rows, u_out] = u * c - v * s
        out[..., rows, v_out] = v * c + u * s


#: elements of x per block of rows in the readable apply_rope on the CPU (2**17: 1 MiB of float64, cache-sized;
#: larger on a GPU, see parallel.block_elements)
_BLOCK_ELEMENTS = 2**17


def rope_span(rope: RopeConfig) -> tuple[int, int]:
    """``[start, stop)`` of the rotated channels in the head (:func:`refpos.pairs.span_bounds`)."""
    return span_bounds(rope.head_dim, rope.rotary_width, rope.placement)


def rope_pair_slices(rope: RopeConfig, start: int, stop: int) -> tuple[slice, slice, slice, slice]:
    """Channel slices ``(u_in, v_in, u_out, v_out)`` of the pairs in ``[start, stop)``
    (:func:`refpos.pairs.pair_slices`)."""
    return pair_slices(rope.layout, stop - start, start)
