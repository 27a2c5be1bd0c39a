r"""Which keys of the candidate's scaling rule reproduce the frequencies it used, and the band of every pair.

:func:`fit_rule` takes the fitted :math:`\hat\omega_j` (:mod:`refpos.check.fit`) and the config's rule, and
proposes key values that would give them: each rule inverts its own formula in closed form (a log-linear fit
for a base ``θ``, the plateau ``1/s`` for a factor, the ramp's line for YaRN's bounds, the blend's line for
llama3's band factors, the per-pair divisors for LongRoPE). A proposal counts only when the rule's own formula
(:func:`refpos.rope_frequencies` at the proposed keys) reproduces every determined :math:`\hat\omega_j` within
its bound; the proposals are tried with the fewest changed keys first, and the first that reproduces is the
answer. When none does, the answer is ``None`` with the reason.

:func:`pair_bands` names the band each pair falls in under the config (llama3's high / smooth / low
wavelength bands, YaRN's ramp, LongRoPE's factor index), as the report groups the wrong pairs.

Each rule's inversion and bands are one entry of :data:`RULE_FITS`, by ``rope_type``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from refpos.backend import to_numpy
from refpos.check.problem import np_ns
from refpos.golden import tolerance as tol

Changes = dict[str, Any]  # RopeConfig field (or "seq_len") -> value

#: a RopeConfig field -> the config key it is read from (the others are spelled alike)
CONFIG_KEY = {"theta": "rope_theta"}


class Fitted(NamedTuple):
    """What a proposal is judged against: the config, its length, and the fitted frequencies."""

    rope: Any  # the config's RopeConfig
    seq_len: int | None
    omega: np.ndarray  # (m,) ω̂, NaN where undetermined
    bound: np.ndarray  # (m,) |ω̂ − ω| bound

    @property
    def use(self) -> np.ndarray:
        return np.isfinite(self.omega) & np.isfinite(self.bound)

    @property
    def pair(self) -> np.ndarray:
        return np.arange(self.omega.size, dtype=np.float64)

    def plain(self, theta: float | None = None, denominator: int | None = None) -> np.ndarray:
        r""":math:`\theta^{-2j/d}` for every pair (``d`` the rotary size, or ``denominator``)."""
        d = denominator or self.rope.rotary_dim
        return float(theta or self.rope.theta) ** (-2.0 * self.pair / d)


def _frequencies(rope: Any, seq_len: int | None) -> np.ndarray:
    import refpos

    return np.asarray(to_numpy(refpos.rope_frequencies(rope, seq_len=seq_len, xp=np_ns())[0]))


def reproduces(fitted: Fitted, changes: Changes) -> tuple[bool, float, int]:
    """Whether the rule at the config with ``changes`` gives every determined ω̂ within its bound; the
    largest ratio of a deviation to its bound, and at which pair."""
    seq_len = changes.get("seq_len", fitted.seq_len)
    try:
        rope = dataclasses.replace(fitted.rope, **{k: v for k, v in changes.items() if k != "seq_len"})
        omega = _frequencies(rope, seq_len)
    except (ValueError, TypeError, OverflowError, ZeroDivisionError):
        return False, math.inf, -1
    if omega.shape != fitted.omega.shape:
        return False, math.inf, -1
    use = fitted.use
    if not use.any():
        return False, math.inf, -1
    allowed = fitted.bound + tol.RTOL_FLOAT64 * np.abs(omega)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(use, np.abs(omega - fitted.omega) / allowed, 0.0)
    worst = int(np.argmax(ratio))
    return bool(ratio[worst] <= 1.0), float(ratio[worst]), worst


# --------------------------------------------------------------------------------- closed-form inversions
def _log_line(fitted: Fitted, mask: np.ndarray | None = None, *, divisor: float | None = None,
              denominator: int | None = None) -> tuple[float, float] | None:
    r"""Least squares :math:`\ln\hat\omega_j = -\ln s - x_j \ln\theta`, :math:`x_j = 2j/d`: ``(θ, s)``, the base
    and the divisor. ``divisor``: ``s`` given, only ``θ`` fitted. ``None`` with fewer than 2 usable pairs."""
    d = denominator or fitted.rope.rotary_dim
    use = fitted.use & (fitted.omega > 0) & (True if mask is None else mask)
    if use.sum() < 2:
        return None
    x, y = 2 * fitted.pair[use] / d, np.log(fitted.omega[use])
    if divisor is not None:
        y = y + math.log(divisor)
        slope = float(np.sum(x * y) / np.sum(x * x)) if np.any(x) else 0.0
        return math.exp(-slope), divisor
    slope, intercept = np.polyfit(x, y, 1)
    return math.exp(-float(slope)), math.exp(-float(intercept))


def _ratio(fitted: Fitted, theta: float | None = None) -> np.ndarray:
    """ω̂_j / θ^(−2j/d): 1 where the pair kept its plain frequency, 1/s where it was divided by the scale."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return fitted.omega / fitted.plain(theta)


