"""Adapter: litgpt's RoPE (``litgpt/model.py``: ``build_rope_cache``, ``apply_rope``).

Run::

    REFPOS_IMPL=spec_tests.adapters.litgpt python -m pytest spec_tests \
        --xfails-file spec_tests/adapters/litgpt.xfails.txt

litgpt builds one cos/sin table for positions ``0 … N−1`` in float32 (``build_rope_cache``: θ_j from
``base ** (arange(0, n_elem, 2) / n_elem)``, angles ``outer(positions, θ)``, the half layout's
``[c_0 … c_{m-1}, c_0 … c_{m-1}]`` order) and its model indexes the table with the input positions
(``batched_index_select``), which this adapter does with ``N = max(positions) + 1``. The scaling rules
are the ones ``build_rope_cache`` takes through ``extra_config``: ``linear`` (``factor``), ``llama3``
(``factor``, ``low_freq_factor``, ``high_freq_factor``, ``original_max_seq_len``) and ``yarn``
(``beta_fast``, ``beta_slow``, ``mscale``, ``mscale_all_dim``, ``truncate``). Partial rotary is
litgpt's ``rotary_percentage``: the first ``rope_n_elem = int(rotary_percentage · head_size)`` channels
are rotated (``CausalSelfAttention.forward``), the rest pass through.

Not in litgpt, so ``NotImplementedError``: the ``ntk``, ``dynamic``, ``longrope`` and ``proportional``
rules, YaRN's explicit ``attention_factor``, the ``last`` placement, the ``interleaved`` layout (litgpt's
``apply_rope_interleave`` returns the rotated pairs in the half order, the contract's ``deinterleaved``
layout), every function outside RoPE.
"""

from __future__ import annotations

from importlib.metadata import version

import numpy as np
import torch
from litgpt.model import apply_rope as litgpt_apply_rope
from litgpt.model import apply_rope_interleave as litgpt_apply_rope_interleave
from litgpt.model import batched_index_select, build_rope_cache

INFO = {
    "name": f"litgpt {version('litgpt')} + torch {torch.__version__}",
    "dtype": "float32",  # build_rope_cache computes θ and the angles in float32 (`.float()`)
    "rope_layout": "half",
    "rope_types": ["default", "linear", "llama3", "yarn"],
    "rope_layouts": ["half", "deinterleaved"],
    "rope_placements": ["first"],
    "description": "spec_tests/adapters/litgpt.py: litgpt.model.build_rope_cache + apply_rope",
}

KNOWN_ROPE_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional")
KNOWN_ROPE_KEYS = {"rope_type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
                   "mscale", "mscale_all_dim", "attention_factor", "truncate", "low_freq_factor", "high_freq_factor",
                   "short_factor", "long_factor", "head_dim", "partial_rotary_factor", "rotary_dim",
                   "max_position_embeddings", "layout", "placement", "dynamic_rule", "softmax_mscale",
                   "short_mscale", "long_mscale", "mrope_section", "mrope_interleaved"}


def _positions(positions):
    p = np.asarray(positions)
    if p.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers, got dtype {p.dtype}")
    if p.size and p.min() < 0:
        raise ValueError(f"positions must be >= 0, got {p.min()}")
    return p.astype(np.int64)


