"""A complete small adapter, written from the math in NumPy (not from refpos): the template for yours.

Run the spec suite on it::

    REFPOS_IMPL=spec_tests.examples.numpy_adapter python -m pytest spec_tests

It provides the attention core, sinusoids, ALiBi, T5 buckets, DeBERTa's buckets and logits and RoPE
(``default`` and ``linear``, both layouts, head placement). Everything else it lacks: those tests are
reported as skipped, with the reason. A configuration it does not support raises ``NotImplementedError``,
which the suite also reports as a skip. Bad input raises ``ValueError`` naming the parameter, as the contract asks.
"""

from __future__ import annotations

import math

import numpy as np

INFO = {
    "name": "numpy example adapter",
    "dtype": "float64",  # the dtype of the computation: tolerances follow from it
    "rope_layout": "half",  # the default layout when a rope dict names none
    # what this adapter implements: the RoPE strategies draw only these, so no drawn example is wasted
    "rope_types": ["default", "linear"],
    "rope_layouts": ["half", "interleaved"],
    "rope_placements": ["first"],
    "description": "spec_tests/examples/numpy_adapter.py: a small independent NumPy implementation",
}


# ------------------------------------------------------------------------------------ attention core
def softmax(logits, mask=None, fully_masked="zeros"):
    """Softmax over the last axis; mask True = may attend; a fully masked row -> zeros (or NaN)."""
    if fully_masked not in ("zeros", "nan"):
        raise ValueError(f"fully_masked must be 'zeros' or 'nan', got {fully_masked!r}")
    s = np.asarray(logits, dtype=np.float64)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    row_max = s.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # all -inf: avoid (-inf) - (-inf)
    e = np.exp(s - row_max)
    z = e.sum(axis=-1, keepdims=True)
    if fully_masked == "nan":
        with np.errstate(invalid="ignore"):
            return e / z
    return np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)


