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
from refpos.pairs import layout_permutation, pair_slices, place_pairs, span_bounds, split_pairs
from refpos.pairs import pair_channels as _pairs_channels
from refpos.parallel import block_elements
from refpos.rope.config import RopeConfig
from refpos.rope.fast import is_fast_input, rotate_span
from refpos.rope.fast_gpu import is_fast_gpu_input
from refpos.rope.fast_gpu import rotate_span as rotate_span_gpu
from refpos.rope.mrope import mrope_angles, mrope_cos_sin, rope_positions, token_positions
from refpos.rope.scaling import _check_rope, _check_seq_len, rope_frequencies
from refpos.validation import (
    as_positions,
    check_broadcasts_to,
    check_choice,
    check_frequencies,
    check_int,
    floating_array,
)

Array = Any


def _seq_len_of(positions: Array) -> int | None:
    """HF's ``max(position_ids) + 1`` (``None`` for no positions)."""
    if math.prod(positions.shape) == 0:
        return None
    return int(array_namespace(positions).max(positions)) + 1


def _frequencies(rope: RopeConfig, positions: Array, seq_len: int | None,
                 frequencies: tuple[Array, float] | None, xp: ModuleType) -> tuple[Array, float]:
    if frequencies is not None:
        return check_frequencies(frequencies, rope.n_pairs, xp)
    seq_len = _check_seq_len(seq_len)
    return rope_frequencies(rope, seq_len=_seq_len_of(positions) if seq_len is None else seq_len, xp=xp)


def _pair_cos_sin(positions: Array, inv_freq: Array, attention_factor: float) -> tuple[Array, Array]:
    r"""``A·cos φ`` and ``A·sin φ`` per pair, ``(..., T, n_pairs)``, :math:`\varphi = p\,\omega_j`."""
    xp = array_namespace(inv_freq)
    angles = xp.astype(positions, xp.float64)[..., None] * inv_freq  # (..., T, n_pairs)
    return attention_factor * xp.cos(angles), attention_factor * xp.sin(angles)


def _cos_sin(positions: Array, inv_freq: Array, attention_factor: float, rope: RopeConfig) -> tuple[Array, Array]:
    """The per-pair tables of 1-D RoPE or, with sections, of M-RoPE (:func:`refpos.rope.mrope.mrope_cos_sin`)."""
    if rope.mrope_section is not None:
        return mrope_cos_sin(positions, inv_freq, attention_factor, rope.mrope_section,
                             interleaved=rope.mrope_interleaved)
    return _pair_cos_sin(positions, inv_freq, attention_factor)


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
    rope = _check_rope(rope)
    positions = rope_positions(positions, rope.mrope_section, xp=xp)
    xp = array_namespace(positions)
    inv_freq, attention_factor = _frequencies(rope, positions, seq_len, frequencies, xp)
    cos, sin = _cos_sin(positions, inv_freq, attention_factor, rope)  # (..., T, m)
    return place_pairs(cos, cos, rope.layout), place_pairs(sin, sin, rope.layout)  # (..., T, 2m)


def _split_span(x: Array, rope: RopeConfig) -> tuple[Array, Array, Array]:
    """``(before, span, after)`` of the head axis: the rotated span and the pass-through channels."""
    start, stop = _span_bounds(rope)
    return x[..., :start], x[..., start:stop], x[..., stop:]


def _prepare(x: Array, positions: Any, rope: RopeConfig) -> tuple[Array, Array, bool]:
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
    check_broadcasts_to("positions", token_positions(_align_positions(positions, x, rope), rope.mrope_section),
                        x.shape[:-1], what=f"x's {tuple(x.shape[:-1])} (x: {tuple(x.shape)}, (..., T, head_dim))")
    return x, positions, single


def _assemble(before: Array, rotated: Array, after: Array, single: bool) -> Array:
    """Concatenate pass-through and rotated channels (broadcast to the rotated shape)."""
    xp = array_namespace(rotated)
    out = xp.concat([xp.broadcast_to(part, (*rotated.shape[:-1], part.shape[-1]))
                     for part in (before, rotated, after)], axis=-1)
    return out[0, :] if single else out


