"""Adapter: OpenVINO's CPU plugin on the graphs a converted transformers model holds (opset 13: RoPE as
the ``rotate_half`` graph the CPU plugin fuses into its ``RoPE`` kernel, ``ScaledDotProductAttention``,
``Softmax``).

Run the suite on it (known divergences in ``openvino.xfails.txt``; ``tox -e openvino`` installs it)::

    refpos suite --impl spec_tests.adapters.openvino --xfails-file spec_tests/adapters/openvino.xfails.txt

OpenVINO's public opsets have no RoPE operation: a RoPE reaches the runtime as the graph its converter emits
from the model's code, and the CPU plugin's ``RoPEFusion`` passes turn the recognised patterns into its
internal ``RoPE`` kernel (the compiled model's runtime graph lists a layer of type ``RoPE``). Each call here
builds that graph with ``openvino.opset13``, compiles it for ``CPU`` and runs it; compiled models are
cached per shape and setting. The CPU plugin computes in bf16 by default on CPUs with bf16 units (this
machine's Xeon: ``INFERENCE_PRECISION_HINT`` bf16, attention off by 6.6e-3 from float64); the adapter
sets the hint to ``f32``, the precision it declares.

* RoPE, the graph of transformers' ``LlamaRotaryEmbedding`` and ``apply_rotary_pos_emb``: ω computed in
  the graph (``Range``, ``Divide``, ``Power``: ``1 / θ^(2j/r)``, divided by the linear factor: the
  ``default`` and ``linear`` rules, the ones whose ω a model computes from the config alone; a converter
  stores every other rule's ``inv_freq`` as a constant the model's Python computed, so OpenVINO computes no
  other rule), angles ``inv_freq[None, :, None] @ position_ids[:, None, :]`` (``MatMul``), ``emb =
  [freqs | freqs]``, ``Cos``/``Sin``, then ``x·cos + rotate_half(x)·sin`` on the first ``r`` channels
  (``Slice``/``Concat`` for partial rotary), the half layout, fused into ``RoPE``. The interleaved
  layout is transformers' GPT-J graph (``rotate_every_two``: the pairs ``(2j, 2j + 1)``, cos/sin repeated
  per channel). ``rope_frequencies`` is the graph's ``inv_freq`` and ``rope_cos_sin`` its ``Cos``/``Sin``
  outputs. Positions ``(T,)`` are one batch row over every leading axis of ``x``; ``(B, T)`` the rows of
  ``x`` ``(B, H, T, D)`` (``position_ids``).
* Attention core: ``ScaledDotProductAttention(q, k, v, attention_mask, scale, causal)``, after
  transformers' ``repeat_kv`` (``Unsqueeze``, ``Broadcast``, ``Reshape``: head h reads kv head ``h //
  (H/H_kv)``); a bias and a boolean mask become one float mask (the bias where allowed, −inf where masked).
  No softcap. ``causal=True`` is OpenVINO's flag, whatever the lengths.
* Softmax: ``Softmax`` (opset 8, last axis) of the logits ``Select``-ed to −inf where masked.
* Not in OpenVINO's opsets: every other encoding of the contract.
"""

from __future__ import annotations

import functools
import math
from importlib.metadata import version
from typing import Any

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from spec_tests.adapters._contract import (
    adapter_info,
    integer_positions,
    kind_and_layout,
    rope_inputs,
    rope_settings,
    rotary_width,
)

INFO: dict[str, Any] = adapter_info(
    f"OpenVINO {version('openvino')} (CPU plugin, f32)", "float32",
    "spec_tests/adapters/openvino.py: opset13 graphs of transformers' RoPE (fused into the CPU plugin's RoPE), "
    "ScaledDotProductAttention, Softmax",
    rope_types=["default", "linear"], rope_layouts=["half", "interleaved"], rope_placements=["first"])
