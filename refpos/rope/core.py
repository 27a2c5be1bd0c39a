r"""Applying RoPE: cos/sin tables, rotation of q/k in every layout and placement, matrix and complex forms.

Pair ``j`` of a query or key at position ``p`` is rotated by the angle :math:`\varphi_{p,j} = s\,p\,\omega_j`
(the direction ``s = rope.angle_sign``: 1, or -1 for NanoChat) and scaled by the attention factor ``A``
(docs/rope.md#the-math):

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

:func:`apply_rope` validates its inputs, resolves ``ω`` and ``A``, and hands them to :func:`rotate_pairs`, the
rotation written as the formula above (tables, then ``u cos − v sin`` and ``v cos + u sin``). On NumPy and
CuPy arrays one dispatch line (:func:`_rotation_for`) picks a fast form of that rotation instead: whole rows
on threads (:mod:`refpos.rope.fast`) or fused kernels (:mod:`refpos.rope.fast_gpu`), both consuming the same
tables and giving the same bits (refpos/tests/test_fast_forms.py asserts equality). The fast forms and
:func:`rope_cos_sin` take the tables of :func:`rope_pair_tables` through a bounded cache
(:mod:`refpos.rope.table_cache`): computed once per set of positions, ``ω`` and ``A``
(``REFPOS_TABLE_CACHE=0`` turns it off).

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
from functools import partial
from types import ModuleType
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.pairs import pair_slices, place_pairs, span_bounds
from refpos.rope.config import RopeConfig
from refpos.rope.fast import is_fast_input, rotate_span
from refpos.rope.fast_gpu import is_fast_gpu_input
from refpos.rope.fast_gpu import rotate_span as rotate_span_gpu
from refpos.rope.mrope import mrope_cos_sin, rope_positions, token_positions
from refpos.rope.scaling import check_rope_config, check_seq_len, frequencies_at
from refpos.rope.table_cache import cached_pair_tables
from refpos.validation import (
    check_broadcasts_to,
    check_frequencies,
    floating_array,
    same_library,
)


def seq_len_of(positions: Array) -> int | None:
    """HF's ``max(position_ids) + 1`` (``None`` for no positions)."""
    if math.prod(positions.shape) == 0:
        return None
    return int(array_namespace(positions).max(positions)) + 1


def resolve_frequencies(rope: RopeConfig, positions: Array, seq_len: int | None,
                 frequencies: tuple[Array, float] | None, xp: ModuleType) -> tuple[Array, float]:
    if frequencies is not None:
        return check_frequencies(frequencies, rope.n_pairs, xp)
    seq_len, needed = check_seq_len(seq_len), seq_len_of(positions)
    resolved = frequencies_at(rope, needed if seq_len is None else seq_len, xp)
    check_seq_len_covers(rope, seq_len, needed, resolved, xp)
    return resolved


def check_seq_len_covers(rope: RopeConfig, seq_len: int | None, needed: int | None,
                         resolved: tuple[Array, float] | None = None, xp: ModuleType | None = None) -> None:
    """``ValueError`` when ``seq_len`` is below ``needed = max(positions) + 1`` and the rule's frequencies at
    ``seq_len`` (``resolved``, computed here when not given) differ from those at ``needed``: the rule reads the
    sequence length L (dynamic NTK as transformers computes it, LongRoPE's factor choice), and HF's L,
    ``max(position_ids) + 1``, covers every position. Where both lengths give the same ω and A, nothing
    depends on the difference and nothing is refused."""
    if seq_len is None or needed is None or seq_len >= needed:
        return
    inv, factor = resolved if resolved is not None else frequencies_at(rope, seq_len, xp)
    inv_needed, factor_needed = frequencies_at(rope, needed, xp)
    ns = array_namespace(inv)
    if factor != factor_needed or not bool(ns.all(inv == ns.asarray(inv_needed))):
        raise ValueError(f"seq_len must be >= max(positions) + 1 = {needed} for rope_type {rope.rope_type!r}, got "
                         f"seq_len={seq_len}: its frequencies depend on the sequence length L, which covers every "
                         "position (HF's L = max(position_ids) + 1); a shorter L gives other frequencies")


