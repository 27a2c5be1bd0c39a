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

from spec_tests.adapters._interleaved_rope import cos_sin, over_heads, supported_rotary

INFO: dict[str, Any] = {
    "name": f"rotary-embedding-torch {getattr(rotary_embedding_torch, '__version__', '')}".strip(),
    "dtype": "float32",
    "rope_layout": "interleaved",
    # what the library implements: the strategies draw only these (interleaved pairs of the first channels)
    "rope_types": ["default", "linear"],
    "rope_layouts": ["interleaved"],
    "rope_placements": ["first"],
    "description": "spec_tests/adapters/rotary_embedding_torch.py: RotaryEmbedding.forward + apply_rotary_emb",
}


def _module(rope: dict) -> tuple[RotaryEmbedding, int]:
    _, d, factor = supported_rotary(rope, "rotary-embedding-torch")
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
    return cos_sin(_angles(positions, rope))


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``apply_rotary_emb(freqs, x)`` in float32: rotates the first d channels, the rest pass through."""
    xt = torch.as_tensor(np.asarray(x, dtype=np.float32))
    angles = over_heads(_angles(positions, rope), xt)  # (..., T, d), a head axis for (B, T) positions
    return apply_rotary_emb(angles, xt, freqs_seq_dim=-2).double().numpy()
