"""Splitting and merging attention heads, and the grouped-query head mapping.

Query head ``h`` of ``Hq`` reads key/value head ``h // (Hq / Hkv)`` (HF ``repeat_kv``), not ``h % Hkv``.
"""

from __future__ import annotations

from refpos.backend import Array, array_namespace
from refpos.validation import check_width


def split_heads(x: Array, n_heads: int) -> Array:
    """``(..., T, H·d) -> (..., H, T, d)``."""
    xp = array_namespace(x)
    n_heads = check_width("n_heads", n_heads, what="heads")
    *lead, t, width = x.shape
    if width % n_heads:
        raise ValueError(f"the last axis ({width}) is not a multiple of n_heads={n_heads}")
    x = xp.reshape(x, (*lead, t, n_heads, width // n_heads))  # (..., T, H, d)
    return xp.moveaxis(x, -2, -3)  # (..., H, T, d)


def merge_heads(x: Array) -> Array:
    """``(..., H, T, d) -> (..., T, H·d)``, the inverse of :func:`split_heads`."""
    xp = array_namespace(x)
    *lead, h, t, d = x.shape
    x = xp.moveaxis(x, -3, -2)  # (..., T, H, d)
    return xp.reshape(x, (*lead, t, h * d))  # (..., T, H·d)


def repeat_kv(x: Array, n_heads: int) -> Array:
    """Expand ``(..., Hkv, T, d)`` to ``(..., n_heads, T, d)``: query head h reads kv head h // n_rep."""
    xp = array_namespace(x)
    n_heads = check_width("n_heads", n_heads, what="heads of T·d values each")
    h_kv = x.shape[-3]
    if n_heads % h_kv:
        raise ValueError(f"n_heads={n_heads} is not a multiple of the {h_kv} key/value heads")
    n_rep = n_heads // h_kv
    x = xp.expand_dims(x, axis=-3)  # (..., Hkv, 1, T, d)
    x = xp.broadcast_to(x, (*x.shape[:-3], n_rep, *x.shape[-2:]))  # (..., Hkv, n_rep, T, d)
    return xp.reshape(x, (*x.shape[:-4], n_heads, *x.shape[-2:]))  # (..., H, T, d)