def _theta_only(fitted: Fitted, mask: np.ndarray | None = None, divisor: float = 1.0) -> Iterator[Changes]:
    """The base alone, from the pairs of ``mask`` (divided by ``divisor`` under the config)."""
    line = _log_line(fitted, mask, divisor=divisor)
    if line:
        yield {"theta": line[0]}


def invert_default(fitted: Fitted) -> Iterator[Changes]:
    yield from _theta_only(fitted)


def invert_linear(fitted: Fitted) -> Iterator[Changes]:
    r = _ratio(fitted)
    if fitted.use.any():
        yield {"factor": float(1 / np.exp(np.nanmean(np.log(r[fitted.use]))))}
    yield from _theta_only(fitted, divisor=fitted.rope.factor)
    line = _log_line(fitted)
    if line:
        yield {"theta": line[0], "factor": line[1]}


def _base_ratio(fitted: Fitted) -> float | None:
    r"""The fitted base over the config's, as :math:`(\theta'/\theta)^{(d-2)/d}`: the NTK ratio."""
    line = _log_line(fitted, divisor=1.0)
    if line is None:
        return None
    d = fitted.rope.rotary_dim
    return (line[0] / fitted.rope.theta) ** ((d - 2) / d)


def invert_ntk(fitted: Fitted) -> Iterator[Changes]:
    rope, d = fitted.rope, fitted.rope.rotary_dim
    if rope.ntk_rule == "vllm_fixed":  # ln ω = −(2/d) ln s − (2j/d) ln(θs)
        line = _log_line(fitted)
        if line:
            s = line[1] ** (d / 2)
            yield {"factor": s}
            yield {"theta": line[0] / s}
        return
    if rope.ntk_rule == "vllm_mixed":  # ln(ω/ω̂) = a (j + 1)^b, a = ln s / (d/2)^b
        r = -np.log(_ratio(fitted))
        use = fitted.use & (r > 0)
        if use.sum() >= 2:
            b, log_a = np.polyfit(np.log(fitted.pair[use] + 1), np.log(r[use]), 1)
            yield {"factor": math.exp(math.exp(log_a) * (d / 2) ** b), "mixed_b": float(b)}
        return
    ratio = _base_ratio(fitted)
    if ratio:  # θ' = θ s^(d/(d−2)): the fitted base gives s at the config's θ, or θ at the config's s
        yield {"factor": ratio}
        yield {"theta": rope.theta * ratio ** (d / (d - 2)) / rope.factor ** (d / (d - 2))}


