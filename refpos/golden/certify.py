r"""Certify golden values against an arbitrary-precision (mpmath, 30 digits) evaluation.

Each function here re-evaluates one elementwise formula of the reference (docs/) with ``mpmath`` at
:data:`DIGITS` significant digits, from the float64 inputs taken as exact numbers: RoPE frequencies of
every ``rope_type`` (docs/extrapolation.md#the-math) and the attention factor, cos/sin tables, rotated vectors, sinusoid
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


def _get(params: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = params.get(key, default)
    return default if value is None else value


def _rotary_dim(params: Mapping[str, Any]) -> int:
    head_dim = int(params["head_dim"])
    if params.get("rotary_dim") is not None:
        return int(params["rotary_dim"])
    prf = params.get("partial_rotary_factor")
    if prf is None:
        return head_dim
    if params.get("rope_type") == "proportional":
        return 2 * int(float(prf) * head_dim // 2)
    return int(head_dim * float(prf))


def _mscale(s: Any, k: Any = 1) -> Any:
    return mp.mpf(1) if s <= 1 else mp.mpf("0.1") * k * mp.log(s) + 1


def mp_attention_factor(params: Mapping[str, Any], seq_len: int | None = None) -> Any:
    r"""``A`` of docs/extrapolation.md#yarn (yarn) and docs/extrapolation.md#longrope (longrope;
    ``short_mscale`` / ``long_mscale`` at ``seq_len``); 1 otherwise."""
    kind = _get(params, "rope_type", "default")
    explicit = params.get("attention_factor")
    if kind == "yarn":
        if explicit is not None:
            return _f(explicit)
        s = _f(params["factor"])
        m, m_all = params.get("mscale"), params.get("mscale_all_dim")
        if m and m_all:
            return _mscale(s, _f(m)) / _mscale(s, _f(m_all))
        return _mscale(s)
    if kind == "longrope":
        if params.get("short_mscale") is not None:
            use_long = bool(seq_len) and seq_len > int(params["original_max_position_embeddings"])
            return _f(params["long_mscale"] if use_long else params["short_mscale"])
        if explicit is not None:
            return _f(explicit)
        s = _factor_longrope(params)
        return mp.mpf(1) if s <= 1 else mp.sqrt(1 + mp.log(s) / mp.log(_f(params["original_max_position_embeddings"])))
    return mp.mpf(1)


def _factor_longrope(params: Mapping[str, Any]) -> Any:
    if params.get("factor") is not None:
        return _f(params["factor"])
    return _f(params["max_position_embeddings"]) / _f(params["original_max_position_embeddings"])


def mp_inv_freq(params: Mapping[str, Any], seq_len: int | None = None) -> list[Any]:
    r"""Exact inverse frequencies of an adapter-contract ``rope`` dict at length ``seq_len``.

    :math:`\omega_j = \theta^{-2j/d}` scaled by the ``rope_type``'s rule (docs/extrapolation.md#the-math).
    """
    kind = _get(params, "rope_type", "default")
    theta = _f(_get(params, "rope_theta", 10000.0))
    d = _rotary_dim(params)
    m = d // 2

    def base(th: Any, denom: int, count: int) -> list[Any]:
        return [th ** (-mp.mpf(2 * j) / denom) for j in range(count)]

    if kind == "default":
        return base(theta, d, m)
    s = _f(params["factor"]) if params.get("factor") is not None else None
    if kind == "linear":
        return [w / s for w in base(theta, d, m)]
    if kind == "ntk" and params.get("ntk_rule") == "vllm_fixed":  # (θs)^(-2j/d) / s^(2/d)
        return [w / s ** (mp.mpf(2) / d) for w in base(theta * s, d, m)]
    if kind == "ntk" and params.get("ntk_rule") == "vllm_mixed":  # θ^(-2j/d) / exp(a (j+1)^b)
        b = _f(params["mixed_b"])
        a = mp.log(s) / (mp.mpf(d) / 2) ** b
        return [w / mp.exp(a * mp.mpf(j + 1) ** b) for j, w in enumerate(base(theta, d, m))]
    if kind == "ntk":
        return base(theta * s ** (mp.mpf(d) / (d - 2)), d, m)
    if kind == "dynamic":
        l_max = _f(params["max_position_embeddings"])
        if params.get("dynamic_rule") == "vllm_static":
            seq_len_mp = s * l_max
        else:
            seq_len_mp = l_max if seq_len is None else max(_f(seq_len), l_max)
        return base(theta * (s * seq_len_mp / l_max - (s - 1)) ** (mp.mpf(d) / (d - 2)), d, m)
    if kind == "yarn":
        return _yarn(params, theta, d, m)
    if kind == "llama3":
        l0 = _f(params["original_max_position_embeddings"])
        lf, hf = _f(params["low_freq_factor"]), _f(params["high_freq_factor"])
        out = []
        for w in base(theta, d, m):
            lam = 2 * mp.pi / w
            if lam > l0 / lf:
                out.append(w / s)
            elif lam >= l0 / hf and lf == hf:
                raise ValueError("llama3: empty middle band with a wavelength on its edge (0/0)")
            elif lam >= l0 / hf:
                g = (l0 / lam - lf) / (hf - lf)
                out.append((1 - g) * w / s + g * w)
            else:
                out.append(w)
        return out
    if kind == "longrope":
        l0 = int(params["original_max_position_embeddings"])
        lam = params["long_factor"] if (seq_len and seq_len > l0) else params["short_factor"]
        return [1 / (_f(lam[j]) * theta ** (mp.mpf(2 * j) / d)) for j in range(m)]
    if kind == "proportional":
        head_dim = int(params["head_dim"])
        n_rot = d // 2
        s = s if s is not None else mp.mpf(1)
        kept = base(theta, head_dim, n_rot)
        return [w / s for w in kept] + [mp.mpf(0)] * (head_dim // 2 - n_rot)
    raise ValueError(f"rope_type {kind!r} has no mpmath evaluation")


def _yarn(params: Mapping[str, Any], theta: Any, d: int, m: int) -> list[Any]:
    s = _f(params["factor"])
    l0 = _f(params["original_max_position_embeddings"])

    def pair_at(n: Any) -> Any:
        return d * mp.log(l0 / (2 * mp.pi * n)) / (2 * mp.log(theta))

    lo = pair_at(_f(_get(params, "beta_fast", 32.0)))
    hi = pair_at(_f(_get(params, "beta_slow", 1.0)))
    if _get(params, "truncate", True):
        lo, hi = mp.floor(lo), mp.ceil(hi)
    lo, hi = max(lo, mp.mpf(0)), min(hi, mp.mpf(d - 1))
    if lo == hi:
        hi += mp.mpf("0.001")
    out = []
    for j in range(m):
        ramp = min(max((j - lo) / (hi - lo), mp.mpf(0)), mp.mpf(1))
        pos = theta ** (mp.mpf(2 * j) / d)
        out.append(1 / (s * pos) * ramp + 1 / pos * (1 - ramp))
    return out


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
    from refpos.golden.entries import allowed_error

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
