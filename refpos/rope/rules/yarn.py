r"""YaRN ("NTK-by-parts", docs/extrapolation.md#yarn): a ramp between kept and interpolated frequencies, and
its attention factor.

With :math:`\mathrm{pair\_at}(n) = d \ln\bigl(L_0 / (2\pi n)\bigr) / (2 \ln\theta)` the pair index whose
wavelength fits ``n`` times into ``L_0``, the ramp runs from ``lo = pair_at(beta_fast)`` to
``hi = pair_at(beta_slow)``:

.. math:: \gamma_j = \operatorname{clip}\Bigl(\frac{j - lo}{hi - lo}, 0, 1\Bigr), \qquad
    \omega'_j = \frac{\gamma_j}{s\,\theta^{2j/d}} + \frac{1 - \gamma_j}{\theta^{2j/d}}

in transformers' order of operations (the vector tests pin its float64 bits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from refpos.rope.rules.record import Arithmetic, Config, DrawContext, FactorRule, RopeRule


def yarn_pair_at(rotations: Any, rope: Config, ar: Arithmetic) -> Any:
    r"""Pair index whose wavelength fits ``rotations`` times into ``L_0``:
    :math:`d \ln\bigl(L_0 / (2\pi n)\bigr) / (2 \ln\theta)`."""
    d, l0 = rope.rotary_dim, ar.real(rope.original_max_position_embeddings)
    return d * ar.log(l0 / (ar.real(rotations) * 2 * ar.pi)) / (2 * ar.log(ar.real(rope.theta)))


def yarn_correction_range(rope: Config, ar: Arithmetic, *, truncate: bool | None = None) -> tuple[Any, Any]:
    """Ramp bounds ``(lo, hi)`` in pair-index space, as transformers computes them.

    ``lo = pair_at(beta_fast)``, ``hi = pair_at(beta_slow)``; floored / ceiled when ``truncate`` (default:
    ``rope.truncate``); then ``lo ≥ 0`` and ``hi ≤ d − 1`` (the upper clamp is ``d − 1``, not ``d/2 − 1``: bit
    parity with HF).
    """
    lo, hi = yarn_pair_at(rope.beta_fast, rope, ar), yarn_pair_at(rope.beta_slow, rope, ar)
    if rope.truncate if truncate is None else truncate:
        lo, hi = ar.floor(lo), ar.ceil(hi)
    return max(lo, 0), min(hi, rope.rotary_dim - 1)


def yarn_ramp(rope: Config, ar: Arithmetic, *, truncate: bool | None = None) -> Any:
    r"""Interpolation weight per pair, ``0`` = keep ``ω_j``, ``1`` = use ``ω_j / s``:
    :math:`\gamma_j = \operatorname{clip}((j - lo)/(hi - lo), 0, 1)` (``lo == hi`` adds 0.001 to ``hi``, as
    HF, vLLM and the YaRN repository do). ``truncate``: as :func:`yarn_correction_range`."""
    lo, hi = yarn_correction_range(rope, ar, truncate=truncate)
    if lo == hi:
        hi += ar.decimal("0.001")
    j = ar.arange(0, rope.rotary_dim // 2)
    return ar.clip((j - lo) / (hi - lo), 0.0, 1.0)


def yarn_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    r""":math:`\omega'_j = \gamma_j / (s\,\theta^{2j/d}) + (1 - \gamma_j) / \theta^{2j/d}`, HF's order."""
    d = rope.rotary_dim
    pos_freqs = ar.real(rope.theta) ** (ar.arange(0, d, 2) / d)  # θ^(2j/d), (d/2,)
    keep = 1 - yarn_ramp(rope, ar)
    return (1 / (ar.real(rope.factor) * pos_freqs)) * (1 - keep) + (1 / pos_freqs) * keep


def yarn_log_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic, *, blend: str = "log") -> Any:
    r"""Log-space YaRN (Grok): the same ramp, blended in log space with the weight ``e`` of the kept frequency.

    .. math:: \mu_j = (1 - \gamma_j)\,e, \qquad
        \omega'_j = \exp\bigl(\mu_j \ln \omega_j + (1 - \mu_j) \ln(\omega_j / s)\bigr)
        = \omega_j\, s^{-(1 - \mu_j)}

    (the geometric mean of the kept and the interpolated frequency where YaRN takes the arithmetic one), in
    the order of ``ScalingRotaryEmbedding._compute_inv_freq`` with ``extra_method="yarn_log"`` (SGLang
    ``python/sglang/srt/models/grok.py``; vLLM ``Grok1ScalingRotaryEmbedding`` in
    ``vllm/model_executor/layers/rotary_embedding/grok1_scaling_rope.py``). The ramp bounds are always
    floored / ceiled there. ``blend="linear"`` is a variant: the same weights on the frequencies themselves
    (``extra_method="yarn"`` there), as a port that reads the config as YaRN computes.
    """
    d = rope.rotary_dim
    pos_freqs = ar.real(rope.theta) ** (ar.arange(0, d, 2) / d)  # θ^(2j/d), (d/2,)
    kept, interpolated = 1 / pos_freqs, 1 / (ar.real(rope.factor) * pos_freqs)
    weight = (1 - yarn_ramp(rope, ar)) * ar.real(rope.extrapolation_factor)  # μ_j
    if blend == "linear":
        return interpolated * (1 - weight) + kept * weight
    return ar.exp_each(ar.log_each(kept) * weight + ar.log_each(interpolated) * (1 - weight))