def invert_dynamic(fitted: Fitted) -> Iterator[Changes]:
    rope, ratio = fitted.rope, _base_ratio(fitted)
    if ratio is None:
        return
    s, l_max = rope.factor, rope.max_position_embeddings
    if rope.dynamic_rule == "vllm_static":  # ratio = s² − s + 1
        if 4 * ratio - 3 >= 0:
            yield {"factor": (1 + math.sqrt(4 * ratio - 3)) / 2}
        return
    length = l_max * (ratio + s - 1) / s  # L_eff
    yield {"seq_len": max(1, round(length))} if length > l_max + 0.5 else {"seq_len": l_max}
    if fitted.seq_len and fitted.seq_len > l_max:
        yield {"factor": (ratio - 1) / (fitted.seq_len / l_max - 1)}
    from refpos.rope.scaling import dynamic_theta

    d = rope.rotary_dim  # the fitted base over the config's at its length: θ changed, the scaling kept
    yield {"theta": rope.theta * ratio ** (d / (d - 2)) * rope.theta / dynamic_theta(rope, fitted.seq_len)}


def _ramp_bounds(gamma: np.ndarray, use: np.ndarray) -> tuple[float, float] | None:
    r"""``(lo, hi)`` of a ramp :math:`\gamma_j = \mathrm{clip}((j - lo)/(hi - lo), 0, 1)` from its values.

    Two interior pairs or more: their line. Fewer: the last pair at 0 and the first at 1 (a truncated ramp).
    """
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


def _pairs_to_rotations(rope: Any, pair: float) -> float:
    r"""The inverse of YaRN's ``pair_at``: the turns ``n`` within ``L_0`` of pair ``pair``,
    :math:`n = L_0/(2\pi)\,\theta^{-2\,\mathrm{pair}/d}`."""
    return rope.original_max_position_embeddings / (2 * math.pi) * rope.theta ** (-2 * pair / rope.rotary_dim)


def _ramp_proposals(fitted: Fitted, gamma: np.ndarray, scale_key: Changes) -> Iterator[Changes]:
    """YaRN-shaped rules: the betas, the pre-training length and truncation from the fitted ramp ``gamma``."""
    from refpos.rope.scaling import yarn_correction_range

    rope = fitted.rope
    bounds = _ramp_bounds(gamma, fitted.use)
    yield {"truncate": not rope.truncate}
    yield scale_key
    if bounds is None:
        return
    lo, hi = bounds
    lo_cfg, hi_cfg = yarn_correction_range(rope)
    if rope.truncate:  # lo = ⌊pair_at(β_fast)⌋, hi = ⌈pair_at(β_slow)⌉: any β in the range gives them
        fast = math.sqrt(_pairs_to_rotations(rope, round(lo)) * _pairs_to_rotations(rope, round(lo) + 1))
        slow = math.sqrt(_pairs_to_rotations(rope, round(hi)) * _pairs_to_rotations(rope, round(hi) - 1))
    else:
        fast, slow = _pairs_to_rotations(rope, lo), _pairs_to_rotations(rope, hi)
    yield {"beta_fast": fast}
    yield {"beta_slow": slow}
    shift = ((lo - lo_cfg) + (hi - hi_cfg)) / 2  # a longer L_0 moves both bounds up by d ln(L_0'/L_0)/(2 ln θ)
    length = rope.original_max_position_embeddings * rope.theta ** (2 * shift / rope.rotary_dim)
    yield {"original_max_position_embeddings": max(1, round(length))}
    yield {"beta_fast": fast, "beta_slow": slow}


def invert_yarn(fitted: Fitted) -> Iterator[Changes]:
    r"""YaRN: :math:`\hat\omega/\omega = 1 - \gamma(1 - 1/s)`; the slowest pair gives ``s``, the rest the ramp."""
    rope, r = fitted.rope, _ratio(fitted)
    last = np.flatnonzero(fitted.use)
    s = 1 / float(r[last[-1]]) if last.size and r[last[-1]] > 0 else rope.factor
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma = (1 - r) / (1 - 1 / rope.factor) if rope.factor != 1 else np.zeros_like(r)
    yield from _ramp_proposals(fitted, gamma, {"factor": s})
    yield from _theta_only(fitted, _kept_by_ramp(rope))