INFO["mrope"] = []
INFO["setup"] = (
    "OpenVINO's CPU plugin with `INFERENCE_PRECISION_HINT` f32: left at its default it computes in bf16 on CPUs "
    "with bf16 units (on the Xeon these runs used, attention off by 6.6e-3 from float64). OpenVINO has no public "
    "RoPE operation: the adapter builds, with `openvino.opset13`, the graph transformers' Llama RoPE converts to "
    "(ω from `Range`/`Power`/`Divide`, `MatMul` angles, `Cos`/`Sin`, `rotate_half`), which the plugin's "
    "`RoPEFusion` compiles into its `RoPE` kernel (the runtime graph lists a `RoPE` layer, partial rotary "
    "included); the interleaved layout, transformers' GPT-J graph, is not fused (element-wise subgraphs). "
    "Attention is `ScaledDotProductAttention` after transformers' `repeat_kv`; softmax `Softmax`. One compiled "
    "model per shape and setting, cached.")


@functools.cache
def _core() -> ov.Core:
    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_PRECISION_HINT": "f32"})  # the declared precision, not the CPU's bf16
    return core


def _compile(outputs: list, parameters: list) -> ov.CompiledModel:
    return _core().compile_model(ov.Model(outputs, parameters), "CPU")


def _i64(values) -> ov.Node:
    return ops.constant(np.asarray(values, dtype=np.int64))


def _f32(value) -> ov.Node:
    return ops.constant(np.asarray(value, dtype=np.float32))


