"""Adapter: RoPE and attention as JAX model code writes them, on JAX's CPU backend, jitted.

Run the suite on it (known divergences in ``jax_models.xfails.txt``; ``tox -e jax`` installs it)::

    refpos suite --impl spec_tests.adapters.jax_models --xfails-file spec_tests/adapters/jax_models.xfails.txt

JAX itself has no RoPE: every JAX model writes its own, so this adapter writes the two forms public JAX model
code uses, each the way its source computes it (every operation in the same order and dtype), under
``jax.jit`` as a model runs them. XLA compiles one program per shape and setting it meets: a first run pays
for the compilations.

* **Half layout** (``default``, ``linear``): the Gemma form, google-deepmind/gemma
  ``gemma/gm/math/_positional_embeddings.py``, ``apply_rope(inputs, positions, base_frequency,
  scale_factor)`` (the Flax Gemma example's ``positional_embeddings.py`` has the same function):
  ``timescale = θ^(2j/d)`` in float32, the angle ``positions / timescale`` (a division by the timescale,
  not a product with ω = 1/timescale), divided by ``scale_factor`` (the linear factor; < 1 refused), then
  the pairs ``(j, j + d/2)`` rotated as ``[x₁cos − x₂sin, x₂cos + x₁sin]``. Inputs ``[B, L, N, H]``,
  positions ``[B, L]``: contract positions ``(T,)`` are one batch row over every leading axis of ``x``,
  ``(B, T)`` positions the rows of ``x`` ``(B, H, T, D)``.
* **Interleaved layout** (``default``, ``llama3``): MaxText's ``LLaMARotaryEmbedding``
  (AI-Hypercomputer/maxtext ``src/MaxText/layers/embeddings.py``): ``timescale = min·(max/min)^(2j/d)``
  with ``min = 1``, ``max = θ``, each repeated over the two channels of its pair; with ``use_scale`` the
  Llama 3.1 rule of ``_apply_scaling_factor`` on ``1/timescale`` with its hard-coded numbers (factor 8, low
  1, high 4, original length 8192: declared in ``INFO["rope_constants"]``); the pairs ``(2j, 2j + 1)``
  rotated as ``x·cos + shifted(x)·sin·[−1, 1, …]``.

Neither form has a partial rotary width (``rope_placements`` empty) or a frequency function of its own:
``rope_frequencies`` is left out (the tests that need ω and A for a tolerance use the reference's), and
``rope_cos_sin`` is read from the rotation itself with the pair probe (``_contract.pair_probe``: a pair
``(1, 0)`` comes back as ``(cos φ, sin φ)``).

Attention: ``jax.nn.dot_product_attention`` (the XLA implementation; ``[B, T, N, H]``, GQA by head groups:
query head h reads kv head ``h // (N/K)``), float32 logits and softmax, masked logits set to
``−0.7·max`` float32 (not −inf). It wants values as wide as the queries: the narrower of the two is padded
with zero channels (exact: a zero channel adds nothing to a logit and is an output channel of its own, cut
off again), the scale given as ``d^(−1/2)`` of the unpadded width. ``is_causal`` builds ``tril`` of
``(T, S)`` and ``local_window_size = (w − 1, 0)`` a band on the same indices: both top-left aligned. No
softcap (``NotImplementedError``), no chunked local attention. Softmax: ``jax.nn.softmax(logits,
where=mask)``, which gives a fully masked row zeros; the ``"nan"`` policy is the same softmax of logits set
to −inf where masked (the form model code without ``where`` writes).
"""

from __future__ import annotations

import functools
import math
import os
from importlib.metadata import version
from typing import Any

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no accelerator probing

import jax
import jax.numpy as jnp

from spec_tests.adapters._contract import (
    adapter_info,
    integer_positions,
    kind_and_layout,
    pair_probe,
    probe_tables,
    rope_inputs,
    rope_settings,
    rotary_width,
)

#: MaxText's LLaMARotaryEmbedding._apply_scaling_factor: the Llama 3.1 numbers it hard-codes
LLAMA31 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}

