r"""Certify golden values against an arbitrary-precision (mpmath, 30 digits) evaluation.

Each function here re-evaluates one elementwise formula of the reference (docs/) with ``mpmath`` at
:data:`DIGITS` significant digits, from the float64 inputs taken as exact numbers: RoPE frequencies of
every ``rope_type`` (docs/extrapolation.md#the-math) and the attention factor (each rule's own formula in
:class:`Exact` arithmetic, :data:`refpos.rope.rules.RULES`), cos/sin tables, rotated vectors, sinusoid
tables, ALiBi slopes, T5 buckets, softmax rows. :func:`certificate` compares a float64 golden array with
these values and reports the largest error in ulps.

The ulp of an element is taken at ``max(|exact|, scale)``: ``scale`` is the natural size of the quantity
(1 for cos/sin, ``A·‖pair‖`` for a rotated pair, 0 for frequencies and slopes), so a value that crosses
zero is measured against the size of what produced it, not against its own tiny magnitude.

Examples
--------
>>> import numpy as np
>>> exact = mp_inv_freq({"rope_type": "default", "rope_theta": 1e4, "head_dim": 8})
>>> [float(w) for w in exact]
[1.0, 0.1, 0.01, 0.001]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mpmath
import numpy as np

DIGITS = 30
_MP = mpmath.MPContext()
_MP.dps = DIGITS
mp = _MP


def _f(x: Any) -> Any:
    """A float64 (or int) as an exact mpmath number."""
    return mp.mpf(float(x)) if not isinstance(x, (int, np.integer)) else mp.mpf(int(x))


class Exact:
    """The exact arithmetic of the rules' formulas (:class:`refpos.rope.rules.Arithmetic`): mpmath numbers at
    :data:`DIGITS` digits, vectors as NumPy object arrays of them. A float64 config value is taken as the exact
    number it stores; a decimal constant of a formula (``"0.1"``) as the decimal."""

    pi = mp.pi

    @staticmethod
    def real(value: Any) -> Any:
        return _f(value)

    @staticmethod
    def decimal(text: str) -> Any:
        return mp.mpf(text)

    log, sqrt, floor, ceil = staticmethod(mp.log), staticmethod(mp.sqrt), staticmethod(mp.floor), staticmethod(mp.ceil)

    @staticmethod
    def arange(start: int, stop: int, step: int = 1) -> np.ndarray:
        return np.array([mp.mpf(v) for v in range(start, stop, step)], dtype=object)

    @staticmethod
    def vector(values: Sequence[float]) -> np.ndarray:
        return np.array([_f(v) for v in values], dtype=object)

    @staticmethod
    def zeros(n: int) -> np.ndarray:
        return np.array([mp.mpf(0)] * n, dtype=object)

    @staticmethod
    def concat(parts: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate(list(parts))

    exp_each = staticmethod(np.frompyfunc(mp.exp, 1, 1))
    log_each = staticmethod(np.frompyfunc(mp.log, 1, 1))

    @staticmethod
    def clip(v: np.ndarray, low: float, high: float) -> np.ndarray:
        return np.array([min(max(x, mp.mpf(low)), mp.mpf(high)) for x in v], dtype=object)

    @staticmethod
    def where(condition: Any, a: Any, b: Any) -> np.ndarray:
        return np.where(condition, a, b)

    @staticmethod
    def any(condition: Any) -> bool:
        return bool(np.any(condition))


def _rule_and_config(params: Mapping[str, Any]) -> tuple[Any, Any]:
    from refpos.rope.params import rope_config_from_params
    from refpos.rope.rules import RULES

    rope = rope_config_from_params(params)
    return RULES[rope.rope_type], rope


def mp_attention_factor(params: Mapping[str, Any], seq_len: int | None = None) -> Any:
    r"""Exact ``A`` of an adapter-contract ``rope`` dict at length ``seq_len``: the rule's own formula
    (:data:`refpos.rope.rules.RULES`) in :class:`Exact` arithmetic."""
    rule, rope = _rule_and_config(params)
    return rule.attention_factor(rope, seq_len, Exact())


def mp_inv_freq(params: Mapping[str, Any], seq_len: int | None = None) -> list[Any]:
    r"""Exact inverse frequencies of an adapter-contract ``rope`` dict at length ``seq_len``.

    :math:`\omega_j = \theta^{-2j/d}` scaled by the ``rope_type``'s rule (docs/extrapolation.md#the-math): the
    rule's own formula (:data:`refpos.rope.rules.RULES`, the lines the float64 reference runs) in
    :class:`Exact` arithmetic.
    """
    rule, rope = _rule_and_config(params)
    return [mp.mpf(w) for w in rule.inv_freq(rope, seq_len, Exact())]


def mp_cos_sin(positions: Sequence[int], inv_freq: Sequence[Any], factor: Any = 1) -> tuple[list, list]:
    """Exact per-pair ``A·cos(p·ω_j)``, ``A·sin(p·ω_j)`` as nested lists ``[T][m]``."""
    cos, sin = [], []
    for p in positions:
        row_c, row_s = [], []
        for w in inv_freq:
            c, s = mp.cos_sin(_f(int(p)) * w)
            row_c.append(factor * c)
            row_s.append(factor * s)
        cos.append(row_c)
        sin.append(row_s)
    return cos, sin


def pair_index(params: Mapping[str, Any]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Channels ``(u_in, v_in, u_out, v_out)`` of each rotated pair in a head, by layout and placement
    (:func:`refpos.rope.forms.pair_channels` of the contract dict: the rule of :mod:`refpos.pairs`)."""
    from refpos.rope.forms import pair_channels
    from refpos.rope.params import rope_config_from_params

    return pair_channels(rope_config_from_params(params))