def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None):
    """softmax(scale·q·kᵀ, softcapped, + bias, masked)·v; k and v may have fewer heads (GQA: h // n_rep)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_rep = q.shape[-3] // k.shape[-3]
    if q.shape[-3] != n_rep * k.shape[-3]:
        raise ValueError(f"q heads ({q.shape[-3]}) must be a multiple of k heads ({k.shape[-3]})")
    k, v = np.repeat(k, n_rep, axis=-3), np.repeat(v, n_rep, axis=-3)  # (..., H, Tk, d)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = scale * (q @ np.swapaxes(k, -1, -2))  # (..., H, Tq, Tk)
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    if bias is not None:
        s = s + bias
    allowed = np.ones(s.shape[-2:], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        t_q, t_k = s.shape[-2:]
        q_pos = np.arange(t_q) + (t_k - t_q)  # queries aligned to the end of the keys
        allowed = allowed & (np.arange(t_k)[None, :] <= q_pos[:, None])
    return softmax(s, mask=np.broadcast_to(allowed, s.shape)) @ v


# ------------------------------------------------------------------------------------------ sinusoid
def _positions(positions, name="positions"):
    p = np.asarray(positions)
    if p.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got dtype {p.dtype}")
    if p.size and p.min() < 0:
        raise ValueError(f"{name} must be >= 0, got {p.min()}")
    return p.astype(np.int64)


def sinusoidal(positions, dim, base=10000.0, layout="interleaved", spacing="paper"):
    """PE[p, 2k] = sin(p·ω_k), PE[p, 2k+1] = cos(p·ω_k) (interleaved) or [sin | cos] (concat)."""
    if dim < 2 or dim % 2:
        raise ValueError(f"dim must be even and >= 2, got {dim}")
    k = np.arange(dim // 2, dtype=np.float64)
    if spacing == "paper":
        omega = base ** (-2.0 * k / dim)
    elif spacing == "tensor2tensor":
        omega = np.exp(-k * math.log(base) / max(dim // 2 - 1, 1))
    else:
        raise ValueError(f"spacing must be 'paper' or 'tensor2tensor', got {spacing!r}")
    angles = _positions(positions).astype(np.float64)[..., None] * omega  # (..., dim/2)
    if layout == "interleaved":
        return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(*angles.shape[:-1], dim)
    if layout == "concat":
        return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
    raise ValueError(f"layout must be 'interleaved' or 'concat', got {layout!r}")


# --------------------------------------------------------------------------------------------- ALiBi
def alibi_slopes(n_heads):
    """The official recurrence: 2^(-8h/c) for the largest power of two c <= n, then every other slope
    of the 2c sequence."""
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")

    def geometric(c):
        start = 2.0 ** (-(2.0 ** -(math.log2(c) - 3)))  # 2^(-8/c), by the published operations
        return [start * start**h for h in range(c)]

    if n_heads & (n_heads - 1) == 0:
        return np.asarray(geometric(n_heads))
    c = 1 << (n_heads.bit_length() - 1)
    return np.asarray(geometric(c) + list(alibi_slopes(2 * c)[0::2][: n_heads - c]))


def alibi_bias(n_heads, q_len, k_len, form="causal"):
    """(H, Tq, Tk) bias, queries at the end of the keys: causal −m(i−j), symmetric −m|i−j|, key_index m·j."""
    m = alibi_slopes(n_heads)[:, None, None]
    i = np.arange(k_len - q_len, k_len, dtype=np.float64)[:, None]
    j = np.arange(k_len, dtype=np.float64)[None, :]
    if form == "causal":
        return -m * (i - j)
    if form == "symmetric":
        return -m * np.abs(i - j)
    if form == "key_index":
        return m * np.broadcast_to(j, (q_len, k_len))
    raise ValueError(f"form must be 'causal', 'symmetric' or 'key_index', got {form!r}")


# ------------------------------------------------------------------------------------------------ T5
def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """Mesh-TensorFlow buckets of rel = key − query: exact below max_exact, logarithmic up to max_distance."""
    rel = np.asarray(relative_position, dtype=np.int64)
    n_buckets = num_buckets
    out = np.zeros_like(rel)
    if bidirectional:
        if num_buckets % 2:
            raise ValueError(f"num_buckets must be even when bidirectional, got {num_buckets}")
        n_buckets //= 2
        out += (rel > 0) * n_buckets
        n = np.abs(rel)
    else:
        n = -np.minimum(rel, 0)
    max_exact = n_buckets // 2
    if max_distance <= max_exact:
        raise ValueError(f"max_distance must exceed {max_exact}, got {max_distance}")
    log_ratio = np.log(np.maximum(n, 1) / max_exact) / math.log(max_distance / max_exact)
    large = np.minimum(max_exact + np.trunc(log_ratio * (n_buckets - max_exact)).astype(np.int64), n_buckets - 1)
    return out + np.where(n < max_exact, n, large)


# ------------------------------------------------------------------------------------------- DeBERTa
def deberta_log_buckets(relative, position_buckets, max_relative_positions):
    """DeBERTa-v2 buckets of δ = query − key: δ near (|δ| <= mid), logarithmic beyond, rounded up."""
    delta = np.asarray(relative, dtype=np.int64)
    mid = position_buckets // 2
    if position_buckets < 2:
        raise ValueError(f"position_buckets must be >= 2, got {position_buckets}")
    if max_relative_positions <= mid + 1:
        raise ValueError(f"max_relative_positions must exceed position_buckets // 2 + 1, got {max_relative_positions}")
    far = np.maximum(np.abs(delta), mid).astype(np.float64)
    # both logarithms by np.log: at |δ| = m − 1 the ratio is then exactly 1 (math.log may differ by an ulp)
    ratio = np.log(far / mid) / np.log(np.full_like(far, (max_relative_positions - 1) / mid))
    return np.where(np.abs(delta) <= mid, delta, np.sign(delta) * (mid + np.ceil(ratio * (mid - 1)).astype(np.int64)))


def deberta_attention_logits(q, k, pos_key, pos_query, position_buckets, max_relative_positions, pos_att_type,
                             positions=None):
    """(q_i·k_j + q_i·K_r[idx_ij] + k_j·Q_r[idx_ij]) / √(d·(1 + n)), idx_ij = clip(b(i − j) + s, 0, 2s − 1)."""
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    if any(term not in ("c2p", "p2c") for term in pos_att_type) or len(set(pos_att_type)) != len(pos_att_type):
        raise ValueError(f"pos_att_type entries must be distinct 'c2p' / 'p2c', got {pos_att_type!r}")
    pos = np.arange(q.shape[-2]) if positions is None else np.asarray(positions, dtype=np.int64)
    delta = pos[:, None] - pos[None, :]  # (T, T): query minus key
    if position_buckets > 0:
        span, delta = position_buckets, deberta_log_buckets(delta, position_buckets, max_relative_positions)
    else:
        span = max_relative_positions
    index = np.clip(delta + span, 0, 2 * span - 1)  # (T, T)
    scores = q @ np.swapaxes(k, -1, -2)  # (H, T, T)
    if "c2p" in pos_att_type:
        scores = scores + np.einsum("hid,hijd->hij", q, np.asarray(pos_key)[:, index])
    if "p2c" in pos_att_type:
        scores = scores + np.einsum("hjd,hijd->hij", k, np.asarray(pos_query)[:, index])
    return scores / math.sqrt(q.shape[-1] * (1 + len(pos_att_type)))


# ---------------------------------------------------------------------------------------------- RoPE
KNOWN_ROPE_TYPES = (
    "default", "linear", "ntk", "dynamic", "yarn", "yarn_log", "llama3", "longrope", "proportional")
#: contract keys; those of other rope types (beta_fast, short_factor, ...) do not change default/linear
KNOWN_ROPE_KEYS = {"rope_type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
                   "mscale", "mscale_all_dim", "attention_factor", "truncate", "low_freq_factor", "high_freq_factor",
                   "short_factor", "long_factor", "head_dim", "partial_rotary_factor", "rotary_dim",
                   "max_position_embeddings", "layout", "placement", "dynamic_rule", "softmax_mscale",
                   "short_mscale", "long_mscale", "ntk_rule", "mixed_b", "extrapolation_factor", "mrope_section",
                   "mrope_interleaved", "mrope_assignment", "angle_sign"}


def _sign(rope):
    """The direction every pair turns (``angle_sign``: 1, or -1 for φ = −p·ω_j)."""
    sign = rope.get("angle_sign", 1)
    if sign not in (1, -1) or isinstance(sign, bool):
        raise ValueError(f"angle_sign must be 1 or -1, got {sign!r}")
    return sign


def _rope_setup(rope):
    """(rotary size d, θ, ω scale, layout); NotImplementedError for what this example does not cover."""
    kind = rope.get("rope_type", "default")
    if kind not in KNOWN_ROPE_TYPES:
        raise ValueError(f"rope_type must be one of {KNOWN_ROPE_TYPES}, got {kind!r}")
    if kind not in ("default", "linear"):
        raise NotImplementedError(f"rope_type {kind!r} (only 'default' and 'linear')")
    unknown = set(rope) - KNOWN_ROPE_KEYS
    if unknown:
        raise ValueError(f"unknown rope keys {sorted(unknown)}")
    if rope.get("mrope_section") is not None:
        raise NotImplementedError("M-RoPE (mrope_section)")
    if rope.get("placement", "first") != "first":
        raise NotImplementedError(f"placement {rope['placement']!r}")
    head_dim = rope["head_dim"]
    d = rope.get("rotary_dim") or int(head_dim * rope.get("partial_rotary_factor", 1.0))
    layout = rope.get("layout", "half")  # the contract's default when a dict names none
    if layout not in ("half", "interleaved", "deinterleaved"):
        raise ValueError(f"layout must be 'half', 'interleaved' or 'deinterleaved', got {layout!r}")
    if layout == "deinterleaved":
        raise NotImplementedError("layout 'deinterleaved'")
    if d % 2 or not 0 < d <= head_dim:
        raise ValueError(f"rotary size must be even and in (0, head_dim], got {d}")
    factor = rope.get("factor", 1.0) if kind == "linear" else 1.0
    if factor < 1:
        raise ValueError(f"factor must be >= 1, got {factor}")
    theta = float(rope.get("rope_theta", 10000.0))
    if not theta > 0:
        raise ValueError(f"rope_theta must be > 0, got {theta}")
    return d, theta, factor, layout


def rope_frequencies(rope, seq_len=None):
    """ω_j = θ^(-2j/d) (divided by the factor for linear); attention factor 1."""
    d, theta, factor, _ = _rope_setup(rope)
    return theta ** (-np.arange(0, d, 2, dtype=np.float64) / d) / factor, 1.0


def rope_cos_sin(positions, rope, seq_len=None):
    """cos and sin of s·p·ω_j in the layout's channel order (half: [c, c]; interleaved: c0 c0 c1 c1 …)."""
    _, _, _, layout = _rope_setup(rope)
    inv_freq, _ = rope_frequencies(rope)
    angles = _sign(rope) * _positions(positions).astype(np.float64)[..., None] * inv_freq  # (..., T, d/2)
    if layout == "half":
        return np.concatenate([np.cos(angles)] * 2, axis=-1), np.concatenate([np.sin(angles)] * 2, axis=-1)
    return np.repeat(np.cos(angles), 2, axis=-1), np.repeat(np.sin(angles), 2, axis=-1)


def apply_rope(x, positions, rope, seq_len=None):
    """Rotate the first d channels pairwise: (u, v) -> (u cos φ − v sin φ, v cos φ + u sin φ), φ = s·p·ω_j."""
    d, _, _, layout = _rope_setup(rope)
    x = np.asarray(x, dtype=np.float64)
    inv_freq, _ = rope_frequencies(rope)
    pos = _positions(positions)
    while pos.ndim < x.ndim - 1:  # (B, T) position ids with x (B, H, T, D): broadcast over heads
        pos = np.expand_dims(pos, axis=-2)
    angles = _sign(rope) * pos.astype(np.float64)[..., None] * inv_freq  # (..., T, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    span, rest = x[..., :d], x[..., d:]
    if layout == "half":
        u, v = span[..., : d // 2], span[..., d // 2 :]
        rotated = np.concatenate([u * cos - v * sin, v * cos + u * sin], axis=-1)
    else:
        u, v = span[..., 0::2], span[..., 1::2]
        rotated = np.stack([u * cos - v * sin, v * cos + u * sin], axis=-1).reshape(span.shape)
    return np.concatenate([rotated, rest], axis=-1)