def _setup(rope):
    """(rotated width n_elem, base, extra_config, layout) of a contract rope dict, for build_rope_cache."""
    kind = rope.get("rope_type", "default")
    if kind not in KNOWN_ROPE_TYPES:
        raise ValueError(f"rope_type must be one of {KNOWN_ROPE_TYPES}, got {kind!r}")
    unknown = set(rope) - KNOWN_ROPE_KEYS
    if unknown:
        raise ValueError(f"unknown rope keys {sorted(unknown)}")
    if kind not in ("default", "linear", "llama3", "yarn"):
        raise NotImplementedError(f"rope_type {kind!r}: litgpt's build_rope_cache has default, linear, llama3, yarn")
    if rope.get("mrope_section") is not None:
        raise NotImplementedError("M-RoPE (mrope_section): litgpt turns every pair by one position")
    layout = rope.get("layout", "half")  # the contract's default when a dict names none
    if layout not in ("half", "interleaved", "deinterleaved"):
        raise ValueError(f"layout must be 'half', 'interleaved' or 'deinterleaved', got {layout!r}")
    if layout == "interleaved":
        raise NotImplementedError("layout 'interleaved': litgpt's apply_rope_interleave returns the half order")
    placement = rope.get("placement", "first")
    if placement not in ("first", "last", "proportional"):
        raise ValueError(f"placement must be 'first', 'last' or 'proportional', got {placement!r}")
    if placement != "first":
        raise NotImplementedError(f"placement {placement!r}: litgpt rotates the first rope_n_elem channels")
    head_dim = rope["head_dim"]
    n_elem = rope.get("rotary_dim") or int(head_dim * rope.get("partial_rotary_factor", 1.0))
    if n_elem % 2 or not 0 < n_elem <= head_dim:
        raise ValueError(f"rotary size must be even and in (0, head_dim], got {n_elem}")
    base = float(rope.get("rope_theta", 10000.0))
    if not base > 0:
        raise ValueError(f"rope_theta must be > 0, got {base}")
    if kind == "default":
        return n_elem, base, None, layout
    factor = float(rope.get("factor", 1.0))
    if not factor >= 1:
        raise ValueError(f"factor must be >= 1, got {factor}")
    if kind == "linear":
        return n_elem, base, {"factor": factor}, layout
    original = rope.get("original_max_position_embeddings")
    if original is None:
        raise ValueError(f"original_max_position_embeddings is required for rope_type {kind!r}")
    if kind == "llama3":
        low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
        if not 0 < low < high:
            raise ValueError(f"low_freq_factor must be in (0, high_freq_factor), got {low}, {high}")
        return n_elem, base, {"factor": factor, "low_freq_factor": low, "high_freq_factor": high,
                              "original_max_seq_len": original}, layout
    if rope.get("attention_factor") is not None:
        raise NotImplementedError("yarn attention_factor: litgpt derives A from mscale / mscale_all_dim only")
    extra = {"factor": factor, "beta_fast": rope.get("beta_fast", 32.0), "beta_slow": rope.get("beta_slow", 1.0),
             "original_max_seq_len": original, "truncate": rope.get("truncate", True)}
    for key in ("mscale", "mscale_all_dim"):
        if rope.get(key) is not None:
            extra[key] = rope[key]
    return n_elem, base, extra, layout


def _cache(rope, n_positions):
    n_elem, base, extra, layout = _setup(rope)
    cos, sin = build_rope_cache(seq_len=n_positions, n_elem=n_elem, base=base, extra_config=extra)
    return n_elem, layout, cos, sin  # each (n_positions, n_elem), float32


def rope_cos_sin(positions, rope, seq_len=None):
    """litgpt's cos/sin table (times A) at the positions: ``(*positions.shape, n_elem)``."""
    pos = _positions(positions)
    _, _, cos, sin = _cache(rope, int(pos.max()) + 1 if pos.size else 1)
    index = torch.from_numpy(pos.reshape(-1))  # (P,)
    out_shape = (*pos.shape, cos.shape[-1])
    return (cos[index].double().numpy().reshape(out_shape), sin[index].double().numpy().reshape(out_shape))


def apply_rope(x, positions, rope, seq_len=None):
    """litgpt's ``apply_rope`` (or ``apply_rope_interleave``) on the first n_elem channels, the rest unchanged."""
    pos = _positions(positions)
    x = np.asarray(x)
    if pos.ndim == 2 and not (x.ndim == 4 and pos.shape[0] == x.shape[0]):
        raise ValueError(f"(B, T) positions need x (B, H, T, D), got positions {pos.shape}, x {x.shape}")
    if pos.ndim not in (1, 2) or pos.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions must be (T,) or (B, T) with T = x.shape[-2], got {pos.shape} for x {x.shape}")
    n_elem, layout, cos, sin = _cache(rope, int(pos.max()) + 1 if pos.size else 1)
    index = torch.from_numpy(pos)
    cos_at = batched_index_select(cos, 0, index)  # (T, n_elem) or (B, T, n_elem)
    sin_at = batched_index_select(sin, 0, index)
    if pos.ndim == 1:
        cos_at, sin_at = cos_at.unsqueeze(0), sin_at.unsqueeze(0)  # (1, T, n_elem)
        xt = torch.from_numpy(x.reshape(-1, *x.shape[-2:])).float()  # (N, T, D): every leading axis at once
    else:
        xt = torch.from_numpy(x).float()  # (B, H, T, D)
    rotate = litgpt_apply_rope_interleave if layout == "deinterleaved" else litgpt_apply_rope
    roped = rotate(xt[..., :n_elem], cos_at, sin_at)
    out = torch.cat((roped, xt[..., n_elem:]), dim=-1).double().numpy()
    return out.reshape(x.shape)
