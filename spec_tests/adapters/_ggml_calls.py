"""The ggml adapter's functions (ctypes into ggml's CPU backend), run in a child process.

``spec_tests/adapters/ggml.py`` serves this module over the process protocol (spec_tests/adapters/process.py),
so that a failed ``GGML_ASSERT`` (ggml aborts the process) fails one test instead of the run. Every call
builds one ggml graph of one operator on float32 tensors and computes it on ``REFPOS_GGML_THREADS`` threads
(default 1). ggml's axis 0 is the fastest: a NumPy ``(B, T, H, D)`` array is ggml's ``[D, H, T, B]``.

* ``apply_rope`` — ``ggml_rope_ext`` (mode NORMAL = the interleaved layout, NEOX = half) for the rules ggml
  computes itself: ``default``, ``linear`` (``freq_scale = 1/s``) and ``yarn`` (``ext_factor = 1``,
  ``n_ctx_orig = L_0``, ``beta_fast``/``beta_slow``; ggml multiplies ``attn_factor`` by its own
  ``1 + 0.1·ln s``, so an explicit ``attention_factor`` A is passed as ``A / (1 + 0.1·ln s)``, as llama.cpp
  does). llama3 and Gemma 4's proportional rule reach ggml as per-pair ``freq_factors`` that llama.cpp's
  converter writes into the GGUF file: with ``REFPOS_LLAMA_CPP_SOURCE`` naming the unpacked
  ``vendor/llama.cpp`` (and torch installed), the converter's own ``generate_extra_tensors`` computes them
  (``spec_tests/adapters/_ggml_converter.py``), so the row credits llama.cpp's converter and ggml together.
  M-RoPE dicts go to ``ggml_rope_multi`` (mode MROPE, or IMROPE for ``mrope_interleaved``), which reads four
  position rows t, h, w, e: a dict of four sections ``[s_t, s_h, s_w, s_e]`` takes positions ``(4, T)`` as they
  are (``INFO ["mrope"]`` declares ``four_rows``); with three sections the sections are ``[s_t, s_h, s_w, 0]`` and
  the fourth row, which ggml's interleaved mode reads for the pairs the round-robin leaves, repeats t (the
  contract's three rows mean t there, as transformers' Qwen3-VL; llama.cpp writes 0 into it for image tokens, a
  choice of its caller, not of ggml). A negative position turns backwards (``INFO ["negative_positions"] =
  "rotate"``): llama.cpp's K-shift rotates cached keys by ``ggml_rope_ext`` at negative deltas. ggml forms each
  pair's angle by a running float32 product (``rope_cache_init``: ``theta *= theta_scale``), declared as the form
  ``running_product``. NTK, dynamic and LongRoPE (a rescaled base, factor sets chosen by llama.cpp's context code)
  and DeepSeek's ``mscale``/``mscale_all_dim`` pair (llama.cpp's model code) are not ggml's:
  ``NotImplementedError``; so are the deinterleaved layout and the ``last`` placement (ggml rotates the first
  ``n_dims`` channels in place).
* ``apply_vision_rope`` — ggml's VISION mode (``ggml_rope_multi``, ``n_dims = D/2``, sections ``[D/4, D/4]``):
  the ``qwen2_vl`` form and the ``axial`` form of two equal half-layout blocks (its frequencies
  ``θ^(−k/s_a)`` are ggml's ``θ^(−4k/D)`` only when ``s_a = D/4``; measured against ``refpos.rope.vision``:
  3.5e-7 on a Qwen2-VL grid, float32).
* ``rope_cos_sin`` — the rotation of a probe with ``(1, 0)`` in every pair (``_contract.pair_probe``).
* ``softmax`` — ``ggml_soft_max_ext`` with the mask as an additive float32 ``0`` / ``−inf`` tensor.
* ``alibi_slopes`` — read out of ``ggml_soft_max_ext``'s fused ALiBi (``max_bias = 8``): on two keys of
  logit 0 with mask values ``0`` and ``v``, head h returns ``p_1/p_0 = exp(m_h·v)``, so
  ``m_h = ln(p_1/p_0)/v``; ``v ≈ 4/m_h`` (from a first read with ``v = 1``) keeps the float32
  probabilities' rounding at ~3e-8 of ``m_h``.
* ``attention`` — ``ggml_flash_attn_ext`` (scale, logit softcap, mask, ALiBi off) with float32 q, k, v and the
  mask as float16 ``0`` / ``−inf`` (the kernel's mask type); a causal call's mask aligns the queries to the
  end of the keys, as llama.cpp's KV-cache mask does. An additive bias would be rounded to float16 by that
  mask: ``NotImplementedError``.
"""

