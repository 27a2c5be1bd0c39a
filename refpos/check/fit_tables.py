r"""What a candidate of the other families computed: ALiBi slopes, T5 and DeBERTa bucket maps, sinusoid
frequencies, a learned table's row offset.

Each function takes the arrays of a check and returns a JSON-ready identification, the analogue of the RoPE fit
(:mod:`refpos.check.identify`):

* :func:`fit_alibi` — the slope of every head: the candidate itself for slopes ``(n,)``; for a bias
  ``(n, Tq, Tk)`` the least-squares slope :math:`\hat m_h = \sum b\,B / \sum B^2` against each form's unit bias
  ``B`` (the form whose fit leaves the smallest residual is the one the candidate used). When the slopes are one
  geometric sequence :math:`\hat m_h = m_0 r^h`, its ``m_0`` and ``r``;
* :func:`fit_buckets` — the bucket every relative offset fell in (the map, offset → bucket, as runs), where it
  differs from the reference's, and the keys of the bucket function (direction, bucket count, distance, the
  sign of the offset) that reproduce it;
* :func:`fit_sinusoid` — a table row is :math:`(\sin p\omega_k, \cos p\omega_k)` per pair, i.e. the complex
  number :math:`e^{ip\omega_k}` of a unit input: the RoPE fit (:func:`refpos.check.fit.fit_pairs`) recovers
  every :math:`\hat\omega_k`, the pairing (layout), a shift of the positions, and the spacing and base that
  reproduce the frequencies;
* :func:`fit_learned` — the table row each candidate row equals: ``row − p`` is the row offset.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.fit import common_offset, fit_pairs
from refpos.check.problem import np_ns


def _runs(indices: np.ndarray) -> list[list[int]]:
    """Consecutive integers as ``[first, last]`` runs."""
    runs: list[list[int]] = []
    for i in (int(v) for v in indices):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


# ------------------------------------------------------------------------------------------ ALiBi
def _geometric(slopes: np.ndarray) -> dict[str, float] | None:
    r"""``{"first", "ratio"}`` when the slopes are :math:`m_0 r^h` to 1e-9 relative, else ``None``."""
    if slopes.size < 2 or not np.all(slopes > 0):
        return None
    ratios = slopes[1:] / slopes[:-1]
    if np.ptp(ratios) > 1e-9 * abs(float(ratios.mean())):
        return None
    return {"first": float(slopes[0]), "ratio": float(ratios.mean()), "log2_ratio": float(np.log2(ratios.mean()))}


def fit_alibi(candidate: np.ndarray, reference_slopes: np.ndarray, atol: np.ndarray | float, *,
              q_positions: np.ndarray | None = None, k_positions: np.ndarray | None = None) -> dict[str, Any]:
    """The slopes (and the bias form) a candidate used; ``atol`` the slope tolerance per head.

    ``candidate``: slopes ``(n,)``, or a bias ``(n, Tq, Tk)`` at query positions ``q_positions`` and key positions
    ``k_positions``.
    """
    import refpos
    from refpos.encodings.alibi import FORMS

    form, residual = None, None
    if candidate.ndim == 1:
        slopes = candidate.astype(np.float64)
    else:
        best = None
        for name in FORMS:
            unit = np.asarray(to_numpy(refpos.encodings.alibi_bias_from_positions(
                np_ns().asarray(np.ones(1)), np_ns().asarray(q_positions), np_ns().asarray(k_positions),
                form=name)))[0]  # (Tq, Tk): the bias of slope 1
            power = float(np.sum(unit * unit))
            if power == 0:
                continue
            fitted = np.einsum("hqk,qk->h", candidate, unit) / power  # (n,)
            scale = np.maximum(np.abs(candidate).max(axis=(1, 2)), 1e-300)
            misfit = float(np.max(np.abs(candidate - fitted[:, None, None] * unit).max(axis=(1, 2)) / scale))
            if best is None or misfit < best[0]:
                best = (misfit, name, fitted)
        if best is None:  # every entry at distance 0 (one query, one key): no slope to fit
            return {"heads": [], "wrong_heads": [], "fitted": {
                "form": None, "form_residual": None, "geometric": None, "reference_geometric": None,
                "reason": "every bias entry is at distance 0: the slopes do not show"}}
        residual, form, slopes = best
    within = np.abs(slopes - reference_slopes) <= atol
    wrong = np.flatnonzero(~within)
    return {"heads": [{"index": h, "slope": float(reference_slopes[h]), "slope_fitted": float(slopes[h]),
                       "ok": bool(within[h])} for h in range(slopes.size)],
            "fitted": {"form": form, "form_residual": residual, "geometric": _geometric(slopes),
                       "reference_geometric": _geometric(reference_slopes)},
            "wrong_heads": _runs(wrong)}


# ------------------------------------------------------------------------------------ buckets
def bucket_map(candidate: np.ndarray, rel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct offsets ``(K,)``, the bucket each fell in ``(K,)`` (its smallest where it fell in several)
    and whether an offset fell in more than one bucket ``(K,)``."""
    offsets, inverse = np.unique(rel.reshape(-1), return_inverse=True)
    cand = candidate.reshape(-1).astype(np.int64)
    low = np.full(offsets.size, np.iinfo(np.int64).max)
    high = np.full(offsets.size, np.iinfo(np.int64).min)
    np.minimum.at(low, inverse, cand)
    np.maximum.at(high, inverse, cand)
    return offsets, low, low != high


