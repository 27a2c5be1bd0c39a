"""Adapter: keras-hub 0.32 on Keras 3 with the torch backend (CPU), float32.

Run the suite on it (known divergences in ``keras_hub.xfails.txt``; ``tox -e keras-hub`` installs it)::

    KERAS_BACKEND=torch REFPOS_IMPL=spec_tests.adapters.keras_hub python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/keras_hub.xfails.txt

What keras-hub implements, and what is wired:

* RoPE: ``keras_hub.layers.RotaryEmbedding`` — half-split pairs over the whole feature axis (its models
  slice a partial span themselves), ``rope_type`` ``"linear"`` (factor 1 is plain RoPE), ``"dynamic"``
  and ``"yarn"``. keras-hub's ``"dynamic"`` is a *static* base growth, ``ω / s^(d/(d−2))`` for every
  length, which is the contract's ``ntk`` rule, not transformers' dynamic NTK; it is wired as ``ntk``.
  YaRN multiplies cos and sin by ``0.1·ln s + 1`` (no ``mscale``, no ``attention_factor``). ω is
  ``_get_inverse_freq`` (float32), cos/sin ``_compute_cos_sin_embedding``, the rotation ``call(x,
  positions=...)``.
* M-RoPE (a rope dict with ``mrope_section``): Qwen3.5's ``_apply_mrope``
  (``keras_hub/src/models/qwen3_5/qwen3_5_attention.py``), the interleaved (round-robin) assignment in the
  half layout, ω from a plain ``RotaryEmbedding``'s ``_get_inverse_freq``, positions ``(batch, 4, T)``
  (row 0, the text position, is not read; the adapter fills it with t). ``apply_rope`` calls it on
  ``(1, T, N, D)``; ``rope_cos_sin`` is its rotation of a probe with 1 in each pair's first channel and 0
  in its second (the rotated pair is exactly ``(cos, sin)``). Contiguous sections, scaling rules and the
  position ids (keras-hub has no ``get_rope_index``) are not in keras-hub.
* Sinusoids: ``keras_hub.layers.SinePositionEncoding`` — interleaved (sin on even, cos on odd
  channels), paper spacing, ``max_wavelength`` = base.
* Learned table: ``keras_hub.layers.PositionEmbedding`` with its weights set to the table, ``call(x,
  positions=...)``.
* ALiBi: ``keras_hub.layers.AlibiBias`` adds ``m_h·(j − (T_k − 1))`` to the scores: the key-index form
  minus a constant per row (softmax cannot see it). The adapter adds ``m_h·(T_k − 1)`` back, from the
  layer's own slopes, and returns the key-index form; the causal and symmetric forms are not built.
* T5: ``T5MultiHeadAttention._relative_position_bucket`` and ``compute_bias`` (keras-hub's T5).
* Attention core: ``keras.ops.dot_product_attention`` (``(B, T, H, D)``), float32.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import importlib.metadata
from typing import Any

import keras
import numpy as np
from keras import ops
from keras_hub.layers import AlibiBias, PositionEmbedding, RotaryEmbedding, SinePositionEncoding
from keras_hub.src.models.qwen3_5.qwen3_5_attention import _apply_mrope
from keras_hub.src.models.t5.t5_multi_head_attention import T5MultiHeadAttention

from spec_tests.adapters._contract import (
    alibi_form,
    integer_positions,
    is_mrope,
    pair_probe,
    probe_tables,
    rope_settings,
    rotary_width,
)

INFO: dict[str, Any] = {
    "name": f"keras-hub {importlib.metadata.version('keras-hub')} + Keras {keras.__version__} "
            f"({keras.backend.backend()} backend)",
    "dtype": "float32",
    "rope_layout": "half",
    "rope_types": ["default", "linear", "ntk", "yarn"],
    "rope_layouts": ["half"],
    "rope_placements": [],
    "description": "spec_tests/adapters/keras_hub.py: keras_hub.layers and keras.ops.dot_product_attention",
}


def _np(x: Any) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), dtype=np.float64)


# --------------------------------------------------------------------------------------------- RoPE
def _layer(rope: dict) -> RotaryEmbedding:
    rope = rope_settings(rope, "keras-hub")  # unknown keys: ValueError; None values: unset
    kind = rope.get("rope_type", "default")
    if rope.get("layout", "half") != "half":
        raise NotImplementedError("keras-hub's RotaryEmbedding rotates half-split pairs only")
    head_dim = int(rope["head_dim"])
    if rotary_width(rope) != head_dim:
        raise NotImplementedError("keras-hub's RotaryEmbedding rotates the whole feature axis")
    theta = float(rope.get("rope_theta", 10000.0))
    if kind in ("default", "linear"):
        factor = float(rope.get("factor", 1.0)) if kind == "linear" else 1.0
        return RotaryEmbedding(max_wavelength=theta, scaling_factor=factor, rope_type="linear")
    if kind == "ntk":  # keras-hub's "dynamic": θ·s^(d/(d−2)) for every length
        return RotaryEmbedding(max_wavelength=theta, scaling_factor=float(rope["factor"]), rope_type="dynamic")
    if kind == "yarn":
        for key in ("attention_factor", "mscale", "mscale_all_dim"):
            if rope.get(key) is not None:
                raise NotImplementedError(f"keras-hub's YaRN has no {key!r} (its factor is 0.1·ln s + 1)")
        return RotaryEmbedding(max_wavelength=theta, scaling_factor=float(rope["factor"]), rope_type="yarn",
                               beta_fast=rope.get("beta_fast", 32.0), beta_slow=rope.get("beta_slow", 1.0),
                               original_max_position_embeddings=rope["original_max_position_embeddings"],
                               truncate=rope.get("truncate", True))
    raise NotImplementedError(f"rope_type {kind!r}: keras-hub has linear, static NTK ('dynamic') and yarn")


def _mrope_layer(rope: dict) -> tuple[RotaryEmbedding, dict]:
    """The plain ``RotaryEmbedding`` whose ω Qwen3.5's ``_apply_mrope`` reads, and the settled dict."""
    rope = rope_settings(rope, "keras-hub", mrope=True)  # unknown keys: ValueError; None values: unset
    if rope.get("rope_type", "default") != "default":
        raise NotImplementedError("keras-hub's _apply_mrope takes ω from _get_inverse_freq alone: no scaling rule")
    if not rope.get("mrope_interleaved"):
        raise NotImplementedError("keras-hub's M-RoPE (Qwen3.5's _apply_mrope) is the interleaved assignment only")
    if rope.get("layout", "half") != "half" or rope.get("placement", "first") != "first":
        raise NotImplementedError("keras-hub's _apply_mrope rotates half-split pairs of the x it is given")
    if rotary_width(rope) != int(rope["head_dim"]):
        raise NotImplementedError("keras-hub's _apply_mrope rotates the whole x it is given (its model slices)")
    return RotaryEmbedding(max_wavelength=float(rope.get("rope_theta", 10000.0))), rope