from __future__ import annotations

import ctypes
import math
import os

import numpy as np

from refpos.rope.config import ROPE_TYPES
from refpos.tools.bench_native import ROPE_IMROPE, ROPE_MROPE, ROPE_NEOX, ROPE_NORMAL, ROPE_VISION, Graph, load_ggml
from spec_tests.adapters._contract import (
    adapter_info,
    integer_positions,
    is_mrope,
    kind_and_layout,
    pair_probe,
    probe_tables,
    rope_settings,
    rotary_width,
    vision_settings,
)
from spec_tests.adapters._ggml_converter import converter

LIB = load_ggml()
if LIB is None:
    raise ImportError("ggml not found: set REFPOS_GGML_LIB to the directory `python -m spec_tests.adapters.build_ggml` "
                      "prints")
THREADS = int(os.environ.get("REFPOS_GGML_THREADS", "1"))
VERSION = os.environ.get("REFPOS_GGML_VERSION", "ggml")

WITH_CONVERTER = bool(os.environ.get("REFPOS_LLAMA_CPP_SOURCE"))  # llama3 and proportional as freq_factors
INFO = adapter_info(
    f"ggml ({VERSION})", "float32",
    "spec_tests/adapters/ggml.py: ggml_rope_ext / ggml_rope_multi, ggml_soft_max_ext and ggml_flash_attn_ext "
    f"through ctypes, in a child process, {THREADS} thread(s)"
    + ("; llama3 and proportional as freq_factors of llama.cpp's converter" if WITH_CONVERTER else ""),
    native_layout="interleaved",
    rope_types=["default", "linear", "yarn"] + (["llama3", "proportional"] if WITH_CONVERTER else []),
    rope_layouts=["half", "interleaved"], rope_placements=["first"])
INFO.update({"mrope": ["contiguous", "interleaved", "four_rows"], "vision_forms": ["qwen2_vl", "axial"],
             "forms": ["running_product", "float32_rotation"], "negative_positions": "rotate"})

KNOWN_ROPE_TYPES = ROPE_TYPES  # the contract's
#: the rules ggml computes from its own arguments
GGML_RULES = ("default", "linear", "yarn")
#: the rules llama.cpp's converter turns into per-pair freq_factors that ggml divides the angles by
CONVERTER_RULES = ("llama3", "proportional")


