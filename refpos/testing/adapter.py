"""The reference adapter: refpos itself behind the adapter contract of ``spec_tests/README.md``.

Arrays in and out are NumPy, moved inside to the current backend (``REFPOS_BACKEND``): the suite exercises every one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import refpos
from refpos.backend import get_xp
from refpos.rope import DynamicNTKState, Rope, interleaved_to_half_permutation, permute_qk_heads, softmax_multiplier
from refpos.testing.adapter_arrays import to_backend as _in
from refpos.testing.adapter_arrays import to_host as _out
from refpos.testing.adapter_kinds import *  # noqa: F403  # the vision and audio kinds' contract functions
from refpos.testing.adapter_layers import apply_rope_tables, apply_vision_rope, local_attention, query_scale  # noqa: F401

INFO: dict[str, Any] = {
    "name": "refpos",
    "dtype": "float64",
    "rope_layout": "half",
    "mrope": ["contiguous", "interleaved", "hw_alternating", "four_rows"],
    "description": "the refpos float64 reference, on the backend named by REFPOS_BACKEND",
}


# ------------------------------------------------------------------------------- attention core
def softmax(logits: np.ndarray, mask: np.ndarray | None = None, fully_masked: str = "zeros") -> np.ndarray:
    return _out(refpos.core.softmax.softmax(_in(logits), mask=_in(mask), fully_masked=fully_masked))


def _attention_options(bias: Any = None, mask: Any = None, scale: float | None = None, causal: bool = False,
                       softcap: float | None = None) -> dict[str, Any]:
    """The options both attention entry points take, their arrays moved to the backend."""
    return {"bias": _in(bias), "mask": _in(mask), "scale": scale, "causal": causal, "softcap": softcap}


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    causal: bool = False,
    softcap: float | None = None,
) -> np.ndarray:
    options = _attention_options(bias, mask, scale, causal, softcap)
    return _out(refpos.attention(_in(q), _in(k), _in(v), **options))


def chunked_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, chunk_size: int, **options: Any) -> np.ndarray:
    """:func:`attention` over key chunks of ``chunk_size``; ``options`` are :func:`attention`'s keywords."""
    return _out(refpos.core.chunked_attention(_in(q), _in(k), _in(v), chunk_size=chunk_size,
                                              **_attention_options(**options)))


# ------------------------------------------------------------------------------- encodings --------
def _positions_in(positions: Any) -> Any:
    """Positions to the backend without a dtype cast: float or negative positions must raise, not round."""
    return _in(positions)


def _f64(a: Any) -> Any:
    return _in(a, np.float64)


def sinusoidal(
    positions: np.ndarray, dim: int, base: float = 10000.0, layout: str = "interleaved", spacing: str = "paper"
) -> np.ndarray:
    """Sinusoidal table ``(*positions.shape, dim)`` (docs/sinusoidal.md#the-math).

    ``positions``: non-negative ints. ``layout="interleaved"``: channel ``2k = sin(p·ω_k)``,
    ``2k+1 = cos(p·ω_k)``; ``"concat"``: channel ``k`` sin, ``k + dim/2`` cos. ``spacing="paper"``:
    ``ω_k = base^(-2k/dim)``; ``"tensor2tensor"``: ``ω_k = exp(-k·ln(base)/max(dim/2 - 1, 1))``.
    ``dim`` even and >= 2 (odd ``dim`` and ``dim <= 0`` raise ValueError naming ``dim``).
    """
    return _out(refpos.encodings.sinusoidal.sinusoidal(_positions_in(positions), dim, base=base, layout=layout,
                                                       spacing=spacing))