def fit_buckets(candidate: np.ndarray, rel: np.ndarray, buckets: Callable[..., np.ndarray],
                config: dict[str, Any], choices: dict[str, list[Any]], sign_name: str) -> dict[str, Any]:
    """The map offset → bucket of a candidate, where it differs from the reference's, and the keys that
    reproduce it.

    ``buckets(offsets, **keys)`` is the family's bucket function; ``config`` its keys in the check; ``choices``
    the values tried for each key (with the config's); ``sign_name``: the offset's definition (``memory −
    query`` for T5), reported when the negated offsets reproduce the map instead.
    """
    offsets, got, ambiguous = bucket_map(candidate, rel)
    reference = buckets(offsets, **config)
    differ = np.flatnonzero((got != reference) | ambiguous)
    runs = []
    for first, last in _runs(differ):  # runs of consecutive offsets with their buckets
        span = slice(first, last + 1)
        runs.append({"offsets": [int(offsets[first]), int(offsets[last])],
                     "buckets": sorted({int(b) for b in got[span]}),
                     "reference_buckets": sorted({int(b) for b in reference[span]})})
    result: dict[str, Any] = {"offsets": int(offsets.size), "differ": int(differ.size), "runs": runs,
                              "ambiguous": [int(o) for o in offsets[ambiguous]], "keys": None}
    if ambiguous.any():
        result["reason"] = "an offset fell in two buckets: the candidate is not a function of the offset"
        return result
    names = list(config)
    found = []
    for values in itertools.product(*(choices[k] for k in names)):
        keys = dict(zip(names, values, strict=True))
        for sign in (1, -1):
            try:
                mapped = buckets(sign * offsets, **keys)
            except (ValueError, TypeError):
                break
            if np.array_equal(mapped, got):
                changed = {k: [config[k], v] for k, v in keys.items() if v != config[k]}
                if sign < 0:
                    changed["sign"] = [sign_name, "negated"]
                found.append((len(changed), changed, keys, sign))
    if not found:
        result["reason"] = f"no value of {', '.join(names)} (or the offset's sign) reproduces the map"
        return result
    _, changed, keys, sign = min(found, key=lambda f: f[0])
    result.update(keys=keys, sign=sign_name if sign > 0 else f"−({sign_name})", changed=changed)
    return result