INFO: dict[str, Any] = adapter_info(
    f"JAX {version('jax')} model code (Gemma apply_rope, MaxText LLaMARotaryEmbedding, jax.nn; CPU)", "float32",
    "spec_tests/adapters/jax_models.py: Gemma's apply_rope (half), MaxText's LLaMARotaryEmbedding (interleaved, "
    "llama3), jax.nn.dot_product_attention, jax.nn.softmax",
    rope_types=["default", "linear", "llama3"], rope_layouts=["half", "interleaved"], rope_placements=[])
INFO["mrope"] = []
INFO["rope_constants"] = {"llama3": dict(LLAMA31)}
INFO["setup"] = (
    "JAX on its CPU backend (`JAX_PLATFORMS=cpu`), float32 (`jax_enable_x64` off), every function under "
    "`jax.jit`: XLA compiles one program per shape and setting, so a first run compiles a few hundred. JAX has "
    "no RoPE of its own: the half layout is Gemma's `apply_rope` (google-deepmind/gemma, "
    "`gemma/gm/math/_positional_embeddings.py`; angles $p/\\theta^{2j/d}$, the linear factor as "
    "`scale_factor`), the interleaved layout MaxText's `LLaMARotaryEmbedding` (`src/MaxText/layers/embeddings.py`; "
    "llama3 with its hard-coded Llama 3.1 numbers), written in the adapter operation for operation; attention is "
    "`jax.nn.dot_product_attention` (XLA), softmax `jax.nn.softmax`.")


def _np(a: jax.Array) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


# --------------------------------------------------------------------------------------------- RoPE
@functools.partial(jax.jit, static_argnames=("base_frequency", "scale_factor"))
def _gemma_apply_rope(inputs: jax.Array, positions: jax.Array, *, base_frequency: float,
                      scale_factor: float) -> jax.Array:
    """Gemma's form: inputs ``[B, L, N, H]``, positions ``[B, L]``; angle = position / θ^(2j/H) / factor."""
    head_dim = inputs.shape[-1]
    fraction = 2 * jnp.arange(0, head_dim // 2) / head_dim  # 2j/H, float32
    timescale = base_frequency**fraction  # θ^(2j/H)
    angle = positions[..., jnp.newaxis] / timescale[jnp.newaxis, jnp.newaxis, :]  # [B, L, H/2]
    angle = angle[..., jnp.newaxis, :] / scale_factor  # [B, L, 1, H/2]: every head
    sin, cos = jnp.sin(angle), jnp.cos(angle)
    first, second = jnp.split(inputs, 2, axis=-1)  # the pairs (j, j + H/2)
    return jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1).astype(inputs.dtype)


def _llama31_frequency(freq: jax.Array) -> jax.Array:
    """MaxText's ``_apply_scaling_factor``, its two ``lax.cond`` as selects (vmap makes them selects too):
    λ = 2π/ω; λ < 8192/4 keeps ω, λ > 8192/1 gives ω/8, between them ``(1 − s)·ω/8 + s·ω`` with
    ``s = (8192/λ − 1)/(4 − 1)``."""
    factor, low, high, old = (LLAMA31[k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                   "original_max_position_embeddings"))
    wavelen = 2 * jnp.pi / freq
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * freq / factor + smooth * freq
    scaled = jnp.where(wavelen > old / low, freq / factor, blended)
    return jnp.where(wavelen < old / high, freq, scaled)


