r"""Which keys of the candidate's scaling rule reproduce the frequencies it used, and the band of every pair.

:func:`fit_rule` takes the fitted :math:`\hat\omega_j` (:mod:`refpos.check.fit`) and asks the config's rule
(its record in :data:`refpos.rope.rules.RULES`) for proposals: its ``invert`` runs the formula backwards in
closed form (:mod:`refpos.rope.rules.inverse`: a log-linear fit for a base ``θ``, the plateau ``1/s`` for a
factor, the ramp's line for YaRN's bounds, the blend's line for llama3's band factors, the per-pair divisors for
LongRoPE). A proposal counts only when the rule's own formula (:func:`refpos.rope_frequencies` at the proposed
keys) reproduces every determined :math:`\hat\omega_j` within its bound; the proposals are tried with the fewest
changed keys first, and the first that reproduces is the answer. When none does, the answer is ``None`` with the
reason.

:func:`pair_bands` names the band each pair falls in under the config (the record's ``bands``: llama3's high /
smooth / low wavelength bands, YaRN's ramp, LongRoPE's factor index), as the report groups the wrong pairs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.problem import np_ns
from refpos.golden import tolerance as tol
from refpos.rope.rules import PARAMETERS, rule_of
from refpos.rope.rules.inverse import Changes, Fitted

#: a RopeConfig field -> the config key it is read from (the others are spelled alike)
CONFIG_KEY = {"theta": "rope_theta"}


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
    return matches(omega, fitted)


def matches(omega: np.ndarray, fitted: Fitted) -> tuple[bool, float, int]:
    """Whether the frequencies ``omega`` give every determined ω̂ within its bound (and float64's rounding of
    ``omega``); the largest ratio of a deviation to its bound, and at which pair."""
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


def pair_bands(rope: Any, seq_len: int | None) -> list[str]:
    """The band of every pair under the config (``""``: the rule has no bands): its record's ``bands``."""
    return rule_of(rope.rope_type).bands(rope, seq_len)


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
        for found in rule_of(rope.rope_type).invert(fitted):
            if found:  # the value to 6 digits first (a float32 fit of s = 1 is 0.9999999): it must reproduce too
                proposals += [{k: _rounded(v) for k, v in found.items()}, found]
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


def _rounded(value: Any) -> Any:
    """A proposed value to 6 significant digits (lists element by element; ints and flags as they are)."""
    if isinstance(value, tuple):
        return tuple(_rounded(v) for v in value)
    return float(f"{value:.6g}") if isinstance(value, float) and math.isfinite(value) else value


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
    keys = {k: params[k] for k in ["rope_type", "rope_theta"] if k in params}
    keys.update({k: v for k, v in params.items() if k in _rule_fields(rope)})
    keys.update({_key(k): _plain(v) for k, v in changes.items()})
    return keys


def _rule_fields(rope: Any) -> set[str]:
    """The config keys the rule reads, besides ``rope_theta``."""
    return {p for p in rule_of(rope.rope_type).parameters if PARAMETERS[p].in_config}
