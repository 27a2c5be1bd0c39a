r"""The base-changing rules: static NTK-aware (and vLLM's two ``"ntk"`` forms), dynamic NTK.

Both divide the slowest pair ``j = d/2 − 1`` by the scale while the fastest keeps ``ω_0 = 1``
(docs/extrapolation.md#ntk-aware, docs/extrapolation.md#dynamic-ntk).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from refpos.rope.rules.inverse import Changes, Fitted, log_line
from refpos.rope.rules.plain import base_inv_freq, draw_factor
from refpos.rope.rules.record import Arithmetic, Config, DrawContext, FactorRule, RopeRule


def scaled_base(theta: Any, ratio: Any, d: int, ar: Arithmetic) -> Any:
    r""":math:`\theta\cdot\mathrm{ratio}^{d/(d-2)}`; ``ValueError`` (naming ``factor``) when it overflows float64."""
    try:
        return theta * ratio ** (ar.real(d) / (d - 2))
    except OverflowError:
        raise ValueError(f"factor: the scaled base θ·{ratio}^(d/(d-2)) overflows float64") from None


def ntk_theta(rope: Config, ar: Arithmetic) -> Any:
    r"""Static NTK-aware base :math:`\theta' = \theta\,s^{d/(d-2)}` (docs/extrapolation.md#ntk-aware).

    The lowest pair ``j = d/2 − 1`` is divided by exactly ``s``; ``j = 0`` keeps ``ω_0 = 1``.
    """
    return scaled_base(ar.real(rope.theta), ar.real(rope.factor), rope.rotary_dim, ar)


def ntk_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    r"""``ntk_rule="aware"``: :math:`\theta'^{-2j/d}` (:func:`ntk_theta`). vLLM's ``"ntk"`` rope type
    (``NTKScalingRotaryEmbedding._compute_inv_freq`` in
    ``vllm/model_executor/layers/rotary_embedding/ntk_scaling_rope.py``), fixed and mixed forms:

    .. math::
        \omega^\text{fixed}_j = \frac{(\theta s)^{-2j/d}}{s^{2/d}}, \qquad
        \omega^\text{mixed}_j = \frac{\theta^{-2j/d}}{\exp\bigl(a\,(j+1)^b\bigr)},
        \quad a = \frac{\ln s}{(d/2)^b}

    Both divide the lowest pair by exactly ``s``; the fixed form also divides ``ω_0`` by ``s^{2/d}``.
    """
    d, theta, s = rope.rotary_dim, ar.real(rope.theta), ar.real(rope.factor)
    if rope.ntk_rule == "aware":
        return base_inv_freq(ntk_theta(rope, ar), d, ar)
    if rope.ntk_rule == "vllm_fixed":
        return base_inv_freq(theta * s, d, ar) / s ** (ar.real(2) / d)
    b = ar.real(rope.mixed_b)
    a = ar.log(s) / (ar.real(d) / 2) ** b
    pair_number = ar.arange(1, d // 2 + 1)  # j + 1, (d/2,)
    return base_inv_freq(theta, d, ar) / ar.exp_each(a * pair_number**b)


def dynamic_theta(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    r"""Dynamic-NTK base at length ``L`` (docs/extrapolation.md#dynamic-ntk).

    .. math:: \theta' = \theta\,\Bigl(\frac{s\,L_\text{eff}}{L_\text{max}} - (s - 1)\Bigr)^{d/(d-2)},
        \qquad L_\text{eff} = \max(L, L_\text{max})

    ``L = None`` (HF at initialisation) is ``L_max``: plain RoPE. ``dynamic_rule="vllm_static"`` uses
    ``L = s·L_max`` for every length: :math:`\theta(s^2 - s + 1)^{d/(d-2)}`.
    """
    d, s, l_max = rope.rotary_dim, ar.real(rope.factor), rope.max_position_embeddings
    if rope.dynamic_rule == "vllm_static":
        seq_len = s * l_max
    l_eff = l_max if seq_len is None else max(seq_len, l_max)
    return scaled_base(ar.real(rope.theta), s * l_eff / l_max - (s - 1), d, ar)


def dynamic_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    return base_inv_freq(dynamic_theta(rope, seq_len, ar), rope.rotary_dim, ar)


def base_ratio(fitted: Fitted) -> float | None:
    r"""The fitted base over the config's as the NTK ratio :math:`(\theta'/\theta)^{(d-2)/d}`."""
    line = log_line(fitted, divisor=1.0)
    if line is None:
        return None
    d = fitted.rope.rotary_dim
    return (line[0] / fitted.rope.theta) ** ((d - 2) / d)


def invert_ntk(fitted: Fitted) -> Iterator[Changes]:
    """``s`` (or ``θ``) from the fitted base; vLLM's forms from their own lines."""
    rope, d = fitted.rope, fitted.rope.rotary_dim
    if rope.ntk_rule == "vllm_fixed":  # ln ω = −(2/d) ln s − (2j/d) ln(θs)
        line = log_line(fitted)
        if line:
            s = line[1] ** (d / 2)
            yield {"factor": s}
            yield {"theta": line[0] / s}
        return
    if rope.ntk_rule == "vllm_mixed":  # ln(ω/ω̂) = a (j + 1)^b, a = ln s / (d/2)^b
        r = -np.log(fitted.ratio())
        use = fitted.use & (r > 0)
        if use.sum() >= 2:
            b, log_a = np.polyfit(np.log(fitted.pair[use] + 1), np.log(r[use]), 1)
            yield {"factor": math.exp(math.exp(log_a) * (d / 2) ** b), "mixed_b": float(b)}
        return
    ratio = base_ratio(fitted)
    if ratio:  # θ' = θ s^(d/(d−2)): the fitted base gives s at the config's θ, or θ at the config's s
        yield {"factor": ratio}
        yield {"theta": rope.theta * (ratio / rope.factor) ** (d / (d - 2))}


def invert_dynamic(fitted: Fitted) -> Iterator[Changes]:
    """The length ``L`` (or ``s``, or ``θ``) that gives the fitted base."""
    from refpos.rope.rules.record import Float64

    rope, ratio = fitted.rope, base_ratio(fitted)
    if ratio is None:
        return
    s, l_max, d = rope.factor, rope.max_position_embeddings, rope.rotary_dim
    if rope.dynamic_rule == "vllm_static":  # ratio = s² − s + 1
        if 4 * ratio - 3 >= 0:
            yield {"factor": (1 + math.sqrt(4 * ratio - 3)) / 2}
        return
    length = l_max * (ratio + s - 1) / s  # L_eff
    yield {"seq_len": max(1, round(length))} if length > l_max + 0.5 else {"seq_len": l_max}
    if fitted.seq_len and fitted.seq_len > l_max:
        yield {"factor": (ratio - 1) / (fitted.seq_len / l_max - 1)}
    configured = float(dynamic_theta(rope, fitted.seq_len, Float64(np)))  # θ changed, the scaling kept
    yield {"theta": rope.theta * ratio ** (d / (d - 2)) * rope.theta / configured}


def check_ntk(rope: Config) -> Mapping[str, Any]:
    rule = "aware" if rope.ntk_rule is None else rope.ntk_rule
    if (rule == "vllm_mixed") != (rope.mixed_b is not None):
        raise ValueError("mixed_b goes with ntk_rule='vllm_mixed' (required there, not allowed otherwise), got "
                         f"ntk_rule={rule!r}, mixed_b={rope.mixed_b!r}")
    return {"ntk_rule": rule}


def implied_ntk_rule(rope_dict: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """A config's ``"ntk"`` is vLLM's (transformers has no such type): mixed with ``mixed_b``, else fixed."""
    form = "mixed" if rope_dict.get("mixed_b") is not None else "fixed"
    return {"ntk_rule": f"vllm_{form}"}, f"rope type 'ntk' is not a transformers type: read as vLLM's {form} NTK rule"


def draw_dynamic(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    keys: dict[str, Any] = {"factor": ctx.factor, "max_position_embeddings": ctx.original}
    if draw(st.booleans()):
        keys["dynamic_rule"] = "vllm_static"
    return keys


NTK = RopeRule(
    name="ntk", doc="docs/extrapolation.md#ntk-aware", omega=r"$\theta'^{-2j/d}$, $\theta' = \theta s^{d/(d-2)}$; "
    "vLLM's fixed and mixed forms", attention="1",
    source="bloc97 (NTK-aware); vLLM NTKScalingRotaryEmbedding (ntk_scaling_rope.py)", inv_freq=ntk_inv_freq,
    draw=draw_factor, parameters=("factor", "ntk_rule", "mixed_b"), factor=FactorRule(), check=check_ntk,
    min_rotary_dim=4, implied=implied_ntk_rule,
    example={"factor": 8.0, "ntk_rule": "vllm_mixed", "mixed_b": 0.625}, invert=invert_ntk,
)

DYNAMIC = RopeRule(
    name="dynamic", doc="docs/extrapolation.md#dynamic-ntk",
    omega=r"$\theta'(L)^{-2j/d}$, $\theta'(L) = \theta (sL/L_\text{max} - s + 1)^{d/(d-2)}$", attention="1",
    source="emozilla (dynamic NTK); transformers _compute_dynamic_ntk_parameters",
    inv_freq=dynamic_inv_freq, draw=draw_dynamic, parameters=("factor", "dynamic_rule"), factor=FactorRule(),
    required=(("max_position_embeddings", "transformers scales from it"),), min_rotary_dim=4,
    transformers="_compute_dynamic_ntk_parameters",
    example={"factor": 2.0, "max_position_embeddings": 4096}, invert=invert_dynamic,
)