def _mrope_rotate(x: np.ndarray, pos: np.ndarray, rope: dict) -> np.ndarray:
    """``_apply_mrope`` on x ``(..., T, D)`` at positions ``(T,)`` or ``(3, T)`` (others handed over as
    they are), one layer for the call; positions ``(3, B, T)`` with x ``(B, H, T, D)``: one batch row at a
    time."""
    layer, rope = _mrope_layer(rope)
    if pos.ndim == 3:
        return np.stack([_mrope_rows(layer, rope, x[b], pos[:, b]) for b in range(pos.shape[1])])
    return _mrope_rows(layer, rope, x, pos)


def _mrope_rows(layer: RotaryEmbedding, rope: dict, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """One ``_apply_mrope`` call: x moved to its ``(1, T, N, D)``, positions to its ``(1, 4, T)``."""
    if pos.ndim == 1:
        ids = np.broadcast_to(pos, (4, pos.shape[-1]))[None]  # (1, 4, T): t = h = w
    elif pos.ndim == 2 and pos.shape[0] == 3:
        ids = np.concatenate([pos[:1], pos])[None]  # (1, 4, T): row 0 (text) is not read
    else:
        ids = pos
    lead, (t, d) = x.shape[:-2], x.shape[-2:]
    x_rope = np.moveaxis(x.reshape(-1, t, d), 1, 0)[None]  # (1, T, N, D)
    out = _apply_mrope(ops.convert_to_tensor(x_rope), layer, ops.convert_to_tensor(ids.astype(np.int32)),
                       list(rope["mrope_section"]), d)
    return np.moveaxis(_np(out)[0], 0, 1).reshape(*lead, t, d)


def _mrope_cos_sin(pos: np.ndarray, rope: dict) -> tuple[np.ndarray, np.ndarray]:
    """``_apply_mrope``'s tables: the rotation of a :func:`~spec_tests.adapters._contract.pair_probe` (half
    layout, the whole head), broadcast over the batch rows of ``(3, B, T)`` positions."""
    d = int(rope["head_dim"])
    probe = pair_probe(pos.shape[-1], d, d, "half")  # (T, D)
    if pos.ndim == 3:
        probe = np.broadcast_to(probe, (pos.shape[1], *probe.shape))  # (B, T, D): one row per batch row
    return probe_tables(_mrope_rotate(probe, pos, rope), d, "half")


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """``_get_inverse_freq(head_dim)`` and the factor YaRN multiplies cos/sin with (1 otherwise)."""
    if is_mrope(rope):
        layer, _ = _mrope_layer(rope)
        return _np(layer._get_inverse_freq(int(rope["head_dim"]))), 1.0
    layer = _layer(rope)
    inv = _np(layer._get_inverse_freq(int(rope["head_dim"])))
    s = float(rope.get("factor") or 1.0)
    return inv, (0.1 * float(np.log(np.float32(s))) + 1.0) if rope.get("rope_type") == "yarn" else 1.0


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``_compute_cos_sin_embedding`` at the positions: ``[c, c]`` order, YaRN's factor included (M-RoPE:
    ``_apply_mrope``'s rotation of a probe)."""
    if is_mrope(rope):
        return _mrope_cos_sin(integer_positions(positions, reject_negative=False), rope)
    layer = _layer(rope)
    pos = integer_positions(positions, reject_negative=False)
    flat = pos.reshape(1, -1)  # (1, N): the layer's (batch, seq) positions
    dummy = ops.zeros((1, flat.shape[1], int(rope["head_dim"])))
    cos, sin = layer._compute_cos_sin_embedding(dummy, positions=ops.convert_to_tensor(flat))
    shape = (*pos.shape, int(rope["head_dim"]))
    return _np(cos).reshape(shape), _np(sin).reshape(shape)


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``RotaryEmbedding(sequence_axis=-2)(x, positions=...)`` in float32."""
    pos = integer_positions(positions, reject_negative=False)
    x = np.asarray(x, dtype=np.float32)
    if is_mrope(rope):
        return _mrope_rotate(x, pos, rope)
    base = _layer(rope)
    layer = RotaryEmbedding(max_wavelength=base.max_wavelength, scaling_factor=base.scaling_factor,
                            rope_type=base.rope_type, beta_fast=base.beta_fast, beta_slow=base.beta_slow,
                            original_max_position_embeddings=base.original_max_position_embeddings,
                            truncate=base.truncate, sequence_axis=-2, feature_axis=-1)
    if pos.ndim == 1:
        lead, (t, d) = x.shape[:-2], x.shape[-2:]
        xs = x.reshape(-1, t, d)  # (N, T, D): N plays the layer's batch axis
        out = layer(ops.convert_to_tensor(xs), positions=ops.convert_to_tensor(pos))
        return _np(out).reshape(*lead, t, d)
    if pos.ndim == 2 and x.ndim == 4:  # (B, T) with x (B, H, T, D): the layer broadcasts over H
        return _np(layer(ops.convert_to_tensor(x), positions=ops.convert_to_tensor(pos)))
    raise NotImplementedError(f"positions of shape {pos.shape} with x of shape {x.shape}")


# ----------------------------------------------------------------------------------- absolute tables
def sinusoidal(positions, dim, base=10000.0, layout="interleaved", spacing="paper") -> np.ndarray:
    """``SinePositionEncoding(max_wavelength=base)`` at the positions (interleaved, paper spacing)."""
    if (layout, spacing) != ("interleaved", "paper"):
        raise NotImplementedError("keras-hub's SinePositionEncoding is interleaved with paper spacing")
    pos = integer_positions(positions, reject_negative=False)
    flat = pos.reshape(1, -1).astype(np.float32)
    layer = SinePositionEncoding(max_wavelength=base)
    out = layer(ops.zeros((1, flat.shape[1], dim)), positions=ops.convert_to_tensor(flat))
    return _np(out).reshape(*pos.shape, dim)


def learned_lookup(table, positions) -> np.ndarray:
    """``PositionEmbedding`` with its weights set to ``table``, called with ``positions``."""
    table = np.asarray(table, dtype=np.float32)
    pos = integer_positions(positions, reject_negative=False)
    layer = PositionEmbedding(sequence_length=table.shape[0])
    layer.build((1, table.shape[0], table.shape[1]))
    layer.position_embeddings.assign(table)
    flat = pos.reshape(1, -1)
    out = layer(ops.zeros((1, flat.shape[1], table.shape[1])), positions=ops.convert_to_tensor(flat))
    return _np(out).reshape(*pos.shape, table.shape[1])


def alibi_slopes(n_heads: int) -> np.ndarray:
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    return np.asarray(AlibiBias()._get_slopes(n_heads), dtype=np.float64)


def alibi_bias(n_heads: int, q_len: int, k_len: int, form: str = "causal") -> np.ndarray:
    """The key-index form ``m_h·j``: ``AlibiBias()(zeros)`` = ``m_h·(j − (T_k − 1))``, plus ``m_h·(T_k − 1)``."""
    alibi_form(form, "key_index", "keras-hub's AlibiBias")
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    layer = AlibiBias()
    shifted = _np(layer(ops.zeros((1, n_heads, q_len, k_len))))[0]  # (H, Tq, Tk): m·(j − (Tk − 1))
    slopes = _np(ops.convert_to_tensor(np.asarray(layer._get_slopes(n_heads), dtype=np.float32)))
    return shifted + (slopes * (k_len - 1))[:, None, None]


# ------------------------------------------------------------------------------------------------ T5
def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128) -> np.ndarray:
    """``T5MultiHeadAttention._relative_position_bucket`` (validates nothing)."""
    rel = ops.convert_to_tensor(np.asarray(relative_position, dtype=np.int32))
    out = T5MultiHeadAttention._relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                                         max_distance=max_distance)
    return np.asarray(ops.convert_to_numpy(out)).astype(np.int64)


# ---------------------------------------------------------------------------------------- attention
def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None) -> np.ndarray:
    """``keras.ops.dot_product_attention`` on ``(B, T, H, D)``: bias, boolean mask, scale, ``is_causal``
    (its ``attn_logits_soft_cap`` runs only with JAX on TPU)."""
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    if q.ndim != 4:
        raise NotImplementedError("keras.ops.dot_product_attention takes (B, T, H, D)")
    t_q, t_k = q.shape[-2], k.shape[-2]
    args: dict[str, Any] = {"scale": scale, "is_causal": bool(causal)}
    full = (q.shape[0], q.shape[1], t_q, t_k)  # (B, H, Tq, Tk)
    if bias is not None:
        args["bias"] = ops.convert_to_tensor(np.broadcast_to(np.asarray(bias, np.float32), full).copy())
    if mask is not None:
        args["mask"] = ops.convert_to_tensor(np.broadcast_to(np.asarray(mask, bool), full).copy())
    if softcap is not None:  # keras 3's ValueError elsewhere: a limit of the op, not bad input
        raise NotImplementedError("keras.ops.dot_product_attention takes attn_logits_soft_cap only with JAX on TPU")
    qt, kt, vt = (ops.convert_to_tensor(np.swapaxes(a, 1, 2)) for a in (q, k, v))  # (B, T, H, D)
    out = ops.dot_product_attention(qt, kt, vt, **args)
    return np.swapaxes(_np(out), 1, 2)
