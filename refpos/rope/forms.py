r"""RoPE's other forms: the complex form, the rotation matrix, and the Meta ↔ HF checkpoint permutations.

Each is an independent evaluation of the operator that :func:`refpos.rope.core.apply_rope` applies, written
from a different formula, so the tests can hold the three against each other:

* :func:`apply_rope_complex` — pairs as complex numbers, :math:`z'_j = A\,e^{i p \omega_j} z_j`;
* :func:`rope_rotation_matrix` — the ``(D, D)`` matrix ``M`` with ``apply_rope(x, p) = M @ x``, built entry by
  entry from :func:`pair_channels`;
* :func:`interleaved_to_half_permutation` and :func:`permute_qk_heads` — how a checkpoint's q/k weights are
  reordered between the interleaved (Meta) and half-split (HF) layouts
  (docs/rope.md#how-checkpoints-are-converted).

Examples
--------
>>> import numpy as np
>>> from refpos.rope.config import RopeConfig
>>> from refpos.rope.core import apply_rope
>>> rope = RopeConfig(head_dim=8)
>>> x = np.arange(1.0, 9.0) / 8
>>> bool(np.allclose(rope_rotation_matrix(3, rope) @ x, apply_rope(x, 3, rope), rtol=0, atol=1e-15))
True
>>> interleaved_to_half_permutation(8).tolist()
[0, 2, 4, 6, 1, 3, 5, 7]
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.pairs import layout_permutation, place_pairs, split_pairs
from refpos.pairs import pair_channels as _pairs_channels
from refpos.rope.config import RopeConfig
from refpos.rope.core import (
    align_positions,
    assemble_span,
    prepare_inputs,
    resolve_frequencies,
    rope_pair_tables,
    rope_span,
    split_span,
)
from refpos.rope.mrope import mrope_angles
from refpos.rope.scaling import check_rope_config
from refpos.validation import as_positions, check_choice, check_width


def apply_rope_complex(
    x: Array, positions: Any, rope: RopeConfig, *, seq_len: int | None = None
) -> Array:
    r"""RoPE in complex form (Meta Llama, HF DeepSeek-V2): :math:`z'_j = A\,e^{i\varphi_{p,j}} z_j`
    (:math:`\varphi_{p,j} = s\,p\,\omega_j`, ``s = rope.angle_sign``).

    Pairs ``(u_j, v_j)`` (chosen by the layout) become ``z_j = u_j + i v_j``, are multiplied by
    ``A·exp(i p ω_j)`` in complex128 and written back in the layout's output order. Same arguments and
    result as :func:`apply_rope`; an independent evaluation of the same operator (agrees to ~1e-16).
    """
    rope = check_rope_config(rope)
    x, positions, single = prepare_inputs(x, positions, rope)
    xp = array_namespace(x)
    inv_freq, attention_factor = resolve_frequencies(rope, positions, seq_len, None, xp)
    positions = align_positions(positions, x, rope)
    if rope.mrope_section is not None:  # φ_j = p_{a(j)} ω_j (refpos.rope.mrope)
        angles = mrope_angles(positions, inv_freq, rope.mrope_section, interleaved=rope.mrope_scheme)
    else:
        angles = xp.astype(positions, xp.float64)[..., None] * inv_freq  # (..., T, m)
    angles = angles if rope.angle_sign == 1 else -angles  # the direction every pair turns
    rotor = attention_factor * xp.exp(xp.asarray(1j, dtype=xp.complex128) * xp.astype(angles, xp.complex128))
    before, span, after = split_span(x, rope)
    u, v = split_pairs(span, rope.layout)  # (..., T, m) each
    z = xp.astype(u, xp.complex128) + xp.asarray(1j, dtype=xp.complex128) * xp.astype(v, xp.complex128)
    z_rot = rotor * z  # (..., T, m)
    rotated = place_pairs(xp.real(z_rot), xp.imag(z_rot), rope.layout)  # (..., T, 2m)
    return assemble_span(before, rotated, after, single)


def pair_channels(rope: RopeConfig) -> tuple[list[int], list[int], list[int], list[int]]:
    """Channel indices ``(in_u, in_v, out_u, out_v)`` of every pair in the head (layout + placement).

    Pair ``j`` reads ``x[in_u[j]], x[in_v[j]]`` and writes ``y[out_u[j]], y[out_v[j]]``; every channel in
    none of these lists passes through.
    """
    rope = check_rope_config(rope)
    start, stop = rope_span(rope)
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
    rope = check_rope_config(rope)
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
    inv_freq, attention_factor = resolve_frequencies(rope, positions, seq_len, None, xp)
    cos, sin = rope_pair_tables(positions, inv_freq, attention_factor, rope)  # (..., m)
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
    d = check_width(name, d, minimum=2, what="int64 indices")
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
    n_heads = check_width("n_heads", n_heads, what="heads")
    check_choice("to", to, ("half", "interleaved"))
    width = w.shape[axis]
    if width % n_heads or (width // n_heads) % 2:
        raise ValueError(f"axis {axis} of w has {width} entries, not n_heads={n_heads} heads of even size")
    head_dim = width // n_heads
    make = interleaved_to_half_permutation if to == "half" else half_to_interleaved_permutation
    perm = make(head_dim, xp=xp)
    index = xp.concat([perm + h * head_dim for h in range(n_heads)])  # (H·D,)
    return xp.take(w, index, axis=axis)
