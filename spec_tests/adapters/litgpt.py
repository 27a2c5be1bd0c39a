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
layout), ``rope_frequencies`` (ω and A are locals of ``build_rope_cache``: the tests that need them
for a tolerance use the reference's), every encoding outside RoPE.

The attention core is ``CausalSelfAttention.scaled_dot_product_attention`` of a small litgpt
``Config`` (``head_size`` d, ``attention_scores_scalar`` = scale⁻², ``attention_logit_softcapping``),
called the way ``CausalSelfAttention.forward`` calls it: kv heads ``repeat_interleave``-d over their
query heads (head h reads ``h // q_per_kv``); a causal call of ``T_q = T_k`` without a mask is litgpt's
prefill (``mask=None``: SDPA's ``is_causal``, or the softcap path's upper-triangular ``finfo.min``
mask); a causal call of ``T_q < T_k`` is its kv-cache decode, the rows ``T_k − T_q … T_k − 1`` of
``build_mask_cache`` as a boolean mask; a contract mask (or none: all True) is passed as that boolean
mask. litgpt adds no bias, so a bias and ``causal`` together with a mask are ``NotImplementedError``.
With a softcap, litgpt's path adds the mask to the scores (``scores + mask``): a boolean mask adds 1 to
the allowed keys and masks nothing, so litgpt's kv-cache call with a softcap reads masked keys
(measured: 2 heads, d = 8, T_k = 5, softcap 2: max |diff| 1.07 against the contract with a random mask,
0.437 for the causal call with T_q = 3; 2.1e-7 without a mask). The softcap test of
spec_tests/test_attention.py fails on it: an entry of ``litgpt.xfails.txt``.
"""

from __future__ import annotations

import functools
from importlib.metadata import version

import numpy as np
import torch
from litgpt.config import Config
from litgpt.model import CausalSelfAttention, batched_index_select, build_mask_cache, build_rope_cache
from litgpt.model import apply_rope as litgpt_apply_rope
from litgpt.model import apply_rope_interleave as litgpt_apply_rope_interleave

from refpos.rope.rules import ROPE_TYPES
from spec_tests.adapters._contract import (
    adapter_info,
    attention_shapes,
    batch_of_heads,
    integer_positions,
    kind_and_layout,
    rope_inputs,
    rope_settings,
    rotary_width,
)

INFO = adapter_info(
    f"litgpt {version('litgpt')} + torch {torch.__version__}",
    "float32",  # build_rope_cache computes θ and the angles in float32 (`.float()`)
    "spec_tests/adapters/litgpt.py: litgpt.model.build_rope_cache, apply_rope and the attention's SDPA call",
    rope_types=["default", "linear", "llama3", "yarn"],
    rope_layouts=["half", "deinterleaved"],
    rope_placements=["first"],
)

#: the contract's rope types (every rule of refpos's registry); those litgpt's build_rope_cache has are wired
KNOWN_ROPE_TYPES = ROPE_TYPES


def _setup(rope: dict) -> tuple[int, float, dict | None, str]:
    """(rotated width n_elem, base, extra_config, layout) of a contract rope dict, for build_rope_cache."""
    rope = rope_settings(rope, "litgpt")  # unknown keys: ValueError; M-RoPE: NotImplementedError
    kind = rope.get("rope_type", "default")
    if kind not in KNOWN_ROPE_TYPES:
        raise ValueError(f"rope_type must be one of {KNOWN_ROPE_TYPES}, got {kind!r}")
    if kind not in ("default", "linear", "llama3", "yarn"):
        raise NotImplementedError(f"rope_type {kind!r}: litgpt's build_rope_cache has default, linear, llama3, yarn")
    layout = rope.get("layout", "half")
    if layout not in ("half", "interleaved", "deinterleaved"):
        raise ValueError(f"layout must be 'half', 'interleaved' or 'deinterleaved', got {layout!r}")
    placement = rope.get("placement", "first")
    if placement not in ("first", "last", "proportional"):
        raise ValueError(f"placement must be 'first', 'last' or 'proportional', got {placement!r}")
    if placement == "proportional":
        raise NotImplementedError("placement 'proportional': litgpt rotates the first rope_n_elem channels")
    # litgpt's apply_rope_interleave returns the half order: the contract's deinterleaved layout
    kind, layout = kind_and_layout(rope, "litgpt", ("half", "deinterleaved"))
    n_elem = rotary_width(rope)  # litgpt: rope_n_elem = int(rotary_percentage * head_size)
    if n_elem % 2 or not 0 < n_elem <= int(rope["head_dim"]):
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
        if not 0 < low <= high:  # equal: no blended band (Llama 4), which litgpt computes
            raise ValueError(f"low_freq_factor must be in (0, high_freq_factor], got {low}, {high}")
        return n_elem, base, {"factor": factor, "low_freq_factor": low, "high_freq_factor": high,
                              "original_max_seq_len": original}, layout
    if rope.get("attention_factor") is not None:
        raise NotImplementedError("yarn attention_factor: litgpt derives A from mscale / mscale_all_dim only")
    # build_rope_cache reads truncate (default True); GPT.rope_cache does not pass it on from rope_adjustments
    if not rope.get("beta_fast", 32.0) > rope.get("beta_slow", 1.0):  # YaRN's ramp, which litgpt does not check
        raise ValueError(f"beta_fast must exceed beta_slow, got {rope.get('beta_fast')}, {rope.get('beta_slow')}")
    extra = {"factor": factor, "beta_fast": rope.get("beta_fast", 32.0), "beta_slow": rope.get("beta_slow", 1.0),
             "original_max_seq_len": original, "truncate": rope.get("truncate", True)}
    for key in ("mscale", "mscale_all_dim"):
        if key in rope:
            extra[key] = rope[key]
    return n_elem, base, extra, layout


#: the most table rows the adapter asks litgpt for: build_rope_cache holds several (N, n_elem) float32 tensors at
#: once, about 20 GB for Llama 4's 10,485,760 positions (more than the test machine's memory)
MAX_CACHE_ROWS = 2**20


def _cache(rope: dict, n_positions: int) -> tuple[int, str, torch.Tensor, torch.Tensor]:
    """litgpt's cos/sin tables, each ``(n_positions, n_elem)`` float32, for positions ``0 … n_positions − 1``."""
    n_elem, base, extra, layout = _setup(rope)
    if n_positions > MAX_CACHE_ROWS:
        raise NotImplementedError(f"litgpt builds its table for every position 0 … {n_positions - 1}: more than "
                                  f"{MAX_CACHE_ROWS} rows does not fit the memory of a test run")
    cos, sin = build_rope_cache(seq_len=n_positions, n_elem=n_elem, base=base, extra_config=extra)
    return n_elem, layout, cos, sin


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of litgpt's table (times A) at the positions: ``(*positions.shape, n_elem)``, half order."""
    pos = integer_positions(positions, reject_negative=True)  # a table of rows 0 … N − 1
    _, _, cos, sin = _cache(rope, int(pos.max()) + 1 if pos.size else 1)
    rows = torch.from_numpy(pos.reshape(-1))  # (P,)
    out_shape = (*pos.shape, cos.shape[-1])
    return cos[rows].double().numpy().reshape(out_shape), sin[rows].double().numpy().reshape(out_shape)


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """litgpt's ``apply_rope`` (``apply_rope_interleave`` for deinterleaved) on the first n_elem channels
    with the table rows ``batched_index_select`` picks, the rest unchanged (``CausalSelfAttention.forward``)."""
    _setup(rope)  # the rope dict first: an M-RoPE dict is refused before its (3, T) positions are read
    x, pos = rope_inputs(x, positions)
    n_elem, layout, cos, sin = _cache(rope, int(pos.max()) + 1 if pos.size else 1)
    cos_at = batched_index_select(cos, 0, torch.from_numpy(pos))  # (T, n_elem) or (B, T, n_elem)
    sin_at = batched_index_select(sin, 0, torch.from_numpy(pos))
    if pos.ndim == 1:
        cos_at, sin_at = cos_at.unsqueeze(0), sin_at.unsqueeze(0)  # (1, T, n_elem)
        xt = torch.from_numpy(x.reshape(-1, *x.shape[-2:])).float()  # (N, T, D): every leading axis at once
    else:
        xt = torch.from_numpy(x).float()  # (B, H, T, D)
    rotate = litgpt_apply_rope_interleave if layout == "deinterleaved" else litgpt_apply_rope
    roped = rotate(xt[..., :n_elem], cos_at, sin_at)
    return torch.cat((roped, xt[..., n_elem:]), dim=-1).double().numpy().reshape(x.shape)


# ---------------------------------------------------------------------------------------- attention
@functools.lru_cache(maxsize=64)
def _attention_module(h: int, h_kv: int, d: int, scale: float | None, softcap: float | None) -> CausalSelfAttention:
    """litgpt's ``CausalSelfAttention`` of one geometry, built once (its projections are never used: only
    ``scaled_dot_product_attention`` is called, which reads the config)."""
    config = Config(n_layer=1, n_head=h, n_query_groups=h_kv, head_size=d, n_embd=h * d, rotary_percentage=1.0,
                    attention_scores_scalar=None if scale is None else scale**-2,  # scale = scalar^-1/2
                    attention_logit_softcapping=softcap)
    return CausalSelfAttention(config, block_idx=0)


@batch_of_heads  # the contract's (..., H, T, d), 3-D included, as the 4-D arrays the library takes
def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None) -> np.ndarray:
    """litgpt's ``CausalSelfAttention.scaled_dot_product_attention`` in float64 (see the module docstring
    for how each contract argument maps onto litgpt's prefill and kv-cache calls)."""
    if bias is not None:
        raise NotImplementedError("litgpt's attention adds no bias to the logits")
    if causal and mask is not None:
        raise NotImplementedError("litgpt passes either its causal mask or a given mask, not both")
    _, h, t_q, d, h_kv, t_k = attention_shapes(q, k, "litgpt", "(B, n_head, T, head_size)")
    qt, kt, vt = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    if scale is not None and not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    module = _attention_module(h, h_kv, d, scale, softcap)
    q_per_kv = h // h_kv
    kt, vt = kt.repeat_interleave(q_per_kv, dim=1), vt.repeat_interleave(q_per_kv, dim=1)  # (B, H, T_k, ·)
    if causal and t_q == t_k:
        allowed = None  # prefill: SDPA's is_causal, or the softcap path's own mask
    elif causal:
        rows = torch.arange(t_k - t_q, t_k)  # the queries' positions, at the end of the keys
        allowed = batched_index_select(build_mask_cache(t_k), 2, rows)  # (1, 1, T_q, T_k) bool
    elif mask is None:
        allowed = torch.ones(t_q, t_k, dtype=torch.bool)  # no mask: every key may be read
    else:
        allowed = torch.as_tensor(np.asarray(mask, dtype=bool))
    with torch.no_grad():
        out = module.scaled_dot_product_attention(qt, kt, vt, allowed)  # (B, T_q, H, dv)
    return out.transpose(1, 2).numpy()  # (B, H, T_q, dv)