def _kept_by_ramp(rope: Any) -> np.ndarray:
    """The pairs YaRN's ramp keeps at their plain frequency under the config (γ = 0)."""
    from refpos.rope.scaling import yarn_ramp

    return np.asarray(to_numpy(yarn_ramp(rope, np_ns()))) == 0


def invert_yarn_log(fitted: Fitted) -> Iterator[Changes]:
    r"""Log-space YaRN: :math:`\ln(\hat\omega/\omega) = -(1 - \mu_j)\ln s`, :math:`\mu_j = (1 - \gamma_j)\,e`."""
    rope, r = fitted.rope, _ratio(fitted)
    if rope.factor == 1:
        return
    mu = 1 + np.log(r) / math.log(rope.factor)
    first = np.flatnonzero(fitted.use)
    if first.size:
        yield {"extrapolation_factor": float(np.clip(mu[first[0]], 0.0, 1.0))}
    e = rope.extrapolation_factor if rope.extrapolation_factor is not None else 1.0
    gamma = 1 - mu / e if e else np.zeros_like(mu)
    last = first[-1] if first.size else None
    yield from _ramp_proposals(fitted, gamma, {"factor": 1 / float(r[last])} if last is not None else {})


def _llama3_bands(rope: Any, omega: np.ndarray) -> np.ndarray:
    r"""0 high (:math:`\lambda < L_0/h`, kept), 1 smooth (blended), 2 low (:math:`\lambda > L_0/l`, ω/s), by
    wavelength :math:`\lambda = 2\pi/\omega` (docs/extrapolation.md#llama3)."""
    with np.errstate(divide="ignore"):
        wavelength = 2 * math.pi / omega
    l0 = rope.original_max_position_embeddings
    return np.where(wavelength < l0 / rope.high_freq_factor, 0, np.where(wavelength > l0 / rope.low_freq_factor, 2,
                                                                          1))


def invert_llama3(fitted: Fitted) -> Iterator[Changes]:
    r"""llama3: in the smooth band :math:`g_j = (\hat\omega_j/\omega_j - 1/s)/(1 - 1/s) = \alpha\omega_j + \beta`
    with :math:`\alpha = L_0/(2\pi(h - l))`, :math:`\beta = -l/(h - l)`; the low band gives ``s``."""
    rope, r = fitted.rope, _ratio(fitted)
    s, plain = rope.factor, fitted.plain()
    divided = fitted.use & (np.abs(r * s - 1) < 1e-3)
    kept = fitted.use & (np.abs(r - 1) < 1e-9)
    low = fitted.use & (_llama3_bands(rope, plain) == 2)
    if low.any():
        yield {"factor": float(1 / np.median(r[low]))}
    with np.errstate(invalid="ignore", divide="ignore"):
        g = (r - 1 / s) / (1 - 1 / s)
    blend = fitted.use & (g > 1e-9) & (g < 1 - 1e-9)
    l0, low_f, high_f = rope.original_max_position_embeddings, rope.low_freq_factor, rope.high_freq_factor
    if blend.sum() >= 2:
        alpha, beta = np.polyfit(plain[blend], g[blend], 1)
        if alpha > 0:
            width = l0 / (2 * math.pi * alpha)  # h − l at the config's L_0
            yield {"original_max_position_embeddings": max(1, round(2 * math.pi * alpha * (high_f - low_f)))}
            yield {"low_freq_factor": float(-beta * width), "high_freq_factor": float(-beta * width + width)}
    elif kept.any() and divided.any():  # no blended pair: L_0 between h·(longest kept λ) and l·(shortest divided λ)
        lowest, highest = high_f * 2 * math.pi / plain[kept].min(), low_f * 2 * math.pi / plain[divided].max()
        if lowest < highest:
            yield {"original_max_position_embeddings": max(1, round(math.sqrt(lowest * highest)))}
    yield from _theta_only(fitted, _llama3_bands(rope, plain) == 0)


