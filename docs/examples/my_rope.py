"""my_rope: a float32 RoPE as a new inference engine might write it, behind the refpos adapter contract.

Plain (default) and llama3 RoPE, half or interleaved pairs, the rotated channels first. A configuration the
contract defines but this code does not implement raises NotImplementedError (the spec suite reports a
skip); one the contract does not define raises ValueError, and float positions TypeError (bad input).
"""
import math

import numpy as np

INFO = {"name": "my_rope", "dtype": "float32", "rope_layout": "half",
        # what this code implements: the suite draws only these, and skips the M-RoPE tests
        "rope_types": ["default", "llama3"], "rope_layouts": ["half", "interleaved"],
        "rope_placements": ["first"], "mrope": []}

# the names the contract defines (spec_tests/README.md, "RoPE configurations"): another one is bad input
ROPE_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "yarn_log", "llama3", "longrope", "proportional")
LAYOUTS = ("half", "interleaved", "deinterleaved")
PLACEMENTS = ("first", "last", "head", "tail", "proportional")


def _rotary_dim(rope):
    if rope.get("rotary_dim") is not None:
        d = int(rope["rotary_dim"])
    else:
        d = int(rope["head_dim"] * (rope.get("partial_rotary_factor") or 1.0))
    if d < 2 or d % 2 or d > rope["head_dim"]:
        raise ValueError(f"rotary_dim must be even, >= 2 and <= head_dim, got {d}")
    return d


def _check(rope):
    """The rope dict's names: one the contract does not define is ValueError, one not implemented here
    NotImplementedError."""
    kind = rope.get("rope_type", "default")
    layout, placement = rope.get("layout", "half"), rope.get("placement", "first")
    if kind not in ROPE_TYPES or layout not in LAYOUTS or placement not in PLACEMENTS:
        raise ValueError(f"rope_type, layout or placement not in the contract: {kind!r}, {layout!r}, {placement!r}")
    if kind not in ("default", "llama3") or layout not in ("half", "interleaved") or placement not in ("first", "head"):
        raise NotImplementedError(f"rope_type {kind!r}, layout {layout!r}, placement {placement!r}")
    if rope.get("mrope_section") is not None:
        raise NotImplementedError("M-RoPE (mrope_section)")
    return kind


def rope_frequencies(rope, seq_len=None):
    kind = _check(rope)
    d = _rotary_dim(rope)
    theta = float(rope.get("rope_theta", 10000.0))
    if not theta > 0:
        raise ValueError(f"rope_theta must be > 0, got {theta}")
    # pow, cos and sin are evaluated in float64 and rounded to float32: NumPy's float32 versions differ in
    # the last bits between machines (AVX2 with NumPy 2.4, AVX-512 with NumPy 2.5), and the guide prints
    # numbers that must reproduce
    inv = (1.0 / theta ** (np.arange(0, d, 2) / d)).astype(np.float32)
    if kind == "llama3":
        s, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        l0 = rope["original_max_position_embeddings"]
        if not (s >= 1 and 0 < low <= high):
            raise ValueError(f"llama3 needs factor >= 1 and 0 < low_freq_factor <= high_freq_factor, got "
                             f"{s}, {low}, {high}")
        wavelen = 2 * math.pi / inv
        long, short = wavelen > l0 / low, wavelen < l0 / high          # scaled by 1/s; kept
        middle = ~(long | short)                                       # empty when low == high
        smooth = (l0 / wavelen[middle] - low) / (high - low)
        blended = inv.copy()
        blended[middle] = (1 - smooth) * inv[middle] / s + smooth * inv[middle]
        inv = np.where(long, inv / s, blended)
    return inv.astype(np.float32), 1.0


def apply_rope(x, positions, rope, seq_len=None):
    _check(rope)
    layout = rope.get("layout", "half")
    pos = np.asarray(positions)
    if pos.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers, got {pos.dtype}")
    if (pos < 0).any():
        raise ValueError("positions must be >= 0")
    inv, _ = rope_frequencies(rope, seq_len)                                  # A = 1 for these types
    x = np.asarray(x, dtype=np.float32)
    d = 2 * inv.size
    span, rest = x[..., :d], x[..., d:]
    angles = pos.astype(np.float32)[..., None] * inv                          # float32, as HF
    while angles.ndim < x.ndim:  # (B, T) positions with x (B, H, T, D): broadcast over the heads
        angles = np.expand_dims(angles, axis=-3)
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
        out = np.stack([u2, v2], axis=-1).reshape(u2.shape[:-1] + (d,))
    return np.concatenate([out, np.broadcast_to(rest, (*out.shape[:-1], rest.shape[-1]))], axis=-1)
