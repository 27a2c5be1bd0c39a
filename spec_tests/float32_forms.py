"""Plain float32 implementations, one per form a correct float32 implementation may take, behind the adapter
contract (spec_tests/README.md): the frequencies and angles by ``pow``, ``exp_log`` or a ``running_product``
(refpos.golden.forms), the softmax max-subtracted or by log-sum-exp.

Written from the formulas of docs/rope.md, docs/extrapolation.md (linear, llama3), docs/sinusoidal.md and
docs/conventions.md#scale-order, in NumPy float32 arithmetic throughout (no float64 step, no refpos
computation): the argument checks are the suite's own (``spec_tests/adapters/_contract.py``). An adapter module
imports everything from here and calls :func:`configure` once (``spec_tests/test_meta_forms.py`` writes
them). ``wrong`` names a group of functions that then round one intermediate to bfloat16 (8 bits), the classic
low-precision mistake: ω (``frequencies``), the angles ``p·ω`` (``angles``, the sinusoid's too), the logits of
the softmax (``softmax``) or of the attention (``attention``). The suite must fail each.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spec_tests.adapters._contract import integer_positions, kind_and_layout, rope_settings, rotary_width

F32 = np.float32
ANGLE_FORMS = ("pow", "exp_log", "running_product")
SOFTMAX_FORMS = ("max", "logsumexp")
#: the groups of functions a ``wrong`` implementation gets wrong (one bfloat16 rounding each)
WRONG = ("frequencies", "angles", "softmax", "attention")

INFO: dict[str, Any] = {
    "dtype": "float32", "rope_layout": "half", "rope_types": ["default", "linear", "llama3"],
    "rope_layouts": ["half", "interleaved"], "rope_placements": ["first"], "mrope": [], "vision_forms": [],
}
FORM: dict[str, Any] = {"angles": "pow", "softmax": "max", "wrong": None}


def configure(angles: str, softmax: str, *, wrong: str | None = None) -> None:
    """Choose the forms (and the group made wrong, if any); names ``INFO`` after them."""
    if angles not in ANGLE_FORMS or softmax not in SOFTMAX_FORMS or wrong not in (None, *WRONG):
        raise ValueError(f"angles must be one of {ANGLE_FORMS}, softmax one of {SOFTMAX_FORMS}, wrong one of {WRONG}")
    FORM.update(angles=angles, softmax=softmax, wrong=wrong)
    INFO["name"] = f"float32 {angles} angles, {softmax} softmax" + (f", {wrong} in bfloat16" if wrong else "")


def _planted(group: str, values: np.ndarray) -> np.ndarray:
    """``values``, rounded to bfloat16 (round to nearest even, kept in float32) when ``group`` is made wrong."""
    if FORM["wrong"] != group:
        return values
    bits = np.ascontiguousarray(values, dtype=F32).view(np.uint32)
    return ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)).view(F32)


# ---------------------------------------------------------------------------------------- angles
def _ratio_powers(base: float, half: int, n: int) -> np.ndarray:
    """``ω_j = base^(−j/half)`` for ``j = 0 … n−1`` in float32, by the configured form: ``1/base^(j/half)`` (one
    rounding of the exponent, as transformers' ``arange(0, d, 2)/d``), ``exp(−j·(ln base/half))`` (MLX's), or the
    running product ``ω_{j+1} = ω_j·s``, ``s = base^(−1/half)`` (ggml's)."""
    j = np.arange(n, dtype=F32)
    b = F32(base)
    if FORM["angles"] == "pow":
        return F32(1) / b ** (j / F32(half))
    if FORM["angles"] == "exp_log":
        return np.exp(-(j * (np.log(b) / F32(half))))
    step = b ** (F32(-1) / F32(half))
    out, w = np.empty(n, dtype=F32), F32(1)
    for index in range(n):
        out[index] = w
        w = F32(w * step)
    return out


def _angles(positions: np.ndarray, base: float, half: int, factors: np.ndarray) -> np.ndarray:
    """``p·ω_j`` ``(..., n)`` in float32: one product ``p·(ω_j·factor_j)`` (pow, exp_log), or ggml's running
    product from ``p`` with the rule's per-pair factor after it."""
    p = positions.astype(F32)[..., None]
    n = factors.size
    if FORM["angles"] != "running_product":
        inv = _planted("frequencies", _ratio_powers(base, half, n) * factors)
        return _planted("angles", p * inv)
    step = F32(base) ** (F32(-1) / F32(half))
    out = np.empty((*positions.shape, n), dtype=F32)
    theta = p[..., 0]
    for index in range(n):
        out[..., index] = theta * factors[index]
        theta = theta * step
    return _planted("angles", _planted("frequencies", out) if positions.ndim == 0 else out)


# ------------------------------------------------------------------------------------------ RoPE
def _rope(rope: dict) -> tuple[str, str, int, float, np.ndarray]:
    """``(rope_type, layout, d, θ, per-pair factors)`` of a checked rope dict (float32 factors)."""
    rope = rope_settings(rope, "float32_forms")
    kind, layout = kind_and_layout(rope, "float32_forms", ("half", "interleaved"))
    d = rotary_width(rope)
    if d < 2 or d % 2 or d > rope["head_dim"]:
        raise ValueError(f"rotary_dim must be even and in [2, head_dim], got {d}")
    theta = float(rope.get("rope_theta", 10000.0))
    if not (math.isfinite(theta) and theta > 0):
        raise ValueError(f"rope_theta must be > 0 and finite, got {theta}")
    if kind not in ("default", "linear", "llama3"):
        raise NotImplementedError(f"rope_type {kind!r}")
    factors = np.ones(d // 2, dtype=F32)
    if kind == "linear":
        if not rope.get("factor", 0) >= 1:
            raise ValueError(f"factor must be >= 1, got {rope.get('factor')}")
        factors = factors / F32(rope["factor"])
    elif kind == "llama3":
        factors = _llama3_factors(rope, _ratio_powers(theta, d // 2, d // 2))
    return kind, layout, d, theta, factors


def _llama3_factors(rope: dict, inv: np.ndarray) -> np.ndarray:
    """ω_scaled/ω per pair, as transformers computes llama3 in float32: 1/s beyond L0/low, 1 below L0/high, the
    smooth blend between."""
    try:
        s, low, high, l0 = (F32(rope[k]) for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                   "original_max_position_embeddings"))
    except KeyError as exc:
        raise ValueError(f"llama3 needs {exc.args[0]}") from None
    if not (s >= 1 and 0 < low <= high and l0 > 0):
        raise ValueError(f"llama3 needs factor >= 1 and 0 < low_freq_factor <= high_freq_factor, got {s}, {low}, "
                         f"{high}")
    wavelen = F32(2 * math.pi) / inv
    factors = np.ones_like(inv)
    factors[wavelen > l0 / low] = F32(1) / s
    middle = ~((wavelen > l0 / low) | (wavelen < l0 / high))
    smooth = (l0 / wavelen[middle] - low) / (high - low)
    factors[middle] = (F32(1) - smooth) / s + smooth
    return factors


def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    _, _, d, theta, factors = _rope(rope)
    inv = _angles(np.ones((), dtype=np.int64), theta, d // 2, factors)  # ω_j: the angle at p = 1
    return inv, 1.0


def rope_cos_sin(positions: Any, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    _, layout, d, theta, factors = _rope(rope)
    angles = _angles(integer_positions(positions, reject_negative=True), theta, d // 2, factors)
    cos, sin = np.cos(angles), np.sin(angles)
    if layout == "half":
        return np.concatenate([cos, cos], axis=-1), np.concatenate([sin, sin], axis=-1)
    return np.repeat(cos, 2, axis=-1), np.repeat(sin, 2, axis=-1)


def apply_rope(x: Any, positions: Any, rope: dict, seq_len: int | None = None) -> np.ndarray:
    _, layout, d, theta, factors = _rope(rope)
    angles = _angles(integer_positions(positions, reject_negative=True), theta, d // 2, factors)
    x = np.asarray(x, dtype=F32)
    while angles.ndim < x.ndim:  # (B, T) positions with x (B, H, T, D): broadcast over the heads
        angles = np.expand_dims(angles, axis=-3)
    cos, sin = np.cos(angles), np.sin(angles)
    span, rest = x[..., :d], x[..., d:]
    u, v = (span[..., : d // 2], span[..., d // 2:]) if layout == "half" else (span[..., 0::2], span[..., 1::2])
    u2, v2 = u * cos - v * sin, v * cos + u * sin
    if layout == "half":
        out = np.concatenate([u2, v2], axis=-1)
    else:
        out = np.stack([u2, v2], axis=-1).reshape((*u2.shape[:-1], d))
    return np.concatenate([out, np.broadcast_to(rest, (*out.shape[:-1], rest.shape[-1]))], axis=-1)


# ------------------------------------------------------------------------------------------- sinusoid
def sinusoidal(positions: Any, dim: int, base: float = 10000.0, layout: str = "interleaved",
               spacing: str = "paper") -> np.ndarray:
    """sin and cos of ``p·ω_k``: ``ω_k = base^(−2k/dim)`` (paper) or ``exp(−k·ln base/max(dim/2 − 1, 1))``
    (tensor2tensor), by the configured form."""
    if not isinstance(dim, (int, np.integer)) or dim < 2 or dim % 2:
        raise ValueError(f"dim must be an even int >= 2, got {dim!r}")
    if spacing not in ("paper", "tensor2tensor") or layout not in ("interleaved", "concat"):
        raise ValueError(f"spacing must be 'paper' or 'tensor2tensor' and layout 'interleaved' or 'concat', got "
                         f"{spacing!r}, {layout!r}")
    half = dim // 2 if spacing == "paper" else max(dim // 2 - 1, 1)
    angles = _angles(integer_positions(positions, reject_negative=True), base, half, np.ones(dim // 2, dtype=F32))
    sin, cos = np.sin(angles), np.cos(angles)
    if layout == "interleaved":
        return np.stack([sin, cos], axis=-1).reshape(*angles.shape[:-1], dim)
    return np.concatenate([sin, cos], axis=-1)


# ------------------------------------------------------------------------------------------ attention
def softmax(logits: Any, mask: Any = None, fully_masked: str = "zeros") -> np.ndarray:
    """float32 softmax over the last axis, max-subtracted or by log-sum-exp; a fully masked row is zeros or NaN."""
    if fully_masked not in ("zeros", "nan"):
        raise ValueError(f"fully_masked must be 'zeros' or 'nan', got {fully_masked!r}")
    z = _planted("softmax", np.asarray(logits, dtype=F32))
    allowed = np.ones(z.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), z.shape)
    z = np.where(allowed, z, F32(-np.inf))
    top = z.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(top)
    top = np.where(empty, F32(0), top)
    with np.errstate(divide="ignore", invalid="ignore"):
        if FORM["softmax"] == "max":
            e = np.exp(z - top)
            p = e / e.sum(axis=-1, keepdims=True)
        else:
            lse = top + np.log(np.exp(z - top).sum(axis=-1, keepdims=True))
            p = np.exp(z - lse)
    return np.where(empty, F32(np.nan) if fully_masked == "nan" else F32(0), p)


def attention(q: Any, k: Any, v: Any, bias: Any = None, mask: Any = None, scale: float | None = None,
              causal: bool = False, softcap: float | None = None) -> np.ndarray:
    """softmax(scale·q·kᵀ → softcap → + bias → mask)·v in float32; kv heads shared by ``H/H_kv`` query heads."""
    q, k, v = (np.asarray(a, dtype=F32) for a in (q, k, v))
    if q.shape[-3] % k.shape[-3]:
        raise ValueError(f"q heads ({q.shape[-3]}) must be a multiple of kv heads ({k.shape[-3]})")
    n_rep = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, n_rep, axis=-3), np.repeat(v, n_rep, axis=-3)
    scale = F32(q.shape[-1] ** -0.5 if scale is None else scale)
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    if softcap is not None:
        s = F32(softcap) * np.tanh(s / F32(softcap))
    if bias is not None:
        s = s + np.asarray(bias, dtype=F32)
    t_q, t_k = s.shape[-2:]
    allowed = np.ones(s.shape[-2:], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        allowed = allowed & (np.arange(t_k)[None, :] <= np.arange(t_q)[:, None] + (t_k - t_q))
    return softmax(_planted("attention", s), mask=np.broadcast_to(allowed, s.shape)) @ v