def invert_longrope(fitted: Fitted) -> Iterator[Changes]:
    r"""LongRoPE: :math:`\hat\Lambda_j = \theta^{-2j/d}/\hat\omega_j`, the divisors of the branch in use."""
    rope, seq_len = fitted.rope, fitted.seq_len
    orig = rope.original_max_position_embeddings
    yield {"seq_len": orig if seq_len and seq_len > orig else orig + 1}
    with np.errstate(invalid="ignore", divide="ignore"):
        divisors = fitted.plain() / fitted.omega
    if fitted.use.all():
        key = "long_factor" if seq_len and seq_len > orig else "short_factor"
        yield {key: tuple(float(v) for v in divisors)}
    yield from _theta_only(fitted)


def invert_proportional(fitted: Fitted) -> Iterator[Changes]:
    rope = fitted.rope
    rotated = fitted.pair < rope.rotary_dim // 2
    use = fitted.use & rotated & (fitted.omega > 0)
    if use.any():
        plain = fitted.plain(denominator=rope.head_dim)
        yield {"factor": float(np.exp(np.mean(np.log(plain[use] / fitted.omega[use]))))}
    line = _log_line(fitted, rotated, divisor=rope.factor, denominator=rope.head_dim)
    if line:
        yield {"theta": line[0]}
    line = _log_line(fitted, rotated, denominator=rope.head_dim)
    if line:
        yield {"theta": line[0], "factor": line[1]}


# --------------------------------------------------------------------------------------------- bands
def plain_bands(rope: Any, seq_len: int | None) -> list[str]:
    """No bands: every pair follows the same formula."""
    return [""] * rope.n_pairs


def llama3_bands(rope: Any, seq_len: int | None) -> list[str]:
    from refpos.rope.scaling import base_inv_freq

    names = ("high band: kept", "smooth band: blended", "low band: ω/s")
    plain = np.asarray(to_numpy(base_inv_freq(rope.theta, rope.rotary_dim, np_ns())))
    return [names[b] for b in _llama3_bands(rope, plain)]


def ramp_bands(rope: Any, seq_len: int | None) -> list[str]:
    from refpos.rope.scaling import yarn_ramp

    gamma = np.asarray(to_numpy(yarn_ramp(rope, np_ns())))
    return ["before the ramp: kept" if g == 0 else "after the ramp: ω/s" if g == 1 else f"ramp γ = {g:.3g}"
            for g in gamma]


def longrope_bands(rope: Any, seq_len: int | None) -> list[str]:
    branch = "long_factor" if seq_len and seq_len > rope.original_max_position_embeddings else "short_factor"
    return [f"{branch}[{j}]" for j in range(rope.n_pairs)]