def pair_cos_sin(positions: Array, inv_freq: Array, attention_factor: float, *,
                 angle_dtype: str = "float64") -> tuple[Array, Array]:
    r"""``A·cos φ`` and ``A·sin φ`` per pair, ``(..., T, n_pairs)`` float64, :math:`\varphi = p\,\omega_j`.

    ``angle_dtype``: the dtype ``p``, ``ω`` and ``φ`` are held in, float64 (exact phase at any position);
    ``"float32"`` gives a port's float32 phase path, a variant that ``refpos check`` names (float32_angles).
    """
    xp = array_namespace(inv_freq)
    dtype = getattr(xp, angle_dtype)
    angles = xp.astype(positions, dtype)[..., None] * xp.astype(inv_freq, dtype, copy=False)  # (..., T, n_pairs)
    cos, sin = attention_factor * xp.cos(angles), attention_factor * xp.sin(angles)
    return xp.astype(cos, xp.float64, copy=False), xp.astype(sin, xp.float64, copy=False)


def rope_pair_tables(positions: Array, inv_freq: Array, attention_factor: float, rope: RopeConfig, *,
                     angle_dtype: str = "float64") -> tuple[Array, Array]:
    r"""The per-pair tables of 1-D RoPE (:func:`pair_cos_sin`) or, with sections, of M-RoPE
    (:func:`refpos.rope.mrope.mrope_cos_sin`, float64 angles only), at the angle :math:`s\,\varphi` of the
    direction ``s = rope.angle_sign``: :math:`\cos(-\varphi) = \cos\varphi` and :math:`\sin(-\varphi) =
    -\sin\varphi` (exactly, in floating point too), so ``s = -1`` negates the sine table."""
    if rope.mrope_section is not None:
        if angle_dtype != "float64":
            raise ValueError(f"angle_dtype must be 'float64' for M-RoPE, got {angle_dtype!r}")
        cos, sin = mrope_cos_sin(positions, inv_freq, attention_factor, rope.mrope_section,
                                 interleaved=rope.mrope_scheme)
    else:
        cos, sin = pair_cos_sin(positions, inv_freq, attention_factor, angle_dtype=angle_dtype)
    return cos, (sin if rope.angle_sign == 1 else -sin)


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
    cos, sin = cached_pair_tables(rope_pair_tables, positions, inv_freq, attention_factor, rope)  # (..., T, m)
    return place_pairs(cos, cos, rope.layout), place_pairs(sin, sin, rope.layout)  # (..., T, 2m), new arrays


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
    same_library("positions", positions, xp)  # x's library: refpos moves no array between libraries
    positions = rope_positions(positions, rope.mrope_section, xp=xp)
    single = x.ndim == 1
    if single:
        if math.prod(token_positions(positions, rope.mrope_section).shape) != 1:
            raise ValueError(f"x of shape {tuple(x.shape)} is one vector: give one position, got shape "
                             f"{tuple(positions.shape)}")
        x = x[None, :]  # (T=1, D)
        per_token = (len(rope.mrope_section), 1) if rope.mrope_section is not None else (1,)
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

    in pair coordinates; every layout is ``Pᵀ R_p P`` for a fixed permutation ``P``. :func:`rotate_pairs` is
    the rotation as written here; NumPy and CuPy arrays run a fast form of it with the same bits.
    """
    rope = check_rope_config(rope)
    x, positions, single = prepare_inputs(x, positions, rope)
    inv_freq, attention_factor = resolve_frequencies(rope, positions, seq_len, frequencies, array_namespace(x))
    positions = align_positions(positions, x, rope)
    out = _rotation_for(x)(x, positions, inv_freq, attention_factor, rope)  # fast forms: the same bits
    return out[0, :] if single else out


def rotate_pairs(x: Array, positions: Array, inv_freq: Array, attention_factor: float, rope: RopeConfig, *,
                 angle_dtype: str = "float64", pairs: tuple[Any, Any, Any, Any] | None = None) -> Array:
    r"""The rotation as the formula writes it: the reference of every fast form.

    .. math:: u'_j = A\,(u_j \cos\varphi - v_j \sin\varphi), \qquad
        v'_j = A\,(v_j \cos\varphi + u_j \sin\varphi), \qquad \varphi = p\,\omega_j

    ``x`` ``(..., T, D)``; ``positions`` aligned to it (:func:`align_positions`). The tables are float64
    (:func:`rope_pair_tables`); the products run in x's dtype. ``angle_dtype`` and ``pairs`` (channels
    ``(u_in, v_in, u_out, v_out)`` other than the layout's) are for variants (:mod:`refpos.check.rope.mistakes`).
    """
    xp = array_namespace(x)
    cos, sin = rope_pair_tables(positions, inv_freq, attention_factor, rope, angle_dtype=angle_dtype)  # (..., T, m)
    cos, sin = xp.astype(cos, x.dtype), xp.astype(sin, x.dtype)  # A·cos φ, A·sin φ
    shape = (*xp.broadcast_shapes(x.shape[:-1], cos.shape[:-1]), x.shape[-1])
    out = xp.asarray(xp.broadcast_to(x, shape), copy=True)  # the pass-through channels keep their values
    u_in, v_in, u_out, v_out = pairs or rope_pair_slices(rope, *rope_span(rope))  # which channels pair up
    u, v = x[..., u_in], x[..., v_in]  # (..., T, m) each
    out[..., u_out] = u * cos - v * sin
    out[..., v_out] = v * cos + u * sin
    return out


def _rotation_for(x: Array) -> Any:
    """The rotation for ``x``: :func:`rotate_pairs`, or a fast form with its signature and bits."""
    fast = fast_span_rotation(x)
    return rotate_pairs if fast is None else partial(_fast_form, fast)


def fast_span_rotation(x: Array) -> Any | None:
    """The fast span rotation for ``x``, or ``None`` (the readable :func:`rotate_pairs` runs).

    NumPy: slabs of rows on every core (:mod:`refpos.rope.fast`); CuPy float32/float64: one fused kernel per
    formula (:mod:`refpos.rope.fast_gpu`). Both take the float64 tables of :func:`rope_pair_tables` and cast
    them to x's dtype; refpos/tests/test_fast_forms.py holds their output equal to :func:`rotate_pairs`'s.
    """
    if is_fast_input(x):
        return rotate_span
    if is_fast_gpu_input(x):
        return rotate_span_gpu
    return None


def _fast_form(rotate_span_fast: Any, x: Array, positions: Array, inv_freq: Array, attention_factor: float,
               rope: RopeConfig) -> Array:
    """:func:`rotate_pairs` by a fast span rotation: the output written once (rotated pairs and pass-through
    channels), the float64 tables computed once per set of positions (:mod:`refpos.rope.table_cache`) and cast
    to x's dtype by the rotation."""
    xp = array_namespace(x)
    tokens = token_positions(positions, rope.mrope_section).shape  # (..., T): M-RoPE's rows share it
    out = xp.empty((*xp.broadcast_shapes(x.shape[:-1], tokens), x.shape[-1]), dtype=x.dtype)
    cos, sin = cached_pair_tables(rope_pair_tables, positions, inv_freq, attention_factor, rope)  # (..., T, m)
    rotate_span_fast(x, cos, sin, out, rope_pair_slices(rope, *rope_span(rope)))
    return out


def rope_span(rope: RopeConfig) -> tuple[int, int]:
    """``[start, stop)`` of the rotated channels in the head (:func:`refpos.pairs.span_bounds`)."""
    return span_bounds(rope.head_dim, rope.rotary_width, rope.placement)


def rope_pair_slices(rope: RopeConfig, start: int, stop: int) -> tuple[slice, slice, slice, slice]:
    """Channel slices ``(u_in, v_in, u_out, v_out)`` of the pairs in ``[start, stop)``
    (:func:`refpos.pairs.pair_slices`)."""
    return pair_slices(rope.layout, stop - start, start)
