"""Adapter: MLX 0.32 + mlx-lm 0.32 on the Linux CPU wheels (``mx.fast.rope`` through mlx-lm's
``initialize_rope``, ``mx.fast.scaled_dot_product_attention``, ``mlx.nn`` sinusoids, ALiBi, Embedding).

Run the suite on it (known divergences in ``apple_mlx.xfails.txt``; ``tox -e mlx`` installs it)::

    REFPOS_IMPL=spec_tests.adapters.apple_mlx python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/apple_mlx.xfails.txt

What is wired, and how the contract's forms map onto MLX's:

* RoPE: ``mlx_lm.models.rope_utils.initialize_rope(dims, base, traditional, scaling_config,
  max_position_embeddings)``, the one entry point mlx-lm's models use: ``nn.RoPE`` (default, linear as
  ``scale = 1/factor``), ``DynamicNTKScalingRoPE``, ``Llama3RoPE``, ``YarnRoPE``, ``SuScaledRoPE``
  (longrope) and ``ProportionalRoPE``. Each calls the fused kernel ``mx.fast.rope(x, dims,
  traditional=..., offset=...)``: ``traditional=True`` is the interleaved layout, ``False`` the half
  layout; the first ``dims`` channels are rotated (placement ``first``). The kernel takes positions as
  ``offset + arange(T)``: arbitrary positions are split into runs of consecutive positions and each run
  is one call with its offset (the recipe of ``docs/write-an-adapter.md``). A dynamic module computes its
  base from ``T + offset`` of the call, so a ``seq_len`` other than ``max(positions) + 1`` cannot be
  expressed (``NotImplementedError``).
* ``rope_frequencies``: ``1 / module._freqs`` where the module holds its table (llama3, yarn, longrope,
  proportional; ``inf`` periods are the zero-frequency pairs) and its attention factor (YaRN's
  ``mscale``, LongRoPE's ``_scale``, multiplied into ``x``); for ``nn.RoPE`` and dynamic NTK the table
  lives inside the kernel: ``NotImplementedError``, and the suite uses the reference's ω for tolerances.
* Attention core: ``mx.fast.scaled_dot_product_attention`` (GQA native; ``mask="causal"`` or an
  additive float mask built from the boolean mask and the bias), float32.
* Sinusoids: ``mlx.nn.SinusoidalPositionalEncoding(dims, min_freq=1/base, max_freq=1, scale=1)`` —
  ``[sin | cos]`` (concat) with ω_k = exp(−k·ln(base)/(dims/2 − 1)) (tensor2tensor spacing) only.
* ALiBi: ``mlx.nn.ALiBi.create_alibi_slope`` and ``create_alibi_matrix``, which builds the symmetric
  form ``−m·|i − j|`` for query positions ``offset … q_len − 1``: queries aligned to the end of the keys
  are ``create_alibi_matrix(k_len, k_len, H, offset=k_len − q_len)``.
* Learned table: ``mlx.nn.Embedding`` with its weight set to the table (a GPT-2 style position table).
* Not in MLX / mlx-lm: T5 buckets, the relative encodings, static NTK.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx_lm.models.rope_utils import initialize_rope

from spec_tests.adapters._contract import (
    adapter_info,
    alibi_form,
    integer_positions,
    kind_and_layout,
    rope_settings,
    rotary_width,
)

#: mlx-lm's rope rules (initialize_rope), the kernel's two layouts, the first channels rotated
INFO: dict[str, Any] = adapter_info(
    f"MLX {importlib.metadata.version('mlx')} + mlx-lm {importlib.metadata.version('mlx-lm')} (CPU)", "float32",
    "spec_tests/adapters/apple_mlx.py: mx.fast.rope via mlx-lm initialize_rope, mx.fast SDPA, mlx.nn",
    rope_types=["default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional"],
    rope_layouts=["half", "interleaved"], rope_placements=["first"])

def _np(a: mx.array) -> np.ndarray:
    return np.array(a.astype(mx.float32), dtype=np.float64)


# --------------------------------------------------------------------------------------------- RoPE
def _module(rope: dict) -> tuple[Any, int, str]:
    """(mlx-lm rope module, rotated channels, kind) for a contract rope dict."""
    rope = rope_settings(rope, "mlx-lm")  # unknown keys: ValueError; None values: unset
    kind, layout = kind_and_layout(rope, "mx.fast.rope", ("half", "interleaved"))
    if rope.get("attention_factor") is not None:
        raise NotImplementedError("mlx-lm's rope modules take no explicit attention_factor")
    if rope.get("truncate", True) is not True:
        raise NotImplementedError("mlx-lm's YarnRoPE always truncates its ramp bounds (no truncate=False)")
    if rope.get("dynamic_rule", "hf") != "hf":
        raise NotImplementedError("mlx-lm's dynamic NTK is transformers' rule (L = T + offset)")
    head_dim = int(rope["head_dim"])
    dims = rotary_width(rope)
    config = {"rope_type": kind}
    for key in ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
                "mscale_all_dim", "low_freq_factor", "high_freq_factor", "short_factor", "long_factor"):
        if key in rope:
            config[key] = rope[key]
    if kind == "proportional":  # mlx-lm: dims = the head, rotated_dims = dims·partial_rotary_factor
        config["partial_rotary_factor"] = dims / head_dim
        dims = head_dim
    elif kind == "ntk":
        raise NotImplementedError("mlx-lm has no static NTK rule")
    if kind == "llama3":
        config.setdefault("original_max_position_embeddings", 8192)
    max_position = rope.get("max_position_embeddings")
    if kind == "longrope":
        if layout == "interleaved":  # SuScaledRoPE.__call__ passes traditional=False whatever it is given
            raise NotImplementedError("mlx-lm's SuScaledRoPE always rotates half-split pairs")
        if max_position is None and "factor" in rope and "original_max_position_embeddings" in rope:
            max_position = round(rope["factor"] * rope["original_max_position_embeddings"])  # HF's factor
    module = initialize_rope(dims, float(rope.get("rope_theta", 10000.0)), layout == "interleaved",
                             None if kind == "default" else config,
                             max_position_embeddings=max_position)
    return module, dims, kind


def _runs(positions: np.ndarray) -> list[tuple[int, int]]:
    """(start index, length) of the maximal runs of consecutive positions."""
    starts = [0] + [i for i in range(1, len(positions)) if positions[i] != positions[i - 1] + 1]
    return [(s, e - s) for s, e in zip(starts, [*starts[1:], len(positions)], strict=True)]


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """ω = 1 / ``module._freqs`` (the periods mlx-lm hands to ``mx.fast.rope``) and the factor it
    multiplies ``x`` with; modules whose table lives inside the kernel raise ``NotImplementedError``."""
    module, _, _ = _module(rope)
    periods = getattr(module, "_freqs", None)
    if periods is None:
        raise NotImplementedError(f"{type(module).__name__}'s frequencies live inside mx.fast.rope")
    inv = 1.0 / _np(periods)  # inf periods (proportional's unrotated pairs) give ω = 0
    factor = getattr(module, "mscale", None) or getattr(module, "_scale", None) or 1.0
    return inv, float(factor)


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """The mlx-lm module on ``x`` at ``positions``, one call per run of consecutive positions."""
    pos = integer_positions(positions, reject_negative=True)
    module, _, kind = _module(rope)
    x = np.asarray(x, dtype=np.float32)
    if pos.ndim == 2:  # (B, T) with x (B, H, T, D): one batch row at a time
        return np.stack([apply_rope(x[b], pos[b], rope, seq_len) for b in range(pos.shape[0])])
    top = int(pos.max()) + 1 if pos.size else 1
    if kind == "dynamic" and seq_len is not None and seq_len != top:
        raise NotImplementedError("mlx-lm's dynamic NTK takes L from the call (T + offset), not from seq_len")
    if kind == "dynamic" and len(_runs(pos)) > 1:
        raise NotImplementedError("mlx-lm's dynamic NTK needs one run of consecutive positions (L = T + offset)")
    lead, (t, d) = x.shape[:-2], x.shape[-2:]
    xs = mx.array(x.reshape(1, -1, t, d))  # (1, N, T, D): the kernel wants (B, *, T, D)
    parts = [module(xs[:, :, start:start + n], offset=int(pos[start])) for start, n in _runs(pos)]
    out = mx.concatenate(parts, axis=2) if parts else xs
    return _np(out).reshape(*lead, t, d)


# ---------------------------------------------------------------------------------------- attention
def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None) -> np.ndarray:
    """``mx.fast.scaled_dot_product_attention`` (float32): ``mask="causal"`` when only causal, else an
    additive mask = bias where allowed, −inf where masked."""
    if softcap is not None:
        raise NotImplementedError("mx.fast.scaled_dot_product_attention has no logit softcap")
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    if q.shape[-3] % k.shape[-3]:
        raise ValueError(f"q heads ({q.shape[-3]}) must be a multiple of kv heads ({k.shape[-3]})")
    lead = q.shape[:-3]
    q4, k4, v4 = (a.reshape(-1, *a.shape[-3:]) for a in (q, k, v))  # (B, H, T, d)
    t_q, t_k = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if bias is None and mask is None:
        mlx_mask = "causal" if causal else None
    else:
        allowed = np.ones((t_q, t_k), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if causal:
            allowed = allowed & (np.arange(t_k)[None, :] <= np.arange(t_q)[:, None] + (t_k - t_q))
        additive = np.where(allowed, 0.0 if bias is None else np.asarray(bias, dtype=np.float32), -np.inf)
        mlx_mask = mx.array(additive.astype(np.float32))
    out = mx.fast.scaled_dot_product_attention(mx.array(q4), mx.array(k4), mx.array(v4), scale=scale, mask=mlx_mask)
    return _np(out).reshape(*lead, *out.shape[-3:])


# ----------------------------------------------------------------------------------- absolute tables
def sinusoidal(positions, dim, base=10000.0, layout="interleaved", spacing="paper") -> np.ndarray:
    """``nn.SinusoidalPositionalEncoding(dim, min_freq=1/base, max_freq=1, scale=1)`` on the positions."""
    if layout != "concat" or spacing != "tensor2tensor":
        raise NotImplementedError("mlx.nn.SinusoidalPositionalEncoding is [sin | cos] with tensor2tensor spacing")
    if dim <= 0 or dim % 2:
        raise ValueError(f"dim must be even and >= 2, got {dim}")
    module = nn.SinusoidalPositionalEncoding(dim, min_freq=1.0 / base, max_freq=1.0, scale=1.0)
    pos = integer_positions(positions, reject_negative=True)
    return _np(module(mx.array(pos.astype(np.float32))))


def learned_lookup(table, positions) -> np.ndarray:
    """``nn.Embedding`` holding ``table`` as its weight, looked up at ``positions`` (MLX checks no bound)."""
    table = np.asarray(table, dtype=np.float32)
    embedding = nn.Embedding(*table.shape)
    embedding.weight = mx.array(table)
    return _np(embedding(mx.array(np.asarray(positions, dtype=np.int64).astype(np.int32))))


def alibi_slopes(n_heads: int) -> np.ndarray:
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    return _np(nn.ALiBi.create_alibi_slope(n_heads)).reshape(-1)


def alibi_bias(n_heads: int, q_len: int, k_len: int, form: str = "causal") -> np.ndarray:
    """The symmetric form: ``create_alibi_matrix(k_len, k_len, H, offset=k_len − q_len)`` (end-aligned)."""
    alibi_form(form, "symmetric", "mlx.nn.ALiBi")
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    if q_len > k_len:
        raise NotImplementedError("create_alibi_matrix puts the queries inside the keys (q_len <= k_len)")
    matrix = nn.ALiBi.create_alibi_matrix(k_len, k_len, n_heads, offset=k_len - q_len)  # (1, H, Tq, Tk)
    return _np(matrix)[0]
