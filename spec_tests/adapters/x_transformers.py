"""Adapter: lucidrains/x-transformers (``AlibiPositionalBias``, ``RelativePositionBias``, ``RotaryEmbedding``).

Run the suite on it (known divergences in ``x_transformers.xfails.txt``)::

    REFPOS_IMPL=spec_tests.adapters.x_transformers python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/x_transformers.xfails.txt

* ALiBi: the module's float32 ``slopes`` buffer and ``forward(i, j)``, which builds the *symmetric* form
  ``−m_h·|i − j|`` with queries aligned to the end of the keys (the causal form is the same on the
  causal triangle and needs the mask; the library builds no unmasked causal or key-index form).
* T5: ``RelativePositionBias._relative_position_bucket`` (its ``causal`` is the contract's
  ``not bidirectional``).
* RoPE: ``RotaryEmbedding.forward`` (float32 angles, positions divided by ``interpolation_factor``) and
  ``apply_rotary_pos_emb`` (interleaved pairs of the first ``dim`` channels); ``default`` and ``linear``.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np
import torch
from x_transformers import x_transformers as xt

from spec_tests.adapters._contract import alibi_form
from spec_tests.adapters._interleaved_rope import cos_sin, over_heads, supported_rotary

INFO: dict[str, Any] = {
    "name": f"x-transformers {importlib.metadata.version('x-transformers')}",
    "dtype": "float32",
    "rope_layout": "interleaved",
    # what the library implements: the strategies draw only these (interleaved pairs of the first channels)
    "rope_types": ["default", "linear"],
    "rope_layouts": ["interleaved"],
    "rope_placements": ["first"],
    "description": "spec_tests/adapters/x_transformers.py: ALiBi, T5 buckets, rotary of x_transformers",
}


# --------------------------------------------------------------------------------------------- ALiBi
def _alibi(n_heads: int) -> Any:
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    return xt.AlibiPositionalBias(heads=n_heads)


def alibi_slopes(n_heads: int) -> np.ndarray:
    """The float32 ``slopes`` buffer the module multiplies with."""
    return _alibi(n_heads).slopes.reshape(-1).double().numpy()


def alibi_bias(n_heads: int, q_len: int, k_len: int, form: str = "causal") -> np.ndarray:
    """``forward(q_len, k_len)``: the symmetric form only."""
    alibi_form(form, "symmetric", "x-transformers")
    module = _alibi(n_heads)
    return module(q_len, k_len).double().numpy()  # (H, Tq, Tk)


# ------------------------------------------------------------------------------------------------ T5
def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128) -> np.ndarray:
    """``RelativePositionBias._relative_position_bucket`` of ``key − query`` (validates nothing)."""
    rel = torch.as_tensor(np.asarray(relative_position, dtype=np.int64))
    buckets = xt.RelativePositionBias._relative_position_bucket(
        rel, causal=not bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    return torch.as_tensor(buckets).numpy().astype(np.int64)


# ---------------------------------------------------------------------------------------------- RoPE
def _rotary(rope: dict) -> tuple[Any, int]:
    _, d, factor = supported_rotary(rope, "x-transformers")
    if factor < 1:
        raise NotImplementedError("x-transformers asserts interpolation_factor >= 1")
    return xt.RotaryEmbedding(d, base=rope.get("rope_theta", 10000.0), interpolation_factor=factor), d


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """The float32 ``inv_freq`` buffer divided by ``interpolation_factor``; A = 1."""
    module, _ = _rotary(rope)
    return (module.inv_freq.double() / module.interpolation_factor).numpy(), 1.0


def _freqs(positions, rope: dict) -> torch.Tensor:
    module, _ = _rotary(rope)
    pos = torch.as_tensor(np.asarray(positions, dtype=np.int64))
    freqs, _ = module(pos.reshape(-1, pos.shape[-1]) if pos.ndim else pos.reshape(1, 1))  # (B, T, d)
    return freqs.reshape(*pos.shape, freqs.shape[-1]) if pos.ndim else freqs.reshape(-1)


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the module's angles, interleaved order ``[c_0, c_0, c_1, c_1, …]``."""
    return cos_sin(_freqs(positions, rope))


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``apply_rotary_pos_emb(x, freqs)`` in float32 on the first d channels."""
    xt_ = torch.as_tensor(np.asarray(x, dtype=np.float32))
    shape = xt_.shape
    freqs = over_heads(_freqs(positions, rope), xt_)  # (..., T, d), a head axis for (B, T) positions
    freqs = torch.broadcast_to(freqs, (*xt_.shape[:-1], freqs.shape[-1])).reshape(-1, shape[-2], freqs.shape[-1])
    flat = xt_.reshape(-1, shape[-2], shape[-1])  # (N, T, D): the library's (b, n, d) form
    return xt.apply_rotary_pos_emb(flat, freqs).reshape(shape).double().numpy()