# --------------------------------------------------------------------------------------------- RoPE
def _rope_args(rope: dict) -> tuple[int, int, list[int] | None, tuple[float, ...]]:
    """``(n_dims, mode, sections, (n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast,
    beta_slow))`` of a contract rope dict."""
    mrope = is_mrope(rope)
    rope = rope_settings(rope, "ggml", mrope=True)
    kind = rope.get("rope_type", "default")
    if kind not in KNOWN_ROPE_TYPES:
        raise ValueError(f"rope_type must be one of {KNOWN_ROPE_TYPES}, got {kind!r}")
    if rope.get("layout", "half") not in ("half", "interleaved", "deinterleaved"):
        raise ValueError(f"layout must be 'half', 'interleaved' or 'deinterleaved', got {rope['layout']!r}")
    if rope.get("placement", "first") not in ("first", "last", "proportional"):
        raise ValueError(f"placement must be 'first', 'last' or 'proportional', got {rope['placement']!r}")
    if kind not in GGML_RULES + CONVERTER_RULES:
        raise NotImplementedError(f"rope_type {kind!r}: llama.cpp passes it to ggml as a rescaled base or factors "
                                  "of its converter that are not wired here")
    if kind in CONVERTER_RULES and converter() is None:
        raise NotImplementedError(f"rope_type {kind!r} reaches ggml as freq_factors of llama.cpp's converter, which "
                                  "needs torch and REFPOS_LLAMA_CPP_SOURCE")
    if rope.get("placement", "first") == "proportional" and kind != "proportional":
        raise NotImplementedError("placement 'proportional': ggml rotates the first n_dims channels")
    kind, layout = kind_and_layout({**rope, "placement": "first"}, "ggml", ("half", "interleaved"))
    if rope.get("placement", "first") == "last":
        raise NotImplementedError("ggml rotates the first channels, not the last")
    head = int(rope["head_dim"])
    n_dims = rotary_width(rope)
    if head <= 0 or head % 2 or n_dims % 2 or not 0 < n_dims <= head:
        raise ValueError(f"head_dim and the rotary width must be even with 0 < width <= head_dim, got {head}, {n_dims}")
    theta = float(rope.get("rope_theta", 10000.0))
    if not (math.isfinite(theta) and theta > 0):
        raise ValueError(f"rope_theta must be > 0 and finite, got {theta}")
    sections = None
    if mrope:
        if layout != "half":
            raise NotImplementedError("ggml_rope_multi rotates in the NEOX (half) order only")
        sections = [int(s) for s in rope["mrope_section"]]
        if len(sections) not in (3, 4) or min(sections) < 0 or sum(sections) != n_dims // 2:
            raise ValueError(f"mrope_section must be 3 or 4 counts summing to {n_dims // 2}, got {sections}")
        sections += [0] * (4 - len(sections))  # three sections: the fourth row reads no contiguous band
        mode = ROPE_IMROPE if rope.get("mrope_interleaved") else ROPE_MROPE
    else:
        mode = ROPE_NEOX if layout == "half" else ROPE_NORMAL
    factor = float(rope.get("factor", 1.0))
    if kind != "default" and not (math.isfinite(factor) and factor >= 1):
        raise ValueError(f"factor must be >= 1, got {factor}")
    if kind == "default":
        return n_dims, mode, sections, None, (0, theta, 1.0, 0.0, 1.0, 0.0, 0.0)
    if kind == "linear":
        return n_dims, mode, sections, None, (0, theta, 1.0 / factor, 0.0, 1.0, 0.0, 0.0)
    if kind in CONVERTER_RULES:
        return _converter_rope(kind, rope, head, n_dims, mode, sections, theta, factor)
    original = rope.get("original_max_position_embeddings")
    if original is None or int(original) <= 0:
        raise ValueError(f"original_max_position_embeddings must be a positive int for yarn, got {original}")
    if "mscale" in rope or "mscale_all_dim" in rope:
        raise NotImplementedError("yarn mscale / mscale_all_dim: llama.cpp's model code turns them into attn_factor")
    beta_fast, beta_slow = float(rope.get("beta_fast", 32.0)), float(rope.get("beta_slow", 1.0))
    if not 0 < beta_slow < beta_fast:  # ggml takes any pair: its correction range would turn inside out
        raise ValueError(f"beta_fast must exceed beta_slow > 0, got beta_fast {beta_fast}, beta_slow {beta_slow}")
    ggml_own = 1.0 + 0.1 * math.log(factor)  # ggml multiplies attn_factor by this (rope_yarn, ops.cpp)
    attn = float(rope["attention_factor"]) / ggml_own if "attention_factor" in rope else 1.0
    return n_dims, mode, sections, None, (int(original), theta, 1.0 / factor, 1.0, attn, beta_fast, beta_slow)


def _converter_rope(kind: str, rope: dict, head: int, n_dims: int, mode: int, sections: list[int] | None,
                    theta: float, factor: float) -> tuple:
    """The ``rope_ext`` arguments of a rule llama.cpp's converter writes as per-pair ``freq_factors`` c_j (ggml
    divides pair j's angle by c_j): llama3 (``LlamaModel.generate_extra_tensors``, conversion/llama.py: the
    factors from float32 ω over the rotated width) and Gemma 4's proportional (``Gemma4Model.
    generate_extra_tensors``, conversion/gemma.py: 1 for the rotated pairs, 1e30 for the others, over the
    whole head)."""
    if sections is not None:
        raise NotImplementedError(f"M-RoPE with rope_type {kind!r}")
    if kind == "llama3":
        keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        missing = [k for k in keys if k not in rope]
        if missing:
            raise ValueError(f"llama3 needs {missing}")
        if not 0 < float(rope["low_freq_factor"]) <= float(rope["high_freq_factor"]):  # equal: Llama 4
            raise ValueError(f"low_freq_factor must be in (0, high_freq_factor], got {rope['low_freq_factor']}, "
                             f"{rope['high_freq_factor']}")
        params = {"rope_type": "llama3", "rope_theta": theta, **{k: rope[k] for k in keys}}
        factors = converter().llama3(params, n_dims)
        return n_dims, mode, sections, factors, (0, theta, 1.0, 0.0, 1.0, 0.0, 0.0)
    if factor != 1.0:
        raise NotImplementedError("proportional with a factor: the converter writes the rotated pairs only")
    if rope.get("layout", "half") != "half":
        raise NotImplementedError("proportional: the converter's factors assume the NEOX (half) order")
    factors = converter().proportional(theta, head, n_dims / head)
    return head, mode, sections, factors, (0, theta, 1.0, 0.0, 1.0, 0.0, 0.0)


