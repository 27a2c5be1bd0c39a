"""The reference adapter's functions for how layers see positions beyond 1-D RoPE (the contract of
``spec_tests/README.md``): attention over nearby keys, the per-layer query scale, the RoPE of vision encoders,
and the rotation alone with given tables (kernels that take cos/sin caches).

:mod:`refpos.testing.adapter` imports them, so ``REFPOS_IMPL=refpos.testing.adapter`` provides them; they live
here to keep each module of one concern.
"""

from __future__ import annotations

import numpy as np

import refpos
from refpos.backend import get_xp
from refpos.models.query_scales import QUERY_SCALES, QueryScale
from refpos.rope.given_tables import apply_rope_tables as _rotate_with_tables
from refpos.rope.vision import VisionRope
from refpos.rope.vision import apply_vision_rope as _rotate_patches
from refpos.testing.adapter_arrays import to_backend, to_host
from refpos.validation import check_float, check_int


def local_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, window: int | None = None,
                    attention_chunk: int | None = None, scale: float | None = None,
                    softcap: float | None = None) -> np.ndarray:
    """Causal attention restricted to nearby keys, queries aligned to the end of the keys (query t at position
    ``T_k − T_q + t``): ``window`` w keeps keys with ``0 <= i − j < w`` (Gemma's sliding layers, HF
    ``sliding_window``), ``attention_chunk`` C keeps keys of the query's chunk, ``⌊j/C⌋ = ⌊i/C⌋`` with
    ``j <= i`` (Llama 4's chunked layers); both given: both hold. Shapes and the other steps as :func:`attention`.
    ``window`` or ``attention_chunk`` < 1: ValueError."""
    xp = get_xp()
    t_q, t_k = q.shape[-2], k.shape[-2]
    allowed = refpos.core.causal_mask(t_q, t_k, xp=xp)
    if window is not None:
        allowed = allowed & refpos.core.sliding_window_mask(t_q, t_k, window, xp=xp)
    if attention_chunk is not None:
        allowed = allowed & refpos.core.chunked_causal_mask(t_q, t_k, attention_chunk, xp=xp)
    return to_host(refpos.attention(to_backend(q), to_backend(k), to_backend(v), mask=allowed, scale=scale,
                                    softcap=softcap))


def query_scale(positions: np.ndarray, scale: dict) -> np.ndarray:
    """The per-position multiplier of a layer's query (float64, the shape of ``positions``): ``scale`` is
    ``{"rule": "llama4_temperature", "attn_scale": a, "floor_scale": f}`` (Llama 4's layers without RoPE,
    ``1 + a·ln(1 + ⌊(p + 1)/f⌋)``) or ``{"rule": "llama_4_scaling_beta", "beta": β,
    "original_max_position_embeddings": L0}`` (every layer of Ministral-3, ``1 + β·ln(1 + ⌊p/L0⌋)``).
    Negative or float positions, an unknown rule or a missing parameter: ValueError / TypeError."""
    if not isinstance(scale, dict):
        raise TypeError(f"scale must be a dict {{'rule': ..., <parameters>}}, got {type(scale).__name__}")
    rule = scale.get("rule")
    if rule not in QUERY_SCALES:
        raise ValueError(f"scale['rule'] must be one of {tuple(QUERY_SCALES)}, got {rule!r}")
    keys = QUERY_SCALES[rule].keys  # the rule's record: its parameters and their kinds
    names = tuple(k.param for k in keys)
    missing = [name for name in names if scale.get(name) is None]
    unknown = sorted(set(scale) - {"rule", *names})
    if missing or unknown:
        raise ValueError(f"scale of rule {rule!r} takes {names}; missing {missing}, unknown {unknown}")
    params = tuple((k.param, float(check_int(k.param, scale[k.param], minimum=1)) if k.kind == "int" else
                    check_float(k.param, scale[k.param], positive=k.param == "floor_scale")) for k in keys)
    return QueryScale(rule, params)(positions)


#: the keys of a contract vision-RoPE dict
VISION_KEYS = ("form", "head_dim", "rope_theta", "sections", "layout")


def apply_vision_rope(x: np.ndarray, positions: np.ndarray, rope: dict) -> np.ndarray:
    """Rotated patch vectors ``x`` ``(..., N, D)`` at their coordinates ``positions`` ``(..., N, n)``
    (docs/mrope.md#vision-encoders-2-d-axial-rope): ``rope`` ``{"form", "head_dim", "rope_theta"}`` with form
    ``"qwen2_vl"``, ``"pixtral"``, ``"llama4"`` (n = 2, coordinates (h, w)) or ``"axial"`` with ``"sections"``
    (pairs per axis, summing to D/2; n = len(sections)) and ``"layout"`` (``half``/``interleaved``): block a's
    pair k turns by ``p_a·θ^(−k/s_a)``. Every channel is rotated. Unknown keys or forms: ValueError."""

    unknown = sorted(set(rope) - set(VISION_KEYS))
    if unknown:
        raise ValueError(f"unknown vision rope keys {unknown}; the keys are {VISION_KEYS}")
    form = rope.get("form")
    extra = {"sections": rope.get("sections"), "axial_layout": rope.get("layout") or "half"} if form == "axial" else {}
    if form != "axial" and (rope.get("sections") is not None or rope.get("layout") not in (None,)):
        raise ValueError(f"sections and layout are the axial form's; the {form!r} form fixes its own")
    vision = VisionRope(form, rope.get("head_dim"), theta=rope.get("rope_theta", 10000.0), **extra)
    return to_host(_rotate_patches(to_backend(x, np.float64), to_backend(positions), vision))


def apply_rope_tables(x: np.ndarray, positions: np.ndarray, cos: np.ndarray, sin: np.ndarray,
                      rope: dict) -> np.ndarray:
    """Rotated ``x`` ``(..., T, head_dim)`` with the tables given, the rotation alone (kernels that take cos/sin
    caches): ``cos``, ``sin`` ``(N, m)`` per pair (``A·cos φ``, ``A·sin φ`` of rows p = 0 … N−1, built by any
    rule), token at position p reads row p (M-RoPE: pair j reads row ``p_{a(j)}``); only the rope dict's
    geometry is read (head_dim, rotary width, placement, layout, sections). ``p < 0`` or ``p >= N``: ValueError."""
    return to_host(_rotate_with_tables(to_backend(x, np.float64), to_backend(positions), to_backend(cos, np.float64),
                                       to_backend(sin, np.float64), refpos.rope_config_from_params(rope)))