def _align_positions(positions: Array, x: Array, rope: RopeConfig) -> Array:
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
    rope = _check_rope(rope)
    x, positions, single = _prepare(x, positions, rope)
    xp = array_namespace(x)
    inv_freq, attention_factor = _frequencies(rope, positions, seq_len, frequencies, xp)
    positions = _align_positions(positions, x, rope)
    tokens = token_positions(positions, rope.mrope_section).shape  # (..., T): M-RoPE's rows share it
    out = xp.empty((*xp.broadcast_shapes(x.shape[:-1], tokens), x.shape[-1]), dtype=x.dtype)
    start, stop = _span_bounds(rope)
    out[..., :start] = x[..., :start]  # pass-through channels (DeepSeek: the nope part first)
    out[..., stop:] = x[..., stop:]  # pass-through channels (GPT-NeoX, Phi: after the rotated span)
    tables = partial(_cast_tables, positions, inv_freq, attention_factor, x.dtype, rope)  # rows -> their cos, sin
    _rotation_for(x)(x, tables, out, _pair_slices(rope, start, stop))  # fast forms: the same bits
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
    """The tables of one block of rows, :func:`_cos_sin` cast to
    x's dtype: ``(..., rows, m)`` each. M-RoPE positions ``(3, ..., T)`` are sliced on their T axis too."""
    xp = array_namespace(inv_freq)
    cos, sin = _cos_sin(positions[..., rows], inv_freq, attention_factor, rope)  # angles in float64
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


def _span_bounds(rope: RopeConfig) -> tuple[int, int]:
    """``[start, stop)`` of the rotated channels in the head (:func:`refpos.pairs.span_bounds`)."""
    return span_bounds(rope.head_dim, rope.rotary_width, rope.placement)


def _pair_slices(rope: RopeConfig, start: int, stop: int) -> tuple[slice, slice, slice, slice]:
    """Channel slices ``(u_in, v_in, u_out, v_out)`` of the pairs in ``[start, stop)``
    (:func:`refpos.pairs.pair_slices`)."""
    return pair_slices(rope.layout, stop - start, start)


def apply_rope_complex(
    x: Array, positions: Any, rope: RopeConfig, *, seq_len: int | None = None
) -> Array:
    r"""RoPE in complex form (Meta Llama, HF DeepSeek-V2): :math:`z'_j = A\,e^{i\varphi_{p,j}} z_j`.

    Pairs ``(u_j, v_j)`` (chosen by the layout) become ``z_j = u_j + i v_j``, are multiplied by
    ``A·exp(i p ω_j)`` in complex128 and written back in the layout's output order. Same arguments and
    result as :func:`apply_rope`; an independent evaluation of the same operator (agrees to ~1e-16).
    """
    rope = _check_rope(rope)
    x, positions, single = _prepare(x, positions, rope)
    xp = array_namespace(x)
    inv_freq, attention_factor = _frequencies(rope, positions, seq_len, None, xp)
    positions = _align_positions(positions, x, rope)
    if rope.mrope_section is not None:  # φ_j = p_{a(j)} ω_j (refpos.rope.mrope)
        angles = mrope_angles(positions, inv_freq, rope.mrope_section, interleaved=rope.mrope_interleaved)
    else:
        angles = xp.astype(positions, xp.float64)[..., None] * inv_freq  # (..., T, m)
    rotor = attention_factor * xp.exp(xp.asarray(1j, dtype=xp.complex128) * xp.astype(angles, xp.complex128))
    before, span, after = _split_span(x, rope)
    u, v = split_pairs(span, rope.layout)  # (..., T, m) each
    z = xp.astype(u, xp.complex128) + xp.asarray(1j, dtype=xp.complex128) * xp.astype(v, xp.complex128)
    z_rot = rotor * z  # (..., T, m)
    rotated = place_pairs(xp.real(z_rot), xp.imag(z_rot), rope.layout)  # (..., T, 2m)
    return _assemble(before, rotated, after, single)


def pair_channels(rope: RopeConfig) -> tuple[list[int], list[int], list[int], list[int]]:
    """Channel indices ``(in_u, in_v, out_u, out_v)`` of every pair in the head (layout + placement).

    Pair ``j`` reads ``x[in_u[j]], x[in_v[j]]`` and writes ``y[out_u[j]], y[out_v[j]]``; every channel in
    none of these lists passes through.
    """
    rope = _check_rope(rope)
    start, stop = _span_bounds(rope)
    return _pairs_channels(rope.layout, stop - start, start)