def _rope_rows(x: np.ndarray, pos: np.ndarray, rope: dict) -> np.ndarray:
    """ggml's rotation of ``x`` ``(N, T, D)`` float32 at ``pos`` ``(T,)``, or ``(4, T)`` for M-RoPE."""
    n_dims, mode, sections, factors, args = _rope_args(rope)
    n, t, d = x.shape
    graph = Graph(LIB, 3 * x.nbytes + 16 * t + 4 * d + 4096)
    try:
        a = graph.tensor(np.ascontiguousarray(x.transpose(1, 0, 2)))  # ne = [D, N, T]: heads, then tokens
        p = graph.tensor(np.ascontiguousarray(pos, dtype=np.int32).reshape(-1))
        c = None if factors is None else graph.tensor(factors)  # freq_factors: pair j's angle divided by c_j
        if sections is None:
            out = LIB.ggml_rope_ext(graph.ctx, a, p, c, n_dims, mode, *args)
        else:
            out = LIB.ggml_rope_multi(graph.ctx, a, p, c, n_dims, (ctypes.c_int * 4)(*sections), mode, *args)
        return graph.compute(out, (t, n, d), THREADS)().transpose(1, 0, 2)
    finally:
        graph.close()


def apply_rope(x, positions, rope: dict, seq_len: int | None = None) -> np.ndarray:
    """``ggml_rope_ext`` (or ``ggml_rope_multi``) on ``x`` ``(..., T, D)`` at ``positions`` ``(T,)``, ``(B, T)``
    with x ``(B, H, T, D)``, or M-RoPE ``(3, T)``."""
    x = np.asarray(x)
    pos = integer_positions(positions, reject_negative=False)  # negative: llama.cpp's K-shift turns backwards
    if x.ndim < 2 or x.shape[-1] != int(rope.get("head_dim") or -1):
        raise ValueError(f"x must be (..., T, head_dim), got {x.shape}")
    t, d = x.shape[-2:]
    xf = x.astype(np.float32)
    if is_mrope(rope):
        n_rows = len(rope["mrope_section"])
        if pos.ndim == 1:
            pos = np.broadcast_to(pos, (n_rows, t))
        if pos.ndim != 2 or pos.shape[1] != t:
            raise NotImplementedError(f"M-RoPE positions (rows, T) or (T,) only, got {pos.shape}")
        if pos.shape[0] != n_rows:
            raise ValueError(f"M-RoPE positions must have one row per section ({n_rows}), got {pos.shape[0]}")
        # ggml reads a fourth row e; with three sections the contract's pairs past the round-robin (interleaved)
        # turn by t, as transformers' Qwen3-VL does, so the fourth row repeats t
        rows = pos if n_rows == 4 else np.concatenate([pos, pos[:1]])
        return _rope_rows(xf.reshape(-1, t, d), rows, rope).astype(np.float64).reshape(x.shape)
    if pos.ndim == 1 and pos.shape[0] == t:
        return _rope_rows(xf.reshape(-1, t, d), pos, rope).astype(np.float64).reshape(x.shape)
    if pos.ndim == 2 and x.ndim == 4 and pos.shape == (x.shape[0], t):
        return np.stack([_rope_rows(xf[b], pos[b], rope) for b in range(x.shape[0])]).astype(np.float64)
    raise ValueError(f"positions must be (T,) or (B, T) with x (B, H, T, D), got {pos.shape} for x {x.shape}")