# --------------------------------------------------------------------------------------- sinusoid
def fit_sinusoid(candidate: np.ndarray, positions: np.ndarray, *, dim: int, base: float, layout: str, spacing: str,
                 dtype: str, channel_error: np.ndarray, channel_ratio: np.ndarray) -> dict[str, Any]:
    """The frequencies, pairing, offset and rule a sinusoid table candidate ``(N, dim)`` used (rows at
    ``positions`` ``(N,)``), in the RoPE identification's form (``pairs``, ``fitted``); ``channel_error``,
    ``channel_ratio`` ``(dim,)``: each channel's largest error and ratio to its tolerance in the comparison."""
    import refpos
    from refpos.encodings.sinusoidal import LAYOUTS
    from refpos.pairs import pair_channels

    omega = np.asarray(to_numpy(refpos.encodings.sinusoidal_frequencies(dim, base=base, spacing=spacing, xp=np_ns())))
    best = None
    for lay in [layout] + [other for other in LAYOUTS if other != layout]:
        _, _, sin_ch, cos_ch = pair_channels(lay, dim)
        z = np.empty((candidate.shape[0], len(sin_ch)), dtype=np.complex128)
        z.real, z.imag = candidate[:, cos_ch], candidate[:, sin_ch]  # cos + i sin = e^{ipω}
        fits = fit_pairs(np.ones_like(z), z, positions, dtype, omega)
        score = int(fits.rotation.sum())
        if best is None or score > best[0]:
            best = (score, lay, fits)
        if score == omega.size:
            break
    score, lay, fits = best
    _, _, sin_ch, cos_ch = pair_channels(layout, dim)  # the comparison's channels of each pair
    pairs = []
    for k in range(omega.size):
        ratio = max(float(channel_ratio[sin_ch[k]]), float(channel_ratio[cos_ch[k]]))
        pairs.append({"index": k, "omega": float(omega[k]), "omega_fitted": _finite(fits.omega[k]),
                      "omega_bound": _finite(fits.omega_bound[k]), "amplitude": 1.0,
                      "amplitude_fitted": _finite(fits.amplitude[k]), "phase_fitted": _finite(fits.phase[k]),
                      "max_error": max(float(channel_error[sin_ch[k]]), float(channel_error[cos_ch[k]])),
                      "ok": bool(ratio <= 1.0), "band": "", "rotation": bool(fits.rotation[k]),
                      "misfit": _finite(fits.misfit[k]), "note": fits.notes[k]})
    fitted: dict[str, Any] = {"layout": lay if score else None, "placement": None, "position_offset": None,
                              "attention_factor": None, "positions": "positions" if score else None,
                              "rule_type": "sinusoid", "rule": None}
    if not score:
        fitted["reason"] = "no pairing of the channels is (cos, sin) of one frequency in the positions given"
        return {"pairs": pairs, "fitted": fitted, "reference": {"layout": layout}}
    delta, bound, why = common_offset(fits)
    if delta is None:
        fitted["position_offset_reason"] = why
    else:
        fitted["position_offset"] = round(delta) if abs(delta - round(delta)) <= max(bound, 1e-9) else delta
    amplitude = fits.amplitude[fits.rotation]
    fitted["attention_factor"] = float(amplitude.mean()) if np.ptp(amplitude) <= 1e-6 * amplitude.mean() else None
    rule = _sinusoid_rule(np.where(fits.rotation, fits.omega, np.nan), fits.omega_bound, dim, base, spacing)
    fitted["rule"] = rule["keys"]
    fitted["rule_changed" if rule["keys"] is not None else "rule_reason"] = rule.get("changed", rule.get("reason"))
    return {"pairs": pairs, "fitted": fitted, "reference": {"layout": layout}}


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _sinusoid_rule(omega: np.ndarray, bound: np.ndarray, dim: int, base: float, spacing: str) -> dict[str, Any]:
    r"""The spacing and base that give ``ω̂``: ``ln ω_k`` is linear in ``k`` for both spacings (slope
    :math:`-2\ln b/d` for the paper's, :math:`-\ln b/(d/2 - 1)` for tensor2tensor's), so each gives one base."""
    import refpos
    from refpos.encodings.sinusoidal import SPACINGS

    use = np.isfinite(omega) & (omega > 0)
    k = np.arange(omega.size, dtype=np.float64)
    backwards = np.isfinite(omega) & (omega < 0)
    if backwards.sum() > use.sum():
        return {"keys": None, "reason": f"the table turns {int(backwards.sum())} pairs backwards (ω̂ < 0): sin and "
                "cos exchanged, or the sign of sin flipped; no base or spacing gives that"}
    if use.sum() < 2:
        return {"keys": None, "reason": "fewer than two frequencies determined"}
    slope = float(np.sum(k[use] * np.log(omega[use])) / np.sum(k[use] ** 2))  # through ω_0 = 1
    tried, found = [], []
    for name in [spacing] + [s for s in SPACINGS if s != spacing]:
        fitted_base = math.exp(-slope * (dim / 2 if name == "paper" else dim / 2 - 1))
        tried.append((name, fitted_base))
        try:
            formula = np.asarray(to_numpy(refpos.encodings.sinusoidal_frequencies(dim, base=fitted_base, spacing=name,
                                                                                  xp=np_ns())))
        except (ValueError, TypeError):
            continue
        if np.all(np.abs(formula[use] - omega[use]) <= bound[use] + 1e-13 * formula[use]):
            if abs(fitted_base / base - 1) <= 1e-9:
                fitted_base = base  # the config's own base, within the fit
            changed = {key: [was, now] for key, was, now in (("spacing", spacing, name), ("base", base, fitted_base))
                       if was != now}
            found.append({"keys": {"spacing": name, "base": fitted_base}, "changed": changed})
    if not found:
        return {"keys": None, "reason": "no base reproduces ω̂ with either spacing (ln ω̂_k is not linear in k); "
                "tried " + ", ".join(f"{n} base {b:.6g}" for n, b in tried)}
    # both spacings are θ^(−k·c): each reproduces with its own base; the answer keeps the config's base if it can
    found.sort(key=lambda f: ("base" in f["changed"], len(f["changed"])))
    return {**found[0], "alternatives": [f["keys"] for f in found[1:]]}