def sinusoidal_shift_matrix(r: int, dim: int, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """The ``(dim, dim)`` matrix ``M_r`` with ``P[p + r] = M_r @ P[p]`` (column vectors), paper spacing.

    Per frequency, in (sin, cos) pair coordinates, the block is ``[[cos ωr, sin ωr], [-sin ωr, cos ωr]]``
    (+sin upper right). ``r`` is any int (negative allowed); ``layout`` as in :func:`sinusoidal`.
    """
    return _out(refpos.encodings.sinusoidal_shift_matrix(r, dim, base=base, layout=layout))


def learned_lookup(table: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Rows ``table[positions]``: table ``(N, d)``, positions ints of any shape -> ``(*positions.shape, d)``.

    A position ``< 0`` or ``>= N`` raises ValueError naming ``positions`` (no wrap-around).
    """
    return _out(refpos.encodings.learned_lookup(_f64(table), _positions_in(positions)))


def alibi_slopes(n_heads: int) -> np.ndarray:
    """ALiBi slopes ``(n_heads,)`` of the official recurrence (power of two: ``2^(-8h/n)``, h = 1..n;
    otherwise the ``c = 2^floor(log2 n)`` slopes followed by the even-indexed slopes of the ``2c`` set).
    ``n_heads < 1`` raises ValueError naming ``n_heads``.
    """
    return _out(refpos.encodings.alibi_slopes(n_heads, xp=get_xp()))


def alibi_bias(n_heads: int, q_len: int, k_len: int, form: str = "causal") -> np.ndarray:
    """ALiBi bias ``(n_heads, q_len, k_len)``, unmasked, queries aligned to the end of the keys
    (query ``i`` at position ``k_len - q_len + i``). ``form``: ``"causal"`` ``-m_h·(i - j)`` (positive on
    future keys), ``"symmetric"`` ``-m_h·|i - j|``, ``"key_index"`` ``+m_h·j``.
    """
    return _out(refpos.encodings.alibi_bias(n_heads, q_len, k_len, form=form, xp=get_xp()))


def t5_bucket(
    relative_position: np.ndarray, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> np.ndarray:
    """T5 bucket (int64, same shape) of ``relative_position = key position - query position``.

    Bidirectional: future keys (rel > 0) use buckets ``num_buckets/2 …``. Causal: future keys go to 0.
    ``num_buckets`` odd when bidirectional, or ``max_distance <= max_exact``, raise ValueError naming them.
    """
    return _out(refpos.encodings.t5_bucket(_positions_in(relative_position), bidirectional=bidirectional,
                                           num_buckets=num_buckets, max_distance=max_distance))


def t5_bias(
    table: np.ndarray,
    q_positions: np.ndarray,
    k_positions: np.ndarray,
    bidirectional: bool = True,
    max_distance: int = 128,
) -> np.ndarray:
    """T5 bias ``(H, Tq, Tk)``: ``table[bucket(k_pos[j] - q_pos[i]), h]``; table ``(num_buckets, H)``."""
    return _out(refpos.encodings.t5_bias(_f64(table), _positions_in(q_positions), _positions_in(k_positions),
                                         bidirectional=bidirectional, max_distance=max_distance))


def shaw_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    w_k: np.ndarray,
    w_v: np.ndarray,
    max_relative_position: int,
    positions: np.ndarray | None = None,
    causal: bool = False,
) -> np.ndarray:
    """Shaw et al. self-attention output ``(H, T, dv)``; q, k ``(H, T, d)``, v ``(H, T, dv)``.

    ``w_k`` ``(2k+1, d)``, ``w_v`` ``(2k+1, dv)`` shared by the heads, ``k = max_relative_position >= 0``;
    pair (i, j) reads row ``clip(pos[j] - pos[i], -k, k) + k``. ``positions`` ``(T,)`` defaults to
    ``arange(T)``. ``e_ij = q_i·(k_j + a^K_ij)/√d``; causal masks ``pos[j] > pos[i]``;
    ``z_i = Σ_j α_ij (v_j + a^V_ij)``.
    """
    qx, kx, vx = _f64(q), _f64(k), _f64(v)
    xp = get_xp()
    pos = xp.arange(q.shape[-2], dtype=xp.int64) if positions is None else _positions_in(positions)
    enc = refpos.encodings.Shaw(_f64(w_k), _f64(w_v), max_relative_position)
    mask = (pos[None, :] <= pos[:, None]) if causal else None
    return _out(refpos.attention(qx, kx, vx, mask=mask, qk_terms=enc.qk_terms(qx, kx, pos, pos),
                                 value_terms=enc.value_terms(pos, pos)))


def txl_rel_shift(x: np.ndarray) -> np.ndarray:
    """Transformer-XL ``_rel_shift`` of ``(..., qlen, klen)``: pad a zero column on the left, view as
    ``(klen + 1, qlen)``, drop the first row, view back. Valid entries (``j <= i + klen - qlen``) equal
    ``x[..., i, j + qlen - 1 - i]``; the others are leftovers.
    """
    return _out(refpos.encodings.txl_rel_shift(_f64(x)))


def txl_scores(q: np.ndarray, k: np.ndarray, r_head_k: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Transformer-XL logits ``(H, qlen, klen)``: ``((q_i + u)·k_j + (q_i + v)·r[klen - 1 - (mlen + i - j)])/√d``.

    q ``(H, qlen, d)``, k ``(H, klen, d)``, ``r_head_k`` ``(H, klen, d)`` = projected sinusoid whose row t
    encodes distance ``klen - 1 - t``, u, v ``(H, d)``; ``mlen = klen - qlen``; future keys
    (``j > mlen + i``) are ``-inf``.
    """
    return _out(refpos.encodings.txl_scores(_f64(q), _f64(k), _f64(r_head_k), _f64(u), _f64(v)))


def kerple_bias(
    r1: np.ndarray, r2: np.ndarray, q_positions: np.ndarray, k_positions: np.ndarray, kind: str = "log"
) -> np.ndarray:
    """KERPLE bias ``(H, Tq, Tk)``, ``n = max(q_pos[i] - k_pos[j], 0)``: ``"log"`` ``-r1·log(1 + r2·n)``,
    ``"power"`` ``-r1·n^r2``; r1, r2 ``(H,)`` clamped to ``>= 0.01`` (power: r2 ``<= 2``), as the anchor.
    Future keys get 0 and must be masked.
    """
    return _out(refpos.encodings.kerple_bias(_f64(r1), _f64(r2), _positions_in(q_positions),
                                             _positions_in(k_positions), kind=kind))


def fire_bias(
    q_positions: np.ndarray,
    k_positions: np.ndarray,
    w1: np.ndarray,
    b1: np.ndarray,
    w2: np.ndarray,
    b2: np.ndarray,
    c: float = 0.1,
    L: float = 512.0,
    eps: float = 1e-6,
) -> np.ndarray:
    """FIRE bias ``(H, Tq, Tk)`` = ``w2 @ relu(w1·φ + b1) + b2`` per pair, with
    ``φ = log(|c·(i - j)| + 1) / (log(|c·max(i, |L|)| + 1) + eps)``, ``i = q_pos``, ``j = k_pos``.
    w1, b1 ``(width,)``, w2 ``(H, width)``, b2 ``(H,)``. Causal: future keys must be masked.
    """
    return _out(refpos.encodings.fire_bias(_positions_in(q_positions), _positions_in(k_positions), _f64(w1), _f64(b1),
                                           _f64(w2), _f64(b2), c=c, L=L, eps=eps))


def sandwich_bias(
    q_positions: np.ndarray, k_positions: np.ndarray, head_dim: int, n_heads: int, causal: bool = True
) -> np.ndarray:
    """Sandwich bias ``(H, Tq, Tk)`` = ``(Σ_{k=1}^{d/2} cos(rel·10000^(-2k/d)) - d/2) / (8h/H)``, h = 1..H,
    ``rel = k_pos[j] - q_pos[i]`` (``min(rel, 0)`` when causal), ``d = head_dim`` (even).
    """
    return _out(refpos.encodings.sandwich_bias(_positions_in(q_positions), _positions_in(k_positions), head_dim,
                                               n_heads, causal=causal))


def xpos(q: np.ndarray, k: np.ndarray, q_positions: np.ndarray, k_positions: np.ndarray, base: float = 10000.0,
         scale_base: float = 512.0) -> tuple[np.ndarray, np.ndarray]:
    """xPos ``(q_rot, k_rot)``, each ``(H, T, d)``: interleaved RoPE (pairs (2i, 2i+1), θ_i = base^(-2i/d)),
    q times ``ζ_i^((m - c)/γ)``, k divided by ``ζ_i^((n - c)/γ)``, ``ζ_i = (2i + 0.4d)/(1.4d)``,
    ``γ = scale_base``, ``c = len(k_positions) // 2`` (c cancels in ``q_rot · k_rot``).
    """
    center = len(k_positions) // 2
    q_rot = refpos.encodings.xpos.xpos(_f64(q), _positions_in(q_positions), is_query=True, base=base,
                                       scale_base=scale_base, center=center)
    k_rot = refpos.encodings.xpos.xpos(_f64(k), _positions_in(k_positions), is_query=False, base=base,
                                       scale_base=scale_base, center=center)
    return _out(q_rot), _out(k_rot)


def cope_positions(gates: np.ndarray, npos: int) -> np.ndarray:
    """CoPE positions ``p[..., i, j] = min(Σ_{t >= j} gates[..., i, t], npos - 1)`` (gates 0 on future keys)."""
    return _out(refpos.encodings.cope_positions(_f64(gates), npos))


def cope_logits(q: np.ndarray, k: np.ndarray, e: np.ndarray, gates: np.ndarray | None = None) -> np.ndarray:
    """CoPE causal self-attention logits ``(H, T, T)`` = ``(q_i·k_j + pos_ij)/√d``, future keys ``-inf``.

    q, k ``(H, T, d)``, e ``(d, npos)``. Gates ``σ(q_i·k_j/√d)`` on ``j <= i`` (or ``gates``, ``(T, T)``
    or ``(H, T, T)``, when given); ``p`` from :func:`cope_positions`; ``pos_ij`` interpolates
    ``z_i = q_i e`` linearly between columns ``floor(p_ij)`` and ``ceil(p_ij)``.
    """
    t = q.shape[-2]
    xp = get_xp()
    pos = xp.arange(t, dtype=xp.int64)
    return _out(refpos.encodings.cope_logits(_f64(q), _f64(k), _f64(e), pos, pos,
                                             gates=None if gates is None else _f64(gates)))


def deberta_log_buckets(relative: np.ndarray, position_buckets: int, max_relative_positions: int) -> np.ndarray:
    """DeBERTa-v2 log bucket (int64, same shape) of ``δ = relative = query position − key position``: ``δ`` where
    ``|δ| <= mid = position_buckets // 2``, else ``sign(δ)·(mid + ceil(ln(|δ|/mid) / ln((m − 1)/mid)·(mid − 1)))``,
    ``m = max_relative_positions``. ``position_buckets < 2`` or ``m <= mid + 1`` raise ValueError naming them."""
    return _out(refpos.encodings.deberta_log_buckets(_positions_in(relative), position_buckets, max_relative_positions))


def deberta_attention_logits(q: np.ndarray, k: np.ndarray, pos_key: np.ndarray | None, pos_query: np.ndarray | None,
                             position_buckets: int, max_relative_positions: int, pos_att_type: list[str],
                             positions: np.ndarray | None = None) -> np.ndarray:
    """DeBERTa disentangled self-attention logits ``(H, T, T)`` = ``(q_i·k_j + c2p_ij + p2c_ij)/√(d·(1 + n))``,
    ``n = len(pos_att_type)`` (entries ``"c2p"``, ``"p2c"``): ``c2p_ij = q_i·pos_key[h, idx_ij]``,
    ``p2c_ij = k_j·pos_query[h, idx_ij]``, ``idx_ij = clip(b(pos[i] − pos[j]) + s, 0, 2s − 1)`` with
    ``s = position_buckets`` if ``> 0`` (b: :func:`deberta_log_buckets`) else ``max_relative_positions``
    (b the identity). q, k ``(H, T, d)``; pos_key, pos_query ``(H, 2s, d)``, ``None`` when their term is absent;
    ``positions`` ``(T,)`` defaults to ``arange(T)``.
    """
    pos = _in(np.arange(q.shape[-2])) if positions is None else _positions_in(positions)
    return _out(refpos.encodings.deberta_attention_logits(_f64(q), _f64(k), _in(pos_key, np.float64), _in(pos_query,
                                                                                                          np.float64),
                                                          pos, pos, pos_att_type=list(pos_att_type),
                                                          position_buckets=position_buckets,
                                                          max_relative_positions=max_relative_positions))


# ------------------------------------------------------------------------------- RoPE --------
# RoPE configurations cross the adapter as plain dicts (the contract): the keys of a transformers v5
# ``rope_parameters`` entry (rope_type, rope_theta, factor, original_max_position_embeddings, beta_fast,
# beta_slow, mscale, mscale_all_dim, attention_factor, truncate, low_freq_factor, high_freq_factor,
# short_factor, long_factor) plus head_dim, partial_rotary_factor or rotary_dim, max_position_embeddings,
# layout ("half" | "interleaved" | "deinterleaved"), placement ("first" | "last" | "proportional") and the
# refpos extensions dynamic_rule ("hf" | "vllm_static"), softmax_mscale (bool). Unknown keys: ValueError.
#
# ``seq_len`` is the current sequence length L that dynamic NTK and LongRoPE depend on. ``None`` means
# HF's ``max(positions) + 1`` over all positions given (for rope_frequencies, which has no positions:
# "unknown", i.e. plain RoPE for dynamic and the short factors for longrope, as HF at initialisation).
def _rope(rope: dict) -> refpos.RopeConfig:
    return refpos.rope_config_from_params(rope)


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """``(inv_freq, attention_factor)``: ω of shape ``(d/2,)`` (``(head_dim/2,)`` for proportional) and A."""
    inv_freq, factor = refpos.rope_frequencies(_rope(rope), seq_len=seq_len, xp=get_xp())
    return _out(inv_freq), float(factor)


def rope_cos_sin(positions: np.ndarray, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(A·cos φ, A·sin φ)``, each ``(*positions.shape, w)``, w = d (head_dim for proportional).

    Channel order: half and deinterleaved ``[c_0 … c_{m-1}, c_0 … c_{m-1}]``, interleaved
    ``[c_0, c_0, c_1, c_1, …]``; ``φ = p·ω_j`` in float64.
    """
    cos, sin = refpos.rope_cos_sin(_positions_in(positions), _rope(rope), seq_len=seq_len)
    return _out(cos), _out(sin)


def apply_rope(x: np.ndarray, positions: np.ndarray, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """Rotated ``x`` ``(..., T, head_dim)`` at ``positions`` ``(T,)`` (or ``(..., T)``): the layout's pairs in
    the rotated span times A, pass-through channels unchanged. seq_len None: ``max(positions) + 1``."""
    return _out(refpos.apply_rope(_f64(x), _positions_in(positions), _rope(rope), seq_len=seq_len))


def apply_rope_complex(x: np.ndarray, positions: np.ndarray, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """:func:`apply_rope` evaluated in complex form, ``z' = A·exp(i p ω)·z`` (Meta's form)."""
    return _out(refpos.rope.apply_rope_complex(_f64(x), _positions_in(positions), _rope(rope), seq_len=seq_len))


def rope_rotation_matrix(position: int, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """The ``(head_dim, head_dim)`` matrix M with ``apply_rope(x, [p]) = M @ x``; seq_len None: p + 1."""
    return _out(refpos.rope.rope_rotation_matrix(position, _rope(rope), seq_len=seq_len, xp=get_xp()))


def rope_layout_permutation(d: int) -> np.ndarray:
    """Index ``perm`` (int64, ``(d,)``) with ``x_half = x_interleaved[perm]``: the Meta → HF q/k row
    permutation of one head, ``perm[c·d/2 + j] = 2j + c``; ``apply_half(x[perm]) = apply_interleaved(x)[perm]``."""
    return _out(interleaved_to_half_permutation(d, xp=get_xp()))


def rope_permute_qk_heads(w: np.ndarray, n_heads: int, to: str = "half", axis: int = -1) -> np.ndarray:
    """Permute ``w``'s ``n_heads·head_dim`` entries along ``axis`` per head: ``to="half"`` Meta → HF,
    ``to="interleaved"`` HF → Meta (llama.cpp)."""
    return _out(permute_qk_heads(_f64(w), n_heads, to=to, axis=axis))


def rope_softmax_multiplier(rope: dict) -> float:
    """DeepSeek MLA softmax-scale multiplier ``mscale(s, mscale_all_dim)²`` (yarn with mscale_all_dim), else 1."""
    return float(softmax_multiplier(_rope(rope)))


def rope_attention_logits(
    q: np.ndarray,
    k: np.ndarray,
    q_positions: np.ndarray,
    k_positions: np.ndarray,
    rope: dict,
    seq_len: int | None = None,
) -> np.ndarray:
    """Scaled logits ``(H, Tq, Tk)`` = ``(R q)·(R k)ᵀ · head_dim^-1/2`` (× the DeepSeek multiplier when
    ``softmax_mscale``); q ``(H, Tq, D)``, k ``(H, Tk, D)``; seq_len None: max over both positions + 1."""
    enc = Rope(_rope(rope), seq_len=seq_len)
    q_rot, k_rot = enc.rotate(_f64(q), _f64(k), _positions_in(q_positions), _positions_in(k_positions))
    xp = get_xp()
    return _out(xp.matmul(q_rot, xp.matrix_transpose(k_rot)) * enc.softmax_scale(q.shape[-1]))


def rope_dynamic_ntk_frequencies(rope: dict, seq_lens: list[int]) -> np.ndarray:
    """transformers' stateful dynamic NTK: the ω ``(len(seq_lens), d/2)`` used by each call of a fresh rotary
    module called with lengths ``seq_lens`` in order (growth above the cached length, reset below L_max)."""
    state = DynamicNTKState(_rope(rope), xp=get_xp())
    return np.stack([_out(state.update(int(n))) for n in seq_lens]) if seq_lens else np.zeros((0, 0))


def rope_params_from_hf_config(config: dict, layer_type: str | None = None) -> dict:
    """The resolved RoPE of a transformers ``config.json`` dict, as an adapter-contract dict (every key set,
    factor and original_max_position_embeddings resolved as HF 5.24.0 does; rope_theta a float)."""
    return refpos.models.from_hf_config(config, layer_type=layer_type).to_params()


# M-RoPE (docs/mrope.md): the rope dict may carry ``mrope_section`` [s_t, s_h, s_w] (or [s_t, s_h, s_w, s_e], ggml's
# four rows) and ``mrope_interleaved``; rope_cos_sin / apply_rope then take positions (3, ..., T), rows t, h, w
# (or (4, ..., T) with the fourth row e; (T,) for all rows equal).
def mrope_position_ids(layout: list, family: str, spatial_merge_size: int = 2,
                       tokens_per_second: float | None = None) -> np.ndarray:
    """The ``(3, T)`` M-RoPE ids (rows t, h, w) of a multimodal layout, as transformers' ``get_rope_index``.

    ``layout`` is a list of ``("text", n)``, ``("image", (t, h, w))`` and ``("video", (t, h, w),
    seconds_per_grid)`` (grids in patches, before the spatial merge); ``family`` one of ``"qwen2_vl"``,
    ``"qwen2_5_vl"``, ``"qwen3_vl"``, ``"glm4v"``.
    """
    from refpos.models.mm_positions import Image, Text, Video, mm_position_ids

    make = {"text": lambda n: Text(n), "image": lambda g: Image(tuple(g)),
            "video": lambda g, s=1.0: Video(tuple(g), seconds_per_grid=s)}
    spans = []
    for item in layout:
        if not isinstance(item, (list, tuple)) or not item or item[0] not in make:
            raise ValueError(f"layout items are ('text', n), ('image', grid) or ('video', grid, seconds); got {item!r}")
        spans.append(make[item[0]](*item[1:]))
    return _out(mm_position_ids(spans, family=family, spatial_merge_size=spatial_merge_size,
                                tokens_per_second=tokens_per_second, xp=get_xp()))