@functools.partial(jax.jit, static_argnames=("max_timescale", "use_scale"))
def _maxtext_llama_rope(inputs: jax.Array, position: jax.Array, *, max_timescale: float,
                        use_scale: bool) -> jax.Array:
    """MaxText's LLaMA form: inputs ``[B, S, N, H]``, position ``[B, S]``; pairs ``(2j, 2j + 1)``."""
    dims = inputs.shape[-1]
    fraction = jnp.repeat(2 * jnp.arange(0, dims // 2) / dims, 2)  # 2j/H on both channels of pair j
    timescale = 1.0 * (max_timescale / 1.0) ** fraction  # min·(max/min)^(2j/H), min = 1
    if use_scale:
        timescale = 1.0 / _llama31_frequency(1.0 / timescale)
    timescale = timescale[jnp.newaxis, jnp.newaxis, jnp.newaxis, :]
    left = jnp.concatenate([inputs[..., 1:], inputs[..., :1]], axis=-1)  # x[i + 1] at even i
    right = jnp.concatenate([inputs[..., -1:], inputs[..., :-1]], axis=-1)  # x[i − 1] at odd i
    odd = jnp.tile(jnp.mod(jnp.arange(dims, dtype=jnp.int32), 2), (*inputs.shape[:-1], 1))
    shifted = jax.lax.select(odd.astype(bool), right, left)
    angle = position[:, :, jnp.newaxis, jnp.newaxis] / timescale
    sign = jnp.tile(jnp.array([-1, 1]), dims // 2)
    return inputs * jnp.cos(angle) + shifted * jnp.sin(angle) * sign


def _setup(rope: dict) -> tuple[str, str, float, float]:
    """(rope_type, layout, θ, linear factor) of a contract rope dict the two forms compute."""
    rope = rope_settings(rope, "JAX model code")  # unknown keys: ValueError; M-RoPE: NotImplementedError
    kind, layout = kind_and_layout(rope, "JAX model code", ("half", "interleaved"))
    if rope.get("placement", "first") == "proportional" or rotary_width(rope) != int(rope["head_dim"]):
        raise NotImplementedError("Gemma's apply_rope and MaxText's LLaMARotaryEmbedding rotate the whole head")
    theta = float(rope.get("rope_theta", 10000.0))
    if not (math.isfinite(theta) and theta > 0):
        raise ValueError(f"rope_theta must be > 0 and finite, got {theta}")
    factor = float(rope.get("factor", 1.0)) if kind != "default" else 1.0
    if kind == "linear":
        if layout != "half":
            raise NotImplementedError("linear scaling is Gemma's scale_factor (half layout) only")
        if not factor >= 1:
            raise ValueError(f"factor must be >= 1 (Gemma: scale_factor must be >= 1.0), got {factor}")
    elif kind == "llama3":
        if layout != "interleaved":
            raise NotImplementedError("llama3 is MaxText's LLaMARotaryEmbedding (interleaved layout) only")
        given = {key: rope.get(key) for key in LLAMA31}
        low, high = given["low_freq_factor"], given["high_freq_factor"]
        if low is not None and high is not None and not 0 < low <= high:
            raise ValueError(f"low_freq_factor must be in (0, high_freq_factor], got {low}, {high}")
        if given["original_max_position_embeddings"] is None:
            raise ValueError("original_max_position_embeddings is required for rope_type 'llama3'")
        if any(value is not None and float(value) != LLAMA31[key] for key, value in given.items()):
            raise NotImplementedError(f"MaxText's Llama 3.1 scaling hard-codes {LLAMA31}, got {given}")
    elif kind != "default":
        raise NotImplementedError(f"rope_type {kind!r}: not in Gemma's apply_rope nor MaxText's LLaMA RoPE")
    return kind, layout, theta, factor


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """The form of the rope dict's layout (module docstring) on ``x`` at ``positions``, float32."""
    x, pos = rope_inputs(x, positions)
    kind, layout, theta, factor = _setup(rope)
    t, d = x.shape[-2:]
    lead = (x.shape[0], -1) if pos.ndim == 2 else (1, -1)  # [B, N, T, D]: one batch row per position row
    inputs = jnp.asarray(np.swapaxes(x.reshape(*lead, t, d), 1, 2), dtype=jnp.float32)  # [B, T, N, D]
    rows = jnp.asarray(pos.reshape(-1, t).astype(np.int32))  # [B, T]
    if layout == "half":
        out = _gemma_apply_rope(inputs, rows, base_frequency=theta, scale_factor=factor)
    else:
        out = _maxtext_llama_rope(inputs, rows, max_timescale=theta, use_scale=kind == "llama3")
    return np.swapaxes(_np(out), 1, 2).reshape(x.shape)


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin ``(*positions.shape, D)`` read from the rotation of the pair probe (module docstring)."""
    pos = integer_positions(positions, reject_negative=True)
    _, layout, _, _ = _setup(rope)
    d = int(rope["head_dim"])
    flat = pos.reshape(-1)
    rotated = apply_rope(pair_probe(flat.size, d, d, layout), flat, rope, seq_len)  # (P, D)
    cos, sin = probe_tables(rotated, d, layout)
    return cos.reshape(*pos.shape, d), sin.reshape(*pos.shape, d)


# ---------------------------------------------------------------------------------------- attention
@functools.partial(jax.jit, static_argnames=("scale", "is_causal", "local_window_size"))
def _sdpa(q, k, v, bias, mask, *, scale, is_causal, local_window_size):
    return jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask, scale=scale, is_causal=is_causal,
                                        local_window_size=local_window_size, implementation="xla")


def _attention(q, k, v, bias, mask, scale, causal, window) -> np.ndarray:
    """``jax.nn.dot_product_attention`` on contract ``(..., H, T, d)`` arrays (leading axes as its batch)."""
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    if q.ndim < 3 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(f"q, k, v must be (..., H, T, d) of one rank, got {q.shape}, {k.shape}, {v.shape}")
    h, t_q, h_kv, t_k = q.shape[-3], q.shape[-2], k.shape[-3], k.shape[-2]
    if h % h_kv:
        raise ValueError(f"q heads ({h}) must be a multiple of kv heads ({h_kv})")
    d, dv = q.shape[-1], v.shape[-1]
    scale = d**-0.5 if scale is None else float(scale)  # of the width before the padding below
    width = max(d, dv)  # the library wants one width: zero channels change no sum and no other output channel
    q, k, v = (np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, width - a.shape[-1])]) for a in (q, k, v))
    lead = q.shape[:-3]
    batch = int(np.prod(lead)) if lead else 1
    btnh = [jnp.asarray(np.swapaxes(a.reshape(batch, *a.shape[-3:]), 1, 2)) for a in (q, k, v)]
    full = (*lead, h, t_q, t_k)
    jbias = None if bias is None else jnp.asarray(
        np.broadcast_to(np.asarray(bias, dtype=np.float32), full).reshape(batch, h, t_q, t_k))
    jmask = None if mask is None else jnp.asarray(
        np.broadcast_to(np.asarray(mask, dtype=bool), full).reshape(batch, h, t_q, t_k))
    out = _sdpa(*btnh, jbias, jmask, scale=scale, is_causal=causal,
                local_window_size=None if window is None else (window - 1, 0))
    return np.swapaxes(_np(out), 1, 2).reshape(*lead, h, t_q, width)[..., :dv]


def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None) -> np.ndarray:
    """``jax.nn.dot_product_attention`` (module docstring): bias added, mask and ``is_causal`` applied."""
    if softcap is not None:
        raise NotImplementedError("jax.nn.dot_product_attention has no logit softcap")
    return _attention(q, k, v, bias, mask, scale, causal, None)


def local_attention(q, k, v, window=None, attention_chunk=None, scale=None, softcap=None) -> np.ndarray:
    """``jax.nn.dot_product_attention(is_causal=True, local_window_size=(window − 1, 0))``."""
    for name, value in (("window", window), ("attention_chunk", attention_chunk)):
        if value is not None and (not isinstance(value, (int, np.integer)) or value < 1):
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if attention_chunk is not None:
        raise NotImplementedError("jax.nn.dot_product_attention has no chunked local attention")
    if softcap is not None:
        raise NotImplementedError("jax.nn.dot_product_attention has no logit softcap")
    return _attention(q, k, v, None, None, scale, True, None if window is None else int(window))


@functools.partial(jax.jit, static_argnames=("where",))
def _softmax(logits, mask, *, where: bool):
    if where:
        return jax.nn.softmax(logits, axis=-1, where=mask)
    return jax.nn.softmax(jnp.where(mask, logits, -jnp.inf), axis=-1)


def softmax(logits, mask=None, fully_masked: str = "zeros") -> np.ndarray:
    """``jax.nn.softmax(logits, where=mask)`` (``"zeros"``), or of logits set to −inf where masked (``"nan"``)."""
    if fully_masked not in ("zeros", "nan"):
        raise ValueError(f"fully_masked must be 'zeros' or 'nan', got {fully_masked!r}")
    s = np.asarray(logits, dtype=np.float32)
    allowed = np.ones(s.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), s.shape)
    return _np(_softmax(jnp.asarray(s), jnp.asarray(allowed), where=fully_masked == "zeros"))