# --------------------------------------------------------------------------------------- learned
def fit_learned(candidate: np.ndarray, table: np.ndarray, rows: np.ndarray, atol: np.ndarray | float
                ) -> dict[str, Any]:
    """The table row each candidate row equals, and the offset ``row − expected`` when one offset explains them.

    ``candidate`` ``(N, D)``, ``table`` ``(L, D)``, ``rows`` ``(N,)``: the rows the reference reads.
    """
    cand = candidate.reshape(-1, candidate.shape[-1]).astype(np.float64)
    expected = rows.reshape(-1)
    matched = np.full(expected.size, -1)
    for i, row in enumerate(cand):
        close = np.flatnonzero(np.all(np.abs(table - row) <= atol, axis=-1))
        if close.size:
            matched[i] = close[np.argmin(np.abs(close - expected[i]))]
    offsets = np.unique(matched[matched >= 0] - expected[matched >= 0])
    result: dict[str, Any] = {"rows_matched": int((matched >= 0).sum()), "rows": int(expected.size)}
    if (matched < 0).any():
        result.update(row_offset=None, reason=f"{int((matched < 0).sum())} candidate rows equal no row of the table")
    elif offsets.size != 1:
        result.update(row_offset=None, reason=f"the rows read are offset by {', '.join(map(str, offsets[:5]))}: "
                      "no single offset")
    else:
        result["row_offset"] = int(offsets[0])
    return result


def fit_t5(candidate: np.ndarray, rel: np.ndarray, *, bidirectional: bool, num_buckets: int, max_distance: int
           ) -> dict[str, Any]:
    """:func:`fit_buckets` for T5: direction, bucket count and maximal distance (offsets memory − query)."""
    import refpos

    def buckets(offsets: np.ndarray, **keys: Any) -> np.ndarray:
        return np.asarray(to_numpy(refpos.encodings.t5_bucket(np_ns().asarray(offsets), **keys)))

    config = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    top = int(candidate.max()) + 1 if candidate.size else num_buckets
    choices = {"bidirectional": [bidirectional, not bidirectional],
               "num_buckets": _values(num_buckets, [8, 16, 32, 64, 128, 256, top, 2 * top]),
               "max_distance": _values(max_distance, [2**k for k in range(4, 14)])}
    return fit_buckets(candidate, rel, buckets, config, choices, "memory − query")


def fit_deberta(candidate: np.ndarray, rel: np.ndarray, *, position_buckets: int, max_relative_positions: int
                ) -> dict[str, Any]:
    """:func:`fit_buckets` for DeBERTa's log buckets (offsets query − key)."""
    import refpos

    def buckets(offsets: np.ndarray, **keys: Any) -> np.ndarray:
        return np.asarray(to_numpy(refpos.encodings.deberta_log_buckets(np_ns().asarray(offsets),
                                                                        keys["position_buckets"],
                                                                        keys["max_relative_positions"])))

    config = {"position_buckets": position_buckets, "max_relative_positions": max_relative_positions}
    choices = {"position_buckets": _values(position_buckets, [2**k for k in range(3, 10)]),
               "max_relative_positions": _values(max_relative_positions, [2**k for k in range(5, 12)])}
    return fit_buckets(candidate, rel, buckets, config, choices, "query − key")


def _values(config: Any, others: list[Any]) -> list[Any]:
    """The config's value first, then the others (once each)."""
    return [config] + [v for v in dict.fromkeys(others) if v != config]
