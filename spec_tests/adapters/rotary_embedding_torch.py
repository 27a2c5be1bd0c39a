"""Adapter: lucidrains/rotary-embedding-torch (``RotaryEmbedding``, ``apply_rotary_emb``), float32, CPU.

Run the suite on it (known divergences in ``rotary_embedding_torch.xfails.txt``)::

    REFPOS_IMPL=spec_tests.adapters.rotary_embedding_torch python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/rotary_embedding_torch.xfails.txt

The library rotates interleaved pairs ``(2j, 2j+1)`` of the first ``dim`` channels (head placement), with
``ω_j = θ^(-2j/d)`` in float32 and positions divided by ``interpolate_factor`` (linear scaling). It has
no other scaling rule and no half-split layout: those raise ``NotImplementedError`` (skips).
Its xPos (``use_xpos``) centres the exponent on the sequence it is given, which the contract's ``xpos``
cannot express for arbitrary positions, so it is not wired here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import rotary_embedding_torch
import torch
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

INFO: dict[str, Any] = {
    "name": f"rotary-embedding-torch {getattr(rotary_embedding_torch, '__version__', '')}".strip(),
    "dtype": "float32",
    "rope_layout": "interleaved",
    "description": "spec_tests/adapters/rotary_embedding_torch.py: RotaryEmbedding.forward + apply_rotary_emb",
}

#: contract keys; those of other rope types (beta_fast, short_factor, ...) do not change default/linear
CONTRACT_KEYS = {"rope_type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
                 "mscale", "mscale_all_dim", "attention_factor", "truncate", "low_freq_factor", "high_freq_factor",
                 "short_factor", "long_factor", "head_dim", "partial_rotary_factor", "rotary_dim",
                 "max_position_embeddings", "layout", "placement", "dynamic_rule", "softmax_mscale"}


def _module(rope: dict) -> tuple[RotaryEmbedding, int]:
    unknown = set(rope) - CONTRACT_KEYS
    if unknown:
        raise ValueError(f"unknown rope keys {sorted(unknown)}")
    kind = rope.get("rope_type", "default")
    if kind not in ("default", "linear"):
        raise NotImplementedError(f"rope_type {kind!r}: the library has only interpolate_factor (linear)")
    if rope.get("layout", "half") != "interleaved":  # a dict without "layout" means the contract default, half
        raise NotImplementedError("the library rotates interleaved pairs only")
    if rope.get("placement", "first") != "first":
        raise NotImplementedError("the library rotates the first channels (start_index=0)")
    head_dim = int(rope["head_dim"])
    d = rope.get("rotary_dim") or int(head_dim * rope.get("partial_rotary_factor", 1.0))
    if d == 2:  # a finding: the constructor computes theta_rescale_factor ** (dim / (dim - 2))
        raise NotImplementedError("RotaryEmbedding(dim=2) raises ZeroDivisionError (dim / (dim - 2))")
    factor = float(rope.get("factor", 1.0)) if kind == "linear" else 1.0
    module = RotaryEmbedding(dim=d, theta=rope.get("rope_theta", 10000.0), interpolate_factor=factor,
                             cache_if_possible=False)
    return module, d


def _angles(positions, rope: dict) -> torch.Tensor:
    """``RotaryEmbedding.forward`` on the positions divided by ``interpolate_factor`` (``get_seq_pos``'s
    rule, for arbitrary positions): float32 angles ``(..., T, d)``, each pair's angle repeated."""
    module, _ = _module(rope)
    pos = torch.as_tensor(np.asarray(positions, dtype=np.int64))
    return module(pos.to(torch.float32) / module.interpolate_factor)


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """The module's float32 ``freqs`` (divided by ``interpolate_factor``, its effective ω); A = 1."""
    module, _ = _module(rope)
    return (module.freqs.detach().to(torch.float64) / module.interpolate_factor).numpy(), 1.0


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the library's angles, interleaved order ``[c_0, c_0, c_1, c_1, …]``."""
    angles = _angles(positions, rope)
    return angles.cos().double().numpy(), angles.sin().double().numpy()


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``apply_rotary_emb(freqs, x)`` in float32: rotates the first d channels, the rest pass through."""
    angles = _angles(positions, rope)  # (..., T, d)
    xt = torch.as_tensor(np.asarray(x, dtype=np.float32))
    while angles.ndim < xt.ndim:  # (B, T) positions with x (B, H, T, D): broadcast over heads
        angles = angles.unsqueeze(-3)
    return apply_rotary_emb(angles, xt, freqs_seq_dim=-2).double().numpy()