def mscale(scale: Any, k: Any, ar: Arithmetic) -> Any:
    r"""YaRN magnitude rule: :math:`0.1\,k\ln s + 1` for ``s > 1``, else 1."""
    return ar.real(1.0) if scale <= 1 else ar.decimal("0.1") * k * ar.log(scale) + 1


def yarn_attention_factor(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    r"""transformers' order: an explicit ``attention_factor``; else, when ``mscale`` and ``mscale_all_dim`` are
    both non-zero, :math:`\mathrm{mscale}(s, k_m) / \mathrm{mscale}(s, k_a)`; else :math:`0.1 \ln s + 1`
    (``mscale`` alone is ignored)."""
    if rope.attention_factor is not None:
        return ar.real(rope.attention_factor)
    s = ar.real(rope.factor)
    if rope.mscale and rope.mscale_all_dim:
        return mscale(s, ar.real(rope.mscale), ar) / mscale(s, ar.real(rope.mscale_all_dim), ar)
    return mscale(s, ar.real(1.0), ar)


def check_ramp(rope: Config) -> Mapping[str, Any]:
    if rope.theta == 1:
        raise ValueError(f"theta must not be 1 for rope_type {rope.rope_type!r} (the ramp bounds divide by ln θ)")
    if rope.beta_fast < rope.beta_slow:
        raise ValueError(f"beta_fast must be >= beta_slow, got beta_fast={rope.beta_fast}, "
                         f"beta_slow={rope.beta_slow}")
    for name in ("beta_fast", "beta_slow"):  # pair_at needs L0 / (2π·β) finite and > 0
        beta = getattr(rope, name)
        if not 0 < rope.original_max_position_embeddings / (2 * math.pi * beta) < math.inf:
            raise ValueError(f"{name} must be a rotation count whose 2π·{name} is finite and > 0 (YaRN's pair index "
                             f"d·ln(L0 / (2π·β)) / (2 ln θ)), got {beta!r}")
    return {}


def check_yarn_log(rope: Config) -> Mapping[str, Any]:
    check_ramp(rope)
    return {"extrapolation_factor": 1.0 if rope.extrapolation_factor is None else rope.extrapolation_factor}


def draw_ramp(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    """``factor``, ``original_max_position_embeddings`` and the ramp's betas (``beta_fast >= beta_slow``)."""
    beta_slow = draw(st.sampled_from([1.0, 2.0, 0.5]))
    return {"factor": ctx.factor, "original_max_position_embeddings": ctx.original,
            "beta_fast": beta_slow * draw(st.sampled_from([32.0, 8.0, 2.0])), "beta_slow": beta_slow}


def draw_yarn(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    keys = draw_ramp(draw, st, ctx)
    extra = "none" if ctx.factor_one else draw(st.sampled_from(["none", "truncate", "attention", "mscale"]))
    if extra == "truncate":
        keys["truncate"] = False
    elif extra == "attention":
        keys["attention_factor"] = draw(st.floats(0.5, 2.0))
    elif extra == "mscale":
        keys.update(mscale=draw(st.sampled_from([0.707, 1.0])), mscale_all_dim=draw(st.sampled_from([0.707, 1.0])))
    return keys


def draw_yarn_log(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    keys = draw_ramp(draw, st, ctx)
    if draw(st.booleans()):  # else the default e = 1; at s = 1 every e gives plain RoPE
        keys["extrapolation_factor"] = draw(st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0.0, 1.0))
    return keys


YARN = RopeRule(
    name="yarn", doc="docs/extrapolation.md#yarn", omega=r"ramp blend of $\omega_j$ and $\omega_j/s$",
    attention=r"$0.1 \ln s + 1$, mscale ratio, or explicit", source="Peng et al. 2023 (YaRN)",
    inv_freq=yarn_inv_freq, attention_factor=yarn_attention_factor, draw=draw_yarn,
    parameters=("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                "attention_factor", "truncate", "softmax_mscale"),
    required=(("original_max_position_embeddings", ""),), factor=FactorRule(from_lengths=True), check=check_ramp,
    transformers="_compute_yarn_parameters",
    example={"theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768},
)

YARN_LOG = RopeRule(
    name="yarn_log", doc="docs/extrapolation.md#yarn-log",
    omega=r"$\omega_j s^{-(1 - \mu_j)}$, $\mu_j = (1 - \gamma_j)\,e$: YaRN's ramp in log space", attention="1",
    source="Grok: SGLang models/grok.py and vLLM grok1_scaling_rope.py (extra_method 'yarn_log')",
    inv_freq=yarn_log_inv_freq, draw=draw_yarn_log,
    parameters=("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "extrapolation_factor"),
    required=(("original_max_position_embeddings", ""),), factor=FactorRule(), check=check_yarn_log,
    example={"theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768, "extrapolation_factor": 0.5},
)
