"""Golden cases of how layers see positions beyond 1-D RoPE: vision RoPE, GLM's 2-D RoPE, local attention, query
scales.

* ``vision-rope/<form>`` — ``apply_vision_rope(x, positions, vision)`` for the three forms transformers ships
  (Qwen2-VL's tower on a 4 × 4 grid in 2 × 2 merge blocks, Pixtral on 3 × 5 patches, Llama 4 on 3 × 3
  patches and its class token) and the axial form (2-D interleaved as rotary-embedding-torch, 3-D t, h, w
  as video encoders) (docs/mrope.md#vision-encoders-2-d-axial-rope); refpos's own calls of ``refpos check
  vision_rope`` (docs/vision-rope.md#learned-class-angles-and-3-d-forms): ``apply_vision3d_rope(x, positions,
  vision)`` of MiniMax-M3-VL's and V-JEPA 2's 3-D forms and ``apply_vision_rope_prefixed(x, positions, vision,
  prefix_angles)`` of MLCD's class token turned by its learned angles, their tolerance the value rule raised to
  the check's bound (a float32 port's, :func:`~refpos.golden.cases.model_kind_cases.bound_tolerance`);
* ``rope-2d/<case>`` — ``apply_rope_2d(x, positions, rope)``: GLM's two axes (ChatGLM-6B's head halves, each a
  RoPE of θ = 10000, of its position and its block position) over a context and the span generated after it
  (docs/rope.md#glm-2-d-positions);
* ``local-attention/<kind>`` — ``local_attention(q, k, v, window, attention_chunk)``: Gemma's sliding window
  and Llama 4's chunked-local attention, a prefill of 8 and a decode of three queries, grouped heads;
* ``query-scale/<rule>`` — ``query_scale(positions, scale)`` at positions around every step up to 2²⁰, with
  Llama 4's defaults (``attn_scale`` 0.1, ``floor_scale`` 8192) and Ministral-3's (β = 0.1, L₀ = 16384).

Tolerances by the rules of :mod:`refpos.golden.exact.entries`: rotated patches by the rope rule (every form the
dtype admits, per patch from its largest coordinate; refpos's own calls: the check's bound), attention outputs and
scales by the value rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import refpos
from refpos.golden.cases.common import In, Param, as_xp, call, rng_for, to_np
from refpos.golden.exact.entries import tolerance_rope, tolerance_value
from refpos.golden.files.manifest import Case, Output
from refpos.models.query_scales import QueryScale
from refpos.rope.config import RopeConfig
from refpos.rope.two_d import GLM_AXES, apply_rope_2d, glm_position_ids
from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    llama4_patch_positions,
    pixtral_patch_positions,
    qwen_patch_positions,
    vision_frequencies,
)
from refpos.rope.vision3d import thw_patch_positions, vjepa2_patch_positions

#: (case name, the contract's vision dict, the patch positions, description)
VISION = (
    ("qwen2_vl", {"form": "qwen2_vl", "head_dim": 32, "rope_theta": 10000.0},
     qwen_patch_positions([(1, 4, 4)], spatial_merge_size=2),
     "Qwen2-VL's vision tower (head size 32): a 4 × 4 grid in 2 × 2 merge blocks"),
    ("pixtral", {"form": "pixtral", "head_dim": 32, "rope_theta": 10000.0}, pixtral_patch_positions(3, 5),
     "Pixtral (head size 32): 3 × 5 patches, row-major"),
    ("llama4", {"form": "llama4", "head_dim": 32, "rope_theta": 10000.0}, llama4_patch_positions(3),
     "Llama 4's vision model (head size 32): 3 × 3 patches from (1, 1), then the class token at (0, 0)"),
    ("axial-2d-interleaved", {"form": "axial", "head_dim": 16, "rope_theta": 100.0, "sections": [4, 4],
                              "layout": "interleaved"}, pixtral_patch_positions(4, 3),
     "axial 2-D RoPE in the interleaved layout (rotary-embedding-torch's axial frequencies): 4 × 3 patches"),
    ("axial-3d-video", {"form": "axial", "head_dim": 24, "rope_theta": 10000.0, "sections": [4, 4, 4],
                        "layout": "half"},
     np.stack(np.meshgrid(np.arange(2), np.arange(2), np.arange(3), indexing="ij"), axis=-1).reshape(-1, 3),
     "axial 3-D RoPE (t, h, w) of a video encoder: 2 frames of 2 × 3 patches"),
)


def _vision(params: dict[str, Any]) -> VisionRope:
    extra = {"sections": tuple(params["sections"]), "axial_layout": params["layout"]} \
        if params["form"] == "axial" else {}
    return VisionRope(params["form"], params["head_dim"], theta=params["rope_theta"], **extra)


#: the page of refpos's own calls
OWN_PAGE = "docs/vision-rope.md#learned-class-angles-and-3-d-forms"
#: (case name, the check call's vision dict, the patch positions, class tokens with learned angles, description)
VISION_OWN = (
    ("minimax_m3_vl", {"form": "minimax_m3_vl", "head_dim": 20, "rope_theta": 10000.0},
     thw_patch_positions([(2, 4, 4)]), 0,
     "MiniMax-M3-VL's vision tower (head size 20: d = 6 channels per axis, 18 rotated in the half layout, 2 passed "
     "through): 2 frames of 4 × 4 patches, each frame's 2 × 2 merge blocks"),
    ("vjepa2", {"form": "vjepa2", "head_dim": 20, "rope_theta": 10000.0}, vjepa2_patch_positions(np.arange(18), 3),
     0, "V-JEPA 2 (head size 20: three blocks of 6 adjacent-pair channels, 2 passed through): 2 frames of 3 × 3"),
    ("mlcd-class-angles", {"form": "mlcd", "head_dim": 16, "rope_theta": 10000.0}, pixtral_patch_positions(3, 4), 1,
     "MLCD's tower (head size 16): its class token turned by seeded learned angles in [−π, π), then 3 × 4 patches"),
)


def _own_cases() -> list[Case]:
    """The cases of :data:`VISION_OWN`: the output and the tolerance from the inputs ``refpos check vision_rope``
    reads them as (the reference and the bound of a float32 port)."""
    from refpos.golden.cases.model_kind_cases import bound_tolerance
    from refpos.rope.vision3d import VisionRope3D
    from refpos.rope.vision3d_mistakes import VisionRope3DInputs
    from refpos.rope.vision_mistakes import VisionRopeInputs

    cases = []
    for name, params, positions, prefix, description in VISION_OWN:
        case_id = f"vision-rope/{name}"
        rng = rng_for(case_id)
        inputs = {"x": rng.standard_normal((prefix + len(positions), params["head_dim"])),
                  "positions": np.asarray(positions, dtype=np.int64)}
        if prefix:
            inputs["prefix_angles"] = rng.uniform(-np.pi, np.pi, (prefix, params["head_dim"] // 2))
        function = "apply_vision_rope_prefixed" if prefix else "apply_vision3d_rope"
        if prefix:
            rope = VisionRope(params["form"], params["head_dim"], theta=params["rope_theta"])
            check = VisionRopeInputs(inputs["x"], inputs["positions"], rope, inputs["prefix_angles"])
        else:
            rope3 = VisionRope3D(params["form"], params["head_dim"], theta=params["rope_theta"])
            check = VisionRope3DInputs(inputs["x"], inputs["positions"], rope3)
        y, bound = check.reference()
        args = [In("x"), In("positions"), Param("vision")] + ([In("prefix_angles")] if prefix else [])
        cases.append(Case(case_id, "vision_rope", function, f"{description} ({OWN_PAGE})",
                          {"vision": params, "call": call(function, ["y"], *args)},
                          inputs, {"y": Output(y, bound_tolerance(y, bound))}))
    return cases


def vision_cases() -> list[Case]:
    """``vision-rope/<form>``: the contract's forms (:data:`VISION`), then refpos's own calls
    (:data:`VISION_OWN`)."""
    cases = []
    for name, params, positions, description in VISION:
        case_id = f"vision-rope/{name}"
        rope = _vision(params)
        x = rng_for(case_id).standard_normal((positions.shape[0], rope.head_dim))  # (N, D)
        y = to_np(apply_vision_rope(as_xp(x), as_xp(positions), rope))
        _, inv_freq = vision_frequencies(rope)
        pairs = x.reshape(x.shape[0], -1, 2) if rope.layout == "interleaved" else \
            np.stack([x[:, : rope.head_dim // 2], x[:, rope.head_dim // 2:]], axis=-1)
        magnitude = np.linalg.norm(pairs, axis=-1).max(axis=-1)  # (N,): the patch's largest pair
        tolerance = tolerance_rope(positions.max(axis=-1), inv_freq, magnitude)
        cases.append(Case(case_id, "vision_rope", "apply_vision_rope",
                          f"{description} (docs/mrope.md#vision-encoders-2-d-axial-rope)",
                          {"vision": params, "call": call("apply_vision_rope", ["y"], In("x"), In("positions"),
                                                          Param("vision"))},
                          {"x": x, "positions": positions.astype(np.int64)}, {"y": Output(y, tolerance)}))
    return cases + _own_cases()


#: (case name, head size, pair layout of each half, context, length, description)
ROPE_2D = (
    ("chatglm-context5-len9", 16, "half", 5, 9,
     "ChatGLM-6B's 2-D positions (head size 16, each half rotate_half): a context of 5, 4 tokens generated at "
     "the mask's position with block positions 1 … 4"),
    ("interleaved-context3-len6", 8, "interleaved", 3, 6,
     "the same two axes with each half's pairs interleaved (head size 8): a context of 3, 3 tokens generated"),
)


def rope_2d_cases() -> list[Case]:
    """GLM's rotation: channels ``0 … D/2 − 1`` turned by the position, ``D/2 … D − 1`` by the block position. The
    tolerance of a row is the rope rule's at the larger of its two positions (each half's angles are ``p·ω`` with
    one set of frequencies, so the larger position bounds both halves' angle error), with the row's largest pair."""
    cases = []
    for name, head_dim, layout, context, length, description in ROPE_2D:
        case_id = f"rope-2d/{name}"
        rope = RopeConfig(head_dim=head_dim // 2, theta=10000.0, layout=layout)
        positions = glm_position_ids(context, length)  # (2, T)
        x = rng_for(case_id).standard_normal((length, head_dim))  # (T, D)
        y = to_np(apply_rope_2d(as_xp(x), as_xp(positions), rope))
        halves = [x[:, :head_dim // 2], x[:, head_dim // 2:]]
        pairs = np.concatenate([h.reshape(length, -1, 2) if layout == "interleaved" else
                                np.stack([h[:, : head_dim // 4], h[:, head_dim // 4:]], axis=-1) for h in halves],
                               axis=1)
        magnitude = np.linalg.norm(pairs, axis=-1).max(axis=-1)  # (T,): the row's largest pair
        inv_freq = to_np(refpos.rope_frequencies(rope)[0])
        tolerance = tolerance_rope(positions.max(axis=0), inv_freq, magnitude)
        cases.append(Case(case_id, "rope_2d", "apply_rope_2d", f"{description} (docs/rope.md#glm-2-d-positions)",
                          {"rope": rope.to_params(), "axes": list(GLM_AXES)},
                          {"x": x, "positions": positions}, {"y": Output(y, tolerance)}))
    return cases


#: (case name, window, attention_chunk, query count, description)
LOCAL = (
    ("sliding-w3-prefill", 3, None, 8, "Gemma's sliding window of 3 keys, a prefill of 8 tokens"),
    ("sliding-w3-decode", 3, None, 3, "the same window, three queries at the end of 8 keys"),
    ("chunked-c3-prefill", None, 3, 8, "Llama 4's chunked-local attention in chunks of 3, a prefill of 8"),
    ("chunked-c3-decode", None, 3, 3, "the same chunks, three queries at the end of 8 keys"),
)


def local_attention_cases() -> list[Case]:
    cases = []
    for name, window, chunk, t_q, description in LOCAL:
        case_id = f"local-attention/{name}"
        rng = rng_for(case_id)
        q, k, v = rng.standard_normal((1, 4, t_q, 4)), rng.standard_normal((1, 2, 8, 4)), rng.standard_normal(
            (1, 2, 8, 4))
        allowed = refpos.core.causal_mask(t_q, 8)
        if window is not None:
            allowed = allowed & refpos.core.sliding_window_mask(t_q, 8, window)
        if chunk is not None:
            allowed = allowed & refpos.core.chunked_causal_mask(t_q, 8, chunk)
        out = to_np(refpos.attention(as_xp(q), as_xp(k), as_xp(v), mask=as_xp(to_np(allowed))))
        cases.append(Case(case_id, "local_attention", "local_attention",
                          f"{description}; 4 query heads on 2 key/value heads, queries aligned to the end of the keys",
                          {"window": window, "attention_chunk": chunk,
                           "call": call("local_attention", ["out"], In("q"), In("k"), In("v"), Param("window"),
                                        Param("attention_chunk"))},
                          {"q": q, "k": k, "v": v}, {"out": Output(out, tolerance_value(out, scale=np.abs(v).max()))}))
    return cases


#: (rule, the contract's scale dict, description)
SCALES = (
    ("llama4_temperature", {"rule": "llama4_temperature", "attn_scale": 0.1, "floor_scale": 8192.0},
     "Llama 4's temperature of its layers without RoPE (attn_scale 0.1, floor_scale 8192)"),
    ("llama_4_scaling_beta", {"rule": "llama_4_scaling_beta", "beta": 0.1, "original_max_position_embeddings": 16384},
     "Ministral-3's llama_4_scaling_beta (β = 0.1, L₀ = 16384)"),
)
#: every step edge of both rules up to 2²⁰ and its neighbours
SCALE_POSITIONS = np.unique(np.concatenate([[0, 1, 2], *([e - 2, e - 1, e, e + 1] for e in 8192 * np.arange(1, 9)),
                                            [16384 * 64 - 1, 16384 * 64, 2**20]])).astype(np.int64)


def query_scale_cases() -> list[Case]:
    cases = []
    for rule, params, description in SCALES:
        scale = QueryScale(rule, tuple((k, float(v)) for k, v in params.items() if k != "rule"))(SCALE_POSITIONS)
        cases.append(Case(f"query-scale/{rule}", "query_scale", "query_scale",
                          f"{description}: the multiplier of the query at every step edge up to 2^20",
                          {"scale": params, "call": call("query_scale", ["scale"], In("positions"), Param("scale"))},
                          {"positions": SCALE_POSITIONS}, {"scale": Output(scale, tolerance_value(scale))}))
    return cases