def _np(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


# --------------------------------------------------------------------------------------------- RoPE
def _setup(rope: dict) -> tuple[str, int, float, float]:
    """(layout, rotated width r, θ, linear factor) of a contract rope dict."""
    rope = rope_settings(rope, "OpenVINO")  # unknown keys: ValueError; M-RoPE: NotImplementedError
    kind, layout = kind_and_layout(rope, "the converted RoPE graph", ("half", "interleaved"))
    if rope.get("placement", "first") == "proportional":
        raise NotImplementedError("placement 'proportional': the converted graph rotates the first channels")
    if kind not in ("default", "linear"):
        raise NotImplementedError(f"rope_type {kind!r}: a converter stores its inv_freq as a constant computed "
                                  "outside OpenVINO")
    width = rotary_width(rope)
    if width % 2 or not 0 < width <= int(rope["head_dim"]):
        raise ValueError(f"rotary width must be even and in (0, head_dim], got {width}")
    theta = float(rope.get("rope_theta", 10000.0))
    if not (math.isfinite(theta) and theta > 0):
        raise ValueError(f"rope_theta must be > 0 and finite, got {theta}")
    factor = float(rope.get("factor", 1.0)) if kind == "linear" else 1.0
    if not (math.isfinite(factor) and factor >= 1):
        raise ValueError(f"factor must be >= 1, got {factor}")
    return layout, width, theta, factor


def _inv_freq(width: int, theta: float, factor: float) -> ov.Node:
    """``1 / θ^(arange(0, r, 2)/r) / factor`` as graph operations, float32."""
    exponents = ops.divide(ops.range(_f32(0.0), _f32(float(width)), _f32(2.0), ov.Type.f32), _f32(float(width)))
    inv = ops.divide(_f32(1.0), ops.power(_f32(theta), exponents))
    return ops.divide(inv, _f32(factor)) if factor != 1.0 else inv


def _tables(positions: ov.Node, layout: str, width: int, theta: float, factor: float) -> tuple[ov.Node, ov.Node]:
    """cos and sin ``(B, T, r)`` of position ids ``(B, T)``: the rotary embedding's forward."""
    inv = ops.unsqueeze(ops.unsqueeze(_inv_freq(width, theta, factor), _i64([0])), _i64([2]))  # (1, r/2, 1)
    pos = ops.unsqueeze(ops.convert(positions, ov.Type.f32), _i64([1]))  # (B, 1, T)
    freqs = ops.transpose(ops.matmul(inv, pos, False, False), _i64([0, 2, 1]))  # (B, T, r/2)
    if layout == "half":
        emb = ops.concat([freqs, freqs], -1)  # [f | f]
    else:  # GPT-J: each angle repeated on the two channels of its pair
        emb = ops.reshape(ops.concat([ops.unsqueeze(freqs, _i64([3]))] * 2, -1), _i64([0, 0, -1]), True)
    return ops.cos(emb), ops.sin(emb)


def _rotate(x: ov.Node, cos: ov.Node, sin: ov.Node, layout: str, width: int, d: int) -> ov.Node:
    """``x·cos + rotate(x)·sin`` on the first ``r`` channels of ``x`` ``(B, H, T, D)``, the rest passed on."""
    cos, sin = ops.unsqueeze(cos, _i64([1])), ops.unsqueeze(sin, _i64([1]))  # over the heads
    part = x if width == d else ops.slice(x, _i64([0]), _i64([width]), _i64([1]), _i64([3]))
    if layout == "half":  # rotate_half: [−x₂ | x₁]
        first = ops.slice(part, _i64([0]), _i64([width // 2]), _i64([1]), _i64([3]))
        second = ops.slice(part, _i64([width // 2]), _i64([width]), _i64([1]), _i64([3]))
        turned = ops.concat([ops.negative(second), first], -1)
    else:  # rotate_every_two: (x_{2j}, x_{2j+1}) -> (−x_{2j+1}, x_{2j})
        even = ops.slice(part, _i64([0]), _i64([width]), _i64([2]), _i64([3]))
        odd = ops.slice(part, _i64([1]), _i64([width]), _i64([2]), _i64([3]))
        pairs = ops.concat([ops.unsqueeze(ops.negative(odd), _i64([4])), ops.unsqueeze(even, _i64([4]))], -1)
        turned = ops.reshape(pairs, _i64([0, 0, 0, -1]), True)
    rotated = ops.add(ops.multiply(part, cos), ops.multiply(turned, sin))
    if width == d:
        return rotated
    return ops.concat([rotated, ops.slice(x, _i64([width]), _i64([d]), _i64([1]), _i64([3]))], -1)


@functools.lru_cache(maxsize=256)
def _rope_model(shape: tuple[int, ...], n_positions: tuple[int, int], layout: str, width: int, theta: float,
                factor: float) -> ov.CompiledModel:
    """The compiled RoPE graph: inputs x ``shape`` (B, H, T, D) and position ids ``(B, T)``."""
    positions = ops.parameter(list(n_positions), ov.Type.i64, name="position_ids")
    cos, sin = _tables(positions, layout, width, theta, factor)
    if not shape:  # the tables alone
        return _compile([cos, sin], [positions])
    x = ops.parameter(list(shape), ov.Type.f32, name="x")
    return _compile([_rotate(x, cos, sin, layout, width, shape[-1])], [x, positions])


@functools.lru_cache(maxsize=64)
def _frequency_model(width: int, theta: float, factor: float) -> ov.CompiledModel:
    return _compile([_inv_freq(width, theta, factor)], [])


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """The graph's ``inv_freq`` (OpenVINO's ``Range``, ``Power``, ``Divide``) and A = 1."""
    _, width, theta, factor = _setup(rope)
    return _np(_frequency_model(width, theta, factor)([])[0]), 1.0


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The graph's ``Cos`` and ``Sin`` outputs ``(*positions.shape, r)`` at the positions."""
    pos = integer_positions(positions, reject_negative=True)
    layout, width, theta, factor = _setup(rope)
    if pos.size == 0:
        return np.zeros((*pos.shape, width)), np.zeros((*pos.shape, width))
    cos, sin = _rope_model((), (1, pos.size), layout, width, theta, factor)([pos.reshape(1, -1)]).values()
    return _np(cos).reshape(*pos.shape, width), _np(sin).reshape(*pos.shape, width)


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """The converted RoPE graph on ``x`` at ``positions`` (module docstring), compiled for CPU."""
    x, pos = rope_inputs(x, positions)
    layout, width, theta, factor = _setup(rope)
    t, d = x.shape[-2:]
    if x.size == 0:
        return np.zeros(x.shape)
    lead = (x.shape[0], -1) if pos.ndim == 2 else (1, -1)
    x4 = np.ascontiguousarray(x.reshape(*lead, t, d), dtype=np.float32)  # (B, N, T, D)
    rows = pos.reshape(-1, t)  # (B, T)
    model = _rope_model(x4.shape, rows.shape, layout, width, theta, factor)
    return _np(model([x4, rows])[0]).reshape(x.shape)


# ---------------------------------------------------------------------------------------- attention
@functools.lru_cache(maxsize=256)
def _attention_model(q_shape: tuple[int, ...], k_shape: tuple[int, ...], v_shape: tuple[int, ...],
                     mask_shape: tuple[int, ...] | None, scale: float | None, causal: bool) -> ov.CompiledModel:
    """``repeat_kv`` then ``ScaledDotProductAttention`` on ``(B, H, T, d)`` inputs."""
    q, k, v = (ops.parameter(list(s), ov.Type.f32) for s in (q_shape, k_shape, v_shape))
    params = [q, k, v]
    group = q_shape[1] // k_shape[1]
    keys, values = k, v
    if group > 1:  # transformers' repeat_kv: (B, H_kv, T, d) -> (B, H_kv, group, T, d) -> (B, H, T, d)
        keys, values = ((ops.reshape(ops.broadcast(ops.unsqueeze(a, _i64([2])),
                                                   _i64([s[0], s[1], group, s[2], s[3]])),
                                     _i64([s[0], s[1] * group, s[2], s[3]]), False))
                        for a, s in ((k, k_shape), (v, v_shape)))
    args = [q, keys, values]
    if mask_shape is not None:
        mask = ops.parameter(list(mask_shape), ov.Type.f32)
        params.append(mask)
        args.append(mask)
    elif scale is not None:
        args.append(_f32(0.0))  # no mask: an additive zero, the only way to reach the scale input
    if scale is not None:
        args.append(_f32(scale))
    return _compile([ops.scaled_dot_product_attention(*args, causal=causal)], params)


def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None) -> np.ndarray:
    """``ScaledDotProductAttention`` in float32 (module docstring): leading axes flattened into its batch."""
    if softcap is not None:
        raise NotImplementedError("OpenVINO's ScaledDotProductAttention has no logit softcap")
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    if q.ndim < 3 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(f"q, k, v must be (..., H, T, d) of one rank, got {q.shape}, {k.shape}, {v.shape}")
    h, t_q, h_kv, t_k = q.shape[-3], q.shape[-2], k.shape[-3], k.shape[-2]
    if h % h_kv:
        raise ValueError(f"q heads ({h}) must be a multiple of kv heads ({h_kv})")
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be > 0, got {scale}")
    lead = q.shape[:-3]
    batch = int(np.prod(lead)) if lead else 1
    q4, k4, v4 = (np.ascontiguousarray(a.reshape(batch, *a.shape[-3:])) for a in (q, k, v))
    feeds = [q4, k4, v4]
    additive = None
    if bias is not None or mask is not None:
        full = (*lead, h, t_q, t_k)
        additive = np.zeros(full, dtype=np.float32) if bias is None else np.broadcast_to(
            np.asarray(bias, dtype=np.float32), full)
        if mask is not None:
            additive = np.where(np.broadcast_to(np.asarray(mask, dtype=bool), full), additive, np.float32(-np.inf))
        feeds.append(np.ascontiguousarray(additive.reshape(batch, h, t_q, t_k), dtype=np.float32))
    model = _attention_model(q4.shape, k4.shape, v4.shape, None if additive is None else feeds[-1].shape,
                             None if scale is None else float(scale), bool(causal))
    return _np(model(feeds)[0]).reshape(*lead, h, t_q, v.shape[-1])


@functools.lru_cache(maxsize=256)
def _softmax_model(shape: tuple[int, ...]) -> ov.CompiledModel:
    logits = ops.parameter(list(shape), ov.Type.f32)
    allowed = ops.parameter(list(shape), ov.Type.boolean)
    masked = ops.select(allowed, logits, _f32(-np.inf))
    return _compile([ops.softmax(masked, -1)], [logits, allowed])


def softmax(logits, mask=None, fully_masked: str = "zeros") -> np.ndarray:
    """``Softmax`` over the last axis of the logits set to −inf where masked (a fully masked row is NaN)."""
    if fully_masked not in ("zeros", "nan"):
        raise ValueError(f"fully_masked must be 'zeros' or 'nan', got {fully_masked!r}")
    s = np.ascontiguousarray(logits, dtype=np.float32)
    if s.ndim == 0:
        raise ValueError("logits must have at least one axis")
    allowed = np.ones(s.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), s.shape)
    return _np(_softmax_model(s.shape)([s, np.ascontiguousarray(allowed)])[0])
