"""What the two lucidrains RoPE adapters (rotary-embedding-torch, x-transformers) share: both libraries
rotate interleaved pairs of the first ``dim`` channels and know only ``default`` and ``linear`` RoPE, and
both hand their float32 angles ``(..., T, d)`` (each pair's angle repeated) to their own rotation."""

from __future__ import annotations

import numpy as np
import torch

from spec_tests.adapters._contract import check_rope_keys, rotary_width


def supported_rotary(rope: dict, library: str) -> tuple[str, int, float]:
    """``(rope_type, rotary_dim, linear factor)`` of a contract dict such a library can run.

    Unknown keys raise ``ValueError``; what the library cannot express raises ``NotImplementedError``
    (the suite turns that into a skip with the reason).
    """
    check_rope_keys(rope, library)
    kind = rope.get("rope_type", "default")
    if kind not in ("default", "linear"):
        raise NotImplementedError(f"rope_type {kind!r}: {library} has linear interpolation only")
    if rope.get("layout", "half") != "interleaved":  # a dict without "layout" means the contract default, half
        raise NotImplementedError(f"{library} rotates interleaved pairs only")
    if rope.get("placement", "first") != "first":
        raise NotImplementedError(f"{library} rotates the first channels")
    d = rotary_width(rope)
    if d == 2:  # a finding: both constructors compute a rescale factor ** (dim / (dim - 2))
        raise NotImplementedError("RotaryEmbedding(dim=2) raises ZeroDivisionError (dim / (dim - 2))")
    factor = float(rope.get("factor", 1.0)) if kind == "linear" else 1.0
    return kind, d, factor


def cos_sin(angles: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the library's float32 angles, in its interleaved order ``[c_0, c_0, c_1, c_1, …]``."""
    return angles.cos().double().numpy(), angles.sin().double().numpy()


def over_heads(angles: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``angles`` with a head axis per missing dimension: ``(B, T)`` positions give angles ``(B, T, d)``,
    broadcast over the heads of ``x`` ``(B, H, T, D)`` as ``(B, 1, T, d)``."""
    while angles.ndim < x.ndim:
        angles = angles.unsqueeze(-3)
    return angles