def rope_rotation_matrix(
    position: Any, rope: RopeConfig, *, seq_len: int | None = None, xp: ModuleType | None = None
) -> Array:
    r"""The matrix ``M`` with ``apply_rope(x, p) = M @ x``, shape ``(D, D)`` (or ``(T, D, D)`` for ``T`` positions).

    Built entry by entry from :func:`pair_channels` (independently of :func:`apply_rope`):

    .. math:: M_{u'u} = M_{v'v} = A\cos\varphi_j,\quad M_{u'v} = -A\sin\varphi_j,\quad
        M_{v'u} = A\sin\varphi_j,\quad M_{kk} = 1 \text{ for pass-through } k

    ``seq_len=None`` is ``max(position) + 1``. With M-RoPE (``rope.mrope_section`` set) ``position`` is
    ``(3,)`` (one token's t, h, w; result ``(D, D)``) or ``(3, T)`` (result ``(T, D, D)``).
    """
    rope = _check_rope(rope)
    positions = as_positions(position, xp=xp)
    xp = array_namespace(positions)
    one_token = positions.ndim == (1 if rope.mrope_section is not None else 0)
    if rope.mrope_section is not None:  # one token (t, h, w), or (3, T)
        if positions.ndim not in (1, 2) or positions.shape[0] != 3:
            raise ValueError(f"position: with M-RoPE (mrope_section set) give (3,) for one token (t, h, w) "
                             f"or (3, T); got shape {tuple(positions.shape)}")
        positions = xp.reshape(positions, (3, 1)) if one_token else positions  # (3, T)
    elif positions.ndim > 1:
        raise ValueError(f"position must be an int or a 1-D array, got shape {tuple(positions.shape)}")
    inv_freq, attention_factor = _frequencies(rope, positions, seq_len, None, xp)
    cos, sin = _cos_sin(positions, inv_freq, attention_factor, rope)  # (..., m)
    if rope.mrope_section is not None and one_token:
        cos, sin = cos[0, ...], sin[0, ...]  # (m,): one token
    cos, sin = cos[..., :, None], sin[..., :, None]  # (..., m, 1)
    full = rope.head_dim
    channels = xp.arange(full, dtype=xp.int64)

    def one_hot(index: list[int]) -> Array:  # (m, D): row j selects channel index[j]
        return xp.astype(channels[None, :] == xp.asarray(index, dtype=xp.int64)[:, None], xp.float64)

    in_u, in_v, out_u, out_v = (one_hot(ix) for ix in pair_channels(rope))
    rotated = (xp.matrix_transpose(out_u) @ (cos * in_u - sin * in_v)
               + xp.matrix_transpose(out_v) @ (sin * in_u + cos * in_v))  # (..., D, D)
    touched = xp.sum(in_u + in_v, axis=0)  # (D,): 1 on rotated channels
    passthrough = xp.eye(full, dtype=xp.float64) * (1 - touched)[None, :]
    return rotated + passthrough


def interleaved_to_half_permutation(d: int, *, xp: ModuleType | None = None) -> Array:
    """Index ``perm`` with ``x_half = x_interleaved[..., perm]``: Meta → HF rows.

    See docs/rope.md#how-checkpoints-are-converted.

    ``perm[c·d/2 + j] = 2j + c``; for ``d = 8``: ``[0, 2, 4, 6, 1, 3, 5, 7]``. With ``P`` this
    permutation, ``apply_half(P·x) = P·apply_interleaved(x)`` exactly.
    """
    d = _check_even("d", d)
    return layout_permutation(d, "interleaved", "half", xp=xp)


def half_to_interleaved_permutation(d: int, *, xp: ModuleType | None = None) -> Array:
    """Inverse of :func:`interleaved_to_half_permutation`: ``x_interleaved = x_half[..., perm]`` (HF → Meta)."""
    d = _check_even("d", d)
    return layout_permutation(d, "half", "interleaved", xp=xp)


def _check_even(name: str, d: int) -> int:
    d = check_int(name, d, minimum=2)
    if d % 2:
        raise ValueError(f"{name} must be even, got {d}")
    return d


def permute_qk_heads(w: Array, n_heads: int, *, to: str, axis: int = -1) -> Array:
    """Permute the q or k output channels of every head between Meta and HF order.

    See docs/rope.md#how-checkpoints-are-converted.

    ``w`` has ``n_heads·D`` entries along ``axis``: the columns of a refpos ``(d_model, H·D)`` weight
    (``axis=-1``), the rows of a torch ``(H·D, d_model)`` weight (``axis=0``), or a bias. ``to="half"``
    is the HF converter (Meta interleaved → HF half-split), ``to="interleaved"`` its inverse (llama.cpp).
    Use ``n_kv_heads`` for ``W_k``.
    """
    xp = array_namespace(w)
    n_heads = check_int("n_heads", n_heads, minimum=1)
    check_choice("to", to, ("half", "interleaved"))
    width = w.shape[axis]
    if width % n_heads or (width // n_heads) % 2:
        raise ValueError(f"axis {axis} of w has {width} entries, not n_heads={n_heads} heads of even size")
    head_dim = width // n_heads
    make = interleaved_to_half_permutation if to == "half" else half_to_interleaved_permutation
    perm = make(head_dim, xp=xp)
    index = xp.concat([perm + h * head_dim for h in range(n_heads)])  # (H·D,)
    return xp.take(w, index, axis=axis)
