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
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from refpos.rope.rules.inverse import Changes, Fitted, invert_theta
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


def ramp_bounds(gamma: np.ndarray, use: np.ndarray) -> tuple[float, float] | None:
    r"""``(lo, hi)`` of a ramp :math:`\gamma_j = \mathrm{clip}((j - lo)/(hi - lo), 0, 1)` from its values: the line
    of two interior pairs or more, else the last pair at 0 and the first at 1 (a truncated ramp)."""
    j = np.arange(gamma.size, dtype=np.float64)
    interior = use & (gamma > 1e-9) & (gamma < 1 - 1e-9)
    if interior.sum() >= 2:
        slope, intercept = np.polyfit(j[interior], gamma[interior], 1)
        if slope <= 0:
            return None
        lo = -intercept / slope
        return float(lo), float(lo + 1 / slope)
    zero, one = np.flatnonzero(use & (gamma <= 1e-9)), np.flatnonzero(use & (gamma >= 1 - 1e-9))
    if zero.size == 0 or one.size == 0 or zero.max() > one.min():
        return None
    return float(zero.max()), float(one.min())


def rotations_at(rope: Config, pair: float) -> float:
    r"""The inverse of :func:`yarn_pair_at`: the turns within ``L_0`` of pair ``pair``,
    :math:`n = L_0/(2\pi)\,\theta^{-2\,\mathrm{pair}/d}`."""
    return rope.original_max_position_embeddings / (2 * math.pi) * rope.theta ** (-2 * pair / rope.rotary_dim)


def ramp_proposals(fitted: Fitted, gamma: np.ndarray, scale: Changes) -> Iterator[Changes]:
    """The truncation, the scale, the betas and ``L_0`` from a fitted ramp ``gamma`` (YaRN-shaped rules)."""
    from refpos.rope.rules.record import Float64

    rope = fitted.rope
    yield {"truncate": not rope.truncate}
    yield scale
    bounds = ramp_bounds(gamma, fitted.use)
    if bounds is None:
        return
    lo, hi = bounds
    lo_cfg, hi_cfg = yarn_correction_range(rope, Float64(np))
    if rope.truncate:  # lo = ⌊pair_at(β_fast)⌋, hi = ⌈pair_at(β_slow)⌉: a β inside the range gives them
        fast = math.sqrt(rotations_at(rope, round(lo)) * rotations_at(rope, round(lo) + 1))
        slow = math.sqrt(rotations_at(rope, round(hi)) * rotations_at(rope, round(hi) - 1))
    else:
        fast, slow = rotations_at(rope, lo), rotations_at(rope, hi)
    yield {"beta_fast": fast}
    yield {"beta_slow": slow}
    shift = ((lo - lo_cfg) + (hi - hi_cfg)) / 2  # a longer L_0 moves both bounds up by d ln(L_0'/L_0)/(2 ln θ)
    yield {"original_max_position_embeddings": max(1, round(rope.original_max_position_embeddings
                                                            * rope.theta ** (2 * shift / rope.rotary_dim)))}
    yield {"beta_fast": fast, "beta_slow": slow}


def configured_ramp(rope: Config) -> np.ndarray:
    """γ of every pair under the config."""
    from refpos.rope.rules.record import Float64

    return np.asarray(yarn_ramp(rope, Float64(np)), dtype=np.float64)


def invert_yarn(fitted: Fitted) -> Iterator[Changes]:
    r""":math:`\hat\omega/\omega = 1 - \gamma(1 - 1/s)`: the slowest pair gives ``s``, the others the ramp."""
    rope, r = fitted.rope, fitted.ratio()
    last = np.flatnonzero(fitted.use)
    s = 1 / float(r[last[-1]]) if last.size and r[last[-1]] > 0 else rope.factor
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma = (1 - r) / (1 - 1 / rope.factor) if rope.factor != 1 else np.zeros_like(r)
    yield from ramp_proposals(fitted, gamma, {"factor": s})
    yield from invert_theta(fitted, configured_ramp(rope) == 0)


def invert_yarn_log(fitted: Fitted) -> Iterator[Changes]:
    r""":math:`\ln(\hat\omega/\omega) = -(1 - \mu_j)\ln s` with :math:`\mu_j = (1 - \gamma_j)\,e`: the fastest pair
    gives ``e``, the slowest ``s``, the others the ramp."""
    rope, r = fitted.rope, fitted.ratio()
    if rope.factor == 1:
        return
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = 1 + np.log(r) / math.log(rope.factor)
    use = np.flatnonzero(fitted.use)
    if use.size:
        yield {"extrapolation_factor": float(np.clip(mu[use[0]], 0.0, 1.0))}
    e = rope.extrapolation_factor
    gamma = 1 - mu / e if e else np.zeros_like(mu)
    yield from ramp_proposals(fitted, gamma, {"factor": 1 / float(r[use[-1]])} if use.size else {})


def ramp_bands(rope: Config, seq_len: int | None) -> list[str]:
    """Each pair before the ramp (kept), on it (its γ) or after it (divided by ``s``)."""
    return ["before the ramp: kept" if g == 0 else "after the ramp: ω/s" if g == 1 else "on the ramp: blended"
            for g in configured_ramp(rope)]


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
    invert=invert_yarn, bands=ramp_bands,
)

YARN_LOG = RopeRule(
    name="yarn_log", doc="docs/extrapolation.md#yarn-log",
    omega=r"$\omega_j s^{-(1 - \mu_j)}$, $\mu_j = (1 - \gamma_j)\,e$: YaRN's ramp in log space", attention="1",
    source="Grok: SGLang models/grok.py and vLLM grok1_scaling_rope.py (extra_method 'yarn_log')",
    inv_freq=yarn_log_inv_freq, draw=draw_yarn_log,
    parameters=("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "extrapolation_factor"),
    required=(("original_max_position_embeddings", ""),), factor=FactorRule(), check=check_yarn_log,
    example={"theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768, "extrapolation_factor": 0.5},
    invert=invert_yarn_log, bands=ramp_bands,
)