def proportional_bands(rope: Any, seq_len: int | None) -> list[str]:
    rotated = rope.rotary_dim // 2
    return ["rotated" if j < rotated else "not rotated (ω = 0)" for j in range(rope.head_dim // 2)]


class RuleFit(NamedTuple):
    """A scaling rule's inversion (proposals of changed keys) and its bands (a label per pair)."""

    invert: Callable[[Fitted], Iterator[Changes]]
    bands: Callable[[Any, int | None], list[str]]


#: rope_type -> how to invert its frequencies and name its bands
RULE_FITS: dict[str, RuleFit] = {
    "default": RuleFit(invert_default, plain_bands),
    "linear": RuleFit(invert_linear, plain_bands),
    "ntk": RuleFit(invert_ntk, plain_bands),
    "dynamic": RuleFit(invert_dynamic, plain_bands),
    "yarn": RuleFit(invert_yarn, ramp_bands),
    "llama3": RuleFit(invert_llama3, llama3_bands),
    "longrope": RuleFit(invert_longrope, longrope_bands),
    "proportional": RuleFit(invert_proportional, proportional_bands),
}


def pair_bands(rope: Any, seq_len: int | None) -> list[str]:
    """The band of every pair under the config (``""``: the rule has no bands)."""
    return RULE_FITS[rope.rope_type].bands(rope, seq_len)


def fit_rule(rope: Any, seq_len: int | None, omega: np.ndarray, bound: np.ndarray) -> dict[str, Any]:
    """The keys of the config's rule that reproduce the fitted frequencies (see the module docstring).

    Returns ``{"rope_type", "keys": {config key: value}, "changed": {config key: [config, fitted]}}``, or
    ``{"rope_type", "keys": None, "reason": …}`` when no proposal reproduces them.
    """
    fitted = Fitted(rope, seq_len, np.asarray(omega, dtype=np.float64), np.asarray(bound, dtype=np.float64))
    if not fitted.use.any():
        return {"rope_type": rope.rope_type, "keys": None, "reason": "no pair's frequency is determined"}
    backwards = np.flatnonzero(fitted.use & (fitted.omega < 0) & (np.abs(fitted.omega) > fitted.bound))
    if backwards.size:
        return {"rope_type": rope.rope_type, "keys": None, "reason": f"the candidate turns {backwards.size} pairs "
                "backwards (ω̂ < 0): no rule gives negative frequencies"}
    proposals: list[Changes] = [{}]
    try:
        proposals += [p for p in RULE_FITS[rope.rope_type].invert(fitted) if p]
    except (ValueError, TypeError, ZeroDivisionError, OverflowError, FloatingPointError):
        pass
    proposals.sort(key=len)
    best: tuple[float, Changes, int] | None = None
    for changes in proposals:
        ok, ratio, worst = reproduces(fitted, changes)
        if ok:
            return {"rope_type": rope.rope_type, "keys": _keys(rope, seq_len, changes),
                    "changed": {_key(k): [_config_value(rope, seq_len, k), _plain(v)] for k, v in changes.items()}}
        if best is None or ratio < best[0]:
            best = (ratio, changes, worst)
    ratio, changes, worst = best
    tried = sorted({_key(k) for p in proposals for k in p})
    closest = ", ".join(f"{_key(k)} = {_shown(v)}" for k, v in changes.items()) or "the config's own keys"
    return {"rope_type": rope.rope_type, "keys": None, "reason": (
        f"no value of {', '.join(tried) or 'its keys'} (one or two at a time) reproduces ω̂ within its bounds; "
        f"closest: {closest}, {ratio:.3g}× the bound at pair {worst}")}


def _key(field: str) -> str:
    return CONFIG_KEY.get(field, field)


def _plain(value: Any) -> Any:
    return [float(v) for v in value] if isinstance(value, tuple) else value


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return f"[{', '.join(f'{v:.6g}' for v in value)}]"
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def _config_value(rope: Any, seq_len: int | None, field: str) -> Any:
    return seq_len if field == "seq_len" else _plain(getattr(rope, field))


def _keys(rope: Any, seq_len: int | None, changes: Changes) -> dict[str, Any]:
    """The rule's config keys at the reproducing values (the config's where unchanged)."""
    params = {k: v for k, v in rope.to_params().items() if v is not None}
    keys = {k: params[k] for k in ("rope_type", "rope_theta") if k in params}
    keys.update({k: v for k, v in params.items() if k in _rule_fields(rope)})
    keys.update({_key(k): _plain(v) for k, v in changes.items()})
    return keys


def _rule_fields(rope: Any) -> set[str]:
    """The config keys the rule reads, besides ``rope_theta`` (RopeConfig's own table of them)."""
    from refpos.rope import config as rope_config

    fields = getattr(rope_config, "_TYPE_FIELDS", {}).get(rope.rope_type, frozenset())
    return {_key(f) for f in fields}