def rope_cos_sin(positions, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(A·cos φ, A·sin φ)`` as ggml's rotation forms them: a probe with ``(1, 0)`` in every pair, rotated."""
    pos = integer_positions(positions, reject_negative=False)
    width = _rope_args(rope)[0]  # bad or unsupported dicts fail before the probe; the rotated channels
    settled = rope_settings(rope, "ggml", mrope=True)
    layout, head = settled.get("layout", "half"), int(settled["head_dim"])
    t = pos.shape[-1]
    if is_mrope(rope) or pos.ndim == 1:
        rotated = apply_rope(pair_probe(t, head, width, layout), pos, rope)  # (T, head)
    else:
        lead = pos.shape[:-1]
        probe = np.broadcast_to(pair_probe(t, head, width, layout), (*lead, 1, t, head)).reshape(-1, 1, t, head)
        rotated = apply_rope(probe, pos.reshape(-1, t), rope).reshape(*lead, t, head)
    return probe_tables(rotated, width, layout)


# -------------------------------------------------------------------------------------- vision RoPE


def apply_vision_rope(x, positions, rope: dict) -> np.ndarray:
    """ggml's VISION mode (``ggml_rope_multi``, mode 24): patches ``x`` ``(..., N, D)`` at coordinates
    ``positions`` ``(N, 2)`` (h, w). ggml rotates the half-split pairs ``(i, i + D/2)`` (``n_dims = D/2``),
    pair i of section a at ``p_a·θ^(−2k/n_dims)``, k its index in the section: the ``qwen2_vl`` form, and the
    ``axial`` form of two half-layout sections of ``D/4`` pairs each (with other sections the axial
    frequencies ``θ^(−k/s_a)`` are not ggml's ``θ^(−4k/D)``: a form ggml does not compute)."""
    form, d, theta, given, layout, pos = vision_settings(rope, positions)
    sections = [d // 4, d // 4]  # ggml's sections; ``given`` the dict's (axial: its own)
    if pos.ndim != 2:
        raise NotImplementedError(f"one coordinate row per patch, positions (N, {len(given)}), got {pos.shape}")
    if form in ("pixtral", "llama4"):
        raise NotImplementedError(f"vision form {form!r}: ggml's VISION mode is the qwen2_vl / two-block axial form")
    if form == "axial":
        if layout != "half":
            raise NotImplementedError("ggml's VISION mode rotates half-split pairs")
        if len(given) != 2:
            raise NotImplementedError(f"ggml's VISION mode reads two coordinates, not {len(given)}")
        if given != sections:
            raise NotImplementedError(f"axial sections {given}: ggml's VISION mode turns pair k of each section "
                                      f"at θ^(−4k/D), the axial frequencies only for two sections of D/4 = {d // 4}")
    x = np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != d:
        raise ValueError(f"x must be (..., N, head_dim), got {x.shape}")
    n = x.shape[-2]
    if pos.shape[0] != n:
        raise ValueError(f"positions must have one row per patch ({n}), got {pos.shape[0]}")
    rows = np.concatenate([pos.T, np.zeros((2, n), dtype=np.int64)])  # (4, N): h, w, then two unread rows
    xf = x.astype(np.float32).reshape(-1, n, d)
    graph = Graph(LIB, 3 * xf.nbytes + 64 * n + 4096)
    try:
        a = graph.tensor(np.ascontiguousarray(xf.transpose(1, 0, 2)))  # ne = [D, heads, N]
        p = graph.tensor(rows.astype(np.int32).reshape(-1))
        out = LIB.ggml_rope_multi(graph.ctx, a, p, None, d // 2, (ctypes.c_int * 4)(*sections, 0, 0),
                                  ROPE_VISION, 0, theta, 1.0, 0.0, 1.0, 0.0, 0.0)
        y = graph.compute(out, (n, xf.shape[0], d), THREADS)().transpose(1, 0, 2)
        return y.astype(np.float64).reshape(x.shape)
    finally:
        graph.close()


# ------------------------------------------------------------------------------------------ softmax
def _additive_mask(mask, shape: tuple[int, ...], dtype) -> np.ndarray:
    allowed = np.broadcast_to(np.asarray(mask, dtype=bool), shape)
    return np.where(allowed, 0.0, -np.inf).astype(dtype)


def softmax(logits, mask=None, fully_masked: str = "zeros") -> np.ndarray:
    """``ggml_soft_max_ext(a, mask, scale 1, max_bias 0)`` over the last axis (at most 4 axes)."""
    if fully_masked not in ("zeros", "nan"):
        raise ValueError(f"fully_masked must be 'zeros' or 'nan', got {fully_masked!r}")
    a = np.asarray(logits, dtype=np.float32)
    if a.ndim > 4:
        raise NotImplementedError("ggml tensors have at most 4 axes")
    graph = Graph(LIB, 4 * a.nbytes + 4096)
    try:
        m = None if mask is None else graph.tensor(_additive_mask(mask, a.shape, np.float32))
        out = LIB.ggml_soft_max_ext(graph.ctx, graph.tensor(a), m, 1.0, 0.0)
        return graph.compute(out, a.shape, THREADS)().astype(np.float64)
    finally:
        graph.close()


def _alibi_read(n_heads: int, v: np.ndarray) -> np.ndarray:
    """``ln(p_1/p_0)/v`` per head from the fused softmax on two keys of logit 0, mask ``[0, v_h]``."""
    graph = Graph(LIB, 64 * n_heads + 4096)
    try:
        a = graph.tensor(np.zeros((n_heads, 1, 2), dtype=np.float32))  # ne = [2 keys, 1 query, H]
        mask = np.zeros((n_heads, 1, 2), dtype=np.float32)
        mask[:, 0, 1] = v
        out = LIB.ggml_soft_max_ext(graph.ctx, a, graph.tensor(mask), 1.0, 8.0)
        p = graph.compute(out, (n_heads, 1, 2), THREADS)().astype(np.float64)[:, 0, :]
        return (np.log(p[:, 1]) - np.log(p[:, 0])) / v.astype(np.float64)
    finally:
        graph.close()


def alibi_slopes(n_heads: int) -> np.ndarray:
    """The slopes ggml's fused softmax applies with ``max_bias = 8`` (llama.cpp's ALiBi models), read out."""
    if not isinstance(n_heads, (int, np.integer)) or n_heads < 1:
        raise ValueError(f"n_heads must be an int >= 1, got {n_heads!r}")
    first = _alibi_read(int(n_heads), np.ones(int(n_heads), dtype=np.float32))
    return _alibi_read(int(n_heads), (4.0 / first).astype(np.float32))


# ---------------------------------------------------------------------------------------- attention
def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None) -> np.ndarray:
    """``ggml_flash_attn_ext`` on q ``(B, H, T_q, d)``, k ``(B, H_kv, T_k, d)``, v ``(B, H_kv, T_k, dv)``."""
    if bias is not None:
        raise NotImplementedError("ggml_flash_attn_ext adds its mask in float16: a bias would be rounded")
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise NotImplementedError("ggml_flash_attn_ext takes (B, H, T, d) here")
    b, h, t_q, d = q.shape
    h_kv, t_k = k.shape[1], k.shape[2]
    if h % h_kv:
        raise ValueError(f"q heads ({h}) must be a multiple of kv heads ({h_kv})")
    if scale is not None and not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"softcap must be > 0, got {softcap}")
    allowed = np.ones((b, h, t_q, t_k), dtype=bool)
    if mask is not None:
        allowed = allowed & np.broadcast_to(np.asarray(mask, dtype=bool), allowed.shape)
    if causal:
        allowed = allowed & (np.arange(t_k)[None, :] <= np.arange(t_k - t_q, t_k)[:, None])
    graph = Graph(LIB, 4 * (q.nbytes + k.nbytes + v.nbytes) + 2 * allowed.size + 2**16)
    try:
        m = graph.tensor(_additive_mask(allowed, allowed.shape, np.float16))  # ne = [T_k, T_q, H, B]
        out = LIB.ggml_flash_attn_ext(graph.ctx, graph.tensor(q), graph.tensor(k), graph.tensor(v), m,
                                      d**-0.5 if scale is None else float(scale), 0.0,
                                      0.0 if softcap is None else float(softcap))
        y = graph.compute(out, (b, t_q, h, v.shape[-1]), THREADS)()  # ne = [dv, H, T_q, B]: permuted
        return y.transpose(0, 2, 1, 3).astype(np.float64)
    finally:
        graph.close()
