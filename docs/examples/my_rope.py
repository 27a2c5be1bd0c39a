"""my_rope: a float32 RoPE as a new inference engine might write it, behind the refpos adapter contract.

Plain (default) and llama3 RoPE, half or interleaved pairs, the rotated channels first. Everything else
raises NotImplementedError, which the spec suite reports as a skip.
"""
import math

import numpy as np

INFO = {"name": "my_rope", "dtype": "float32", "rope_layout": "half"}


def _rotary_dim(rope):
    if "rotary_dim" in rope:
        return int(rope["rotary_dim"])
    return int(rope["head_dim"] * rope.get("partial_rotary_factor", 1.0))


def rope_frequencies(rope, seq_len=None):
    kind = rope.get("rope_type", "default")
    d = _rotary_dim(rope)
    theta = float(rope.get("rope_theta", 10000.0))
    # pow, cos and sin are evaluated in float64 and rounded to float32: NumPy's float32 versions differ in
    # the last bits between machines (AVX2 with NumPy 2.4, AVX-512 with NumPy 2.5), and the guide prints
    # numbers that must reproduce
    inv = (1.0 / theta ** (np.arange(0, d, 2) / d)).astype(np.float32)
    if kind == "llama3":
        s, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        l0 = rope["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        smooth = (l0 / wavelen - low) / (high - low)
        blended = (1 - smooth) * inv / s + smooth * inv
        inv = np.where(wavelen > l0 / low, inv / s, np.where(wavelen < l0 / high, inv, blended))
    elif kind != "default":
        raise NotImplementedError(f"rope_type {kind!r}")
    return inv.astype(np.float32), 1.0


def apply_rope(x, positions, rope, seq_len=None):
    layout = rope.get("layout", "half")
    if layout not in ("half", "interleaved") or rope.get("placement", "first") not in ("first", "head"):
        raise NotImplementedError(f"layout {layout!r}, placement {rope.get('placement')!r}")
    inv, _ = rope_frequencies(rope, seq_len)                                  # A = 1 for these types
    x = np.asarray(x, dtype=np.float32)
    d = 2 * inv.size
    span, rest = x[..., :d], x[..., d:]
    angles = np.asarray(positions, dtype=np.float32)[..., None] * inv          # float32, as HF
    cos = np.cos(angles.astype(np.float64)).astype(np.float32)                  # (..., T, d/2)
    sin = np.sin(angles.astype(np.float64)).astype(np.float32)
    if layout == "half":
        u, v = span[..., : d // 2], span[..., d // 2 :]
    else:
        u, v = span[..., 0::2], span[..., 1::2]
    u2, v2 = u * cos - v * sin, v * cos + u * sin
    if layout == "half":
        out = np.concatenate([u2, v2], axis=-1)
    else:
        out = np.stack([u2, v2], axis=-1).reshape(span.shape)
    return np.concatenate([out, np.broadcast_to(rest, (*out.shape[:-1], rest.shape[-1]))], axis=-1)