def mp_apply(x: np.ndarray, params: Mapping[str, Any], cos: list, sin: list) -> tuple[np.ndarray, np.ndarray]:
    """Exact rotation of ``x (T, D)`` with exact tables; returns (float64 of exact values, pair scale)."""
    u_in, v_in, u_out, v_out = pair_index(params)
    t_len, head_dim = x.shape
    exact = np.empty((t_len, head_dim), dtype=object)
    scale = np.zeros((t_len, head_dim))
    rotated = set(u_out) | set(v_out)
    for t in range(t_len):
        row = [mp.mpf(float(v)) for v in x[t]]  # exact inputs
        for c in range(head_dim):
            if c not in rotated:
                exact[t, c] = row[c]
        for j in range(len(u_in)):
            u, v = row[u_in[j]], row[v_in[j]]
            c_tj, s_tj = cos[t][j], sin[t][j]
            exact[t, u_out[j]] = u * c_tj - v * s_tj
            exact[t, v_out[j]] = v * c_tj + u * s_tj
            # the pair's size A·‖(u, v)‖; a float estimate is enough for an ulp scale
            size = float(np.hypot(float(c_tj), float(s_tj))) * float(np.hypot(x[t, u_in[j]], x[t, v_in[j]]))
            scale[t, u_out[j]] = scale[t, v_out[j]] = size
    return exact, scale


def mp_softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Exact row softmax of a float64 matrix (object array of mpf)."""
    out = np.empty(logits.shape, dtype=object)
    for idx in np.ndindex(logits.shape[:-1]):
        row = [mp.exp(_f(v)) for v in logits[idx]]
        total = mp.fsum(row)
        for j, e in enumerate(row):
            out[(*idx, j)] = e / total
    return out


def _ulp64(value: float) -> float:
    return float(np.spacing(np.float64(abs(value)))) if value != 0 else 2.0**-1074


def certificate(array: np.ndarray, exact_fn: Callable[[], tuple[Any, Any]],
                tolerance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compare a float64 golden array with its exact values; the manifest's ``certified`` entry.

    ``exact_fn()`` returns ``(exact, scale)``: an array-like of mpmath numbers (or ints) shaped like
    ``array`` and the natural size per element (scalar or broadcastable). The result records the
    largest error in ulps of ``max(|exact|, scale)``, the largest absolute error, and whether every
    element lies within the float64 tolerance.
    """
    from refpos.golden.exact.entries import allowed_error

    exact, scale = exact_fn()
    exact = np.asarray(exact, dtype=object).reshape(np.shape(array))
    scale_arr = np.broadcast_to(np.asarray(scale, dtype=np.float64), np.shape(array))
    ref = np.asarray(array)
    worst_ulps, worst_abs = 0.0, 0.0
    errors = np.zeros(ref.shape)
    floating = ref.dtype.kind == "f"
    for idx in np.ndindex(ref.shape):
        e = exact[idx]
        if floating:
            # exact difference: e = hi + lo with hi = fl(e); ref - hi is exact in float64 (Sterbenz) when close
            hi = float(e)
            lo = float(e - hi) if hi != 0.0 or e != 0 else 0.0
            err = abs((float(ref[idx]) - hi) - lo)
            errors[idx] = err
            worst_ulps = max(worst_ulps, err / _ulp64(max(abs(hi), float(scale_arr[idx]))))
        else:
            err = float(abs(int(ref[idx]) - int(e)))
            errors[idx] = err
            worst_ulps = max(worst_ulps, err)
        worst_abs = max(worst_abs, err)
    within = None
    if tolerance is not None and ref.dtype.kind == "f":
        within = bool(np.all(errors <= allowed_error(ref, tolerance, "float64")))
    elif ref.dtype.kind != "f":
        within = worst_abs == 0
    return {"reference": f"mpmath {mpmath.__version__} at {DIGITS} significant digits",
            "max_error_ulps": round(worst_ulps, 4), "max_abs_error": worst_abs,
            "ulp_of": "max(|exact|, scale)", "within_float64_tolerance": within}
