r"""``refpos check sinusoid``: a sinusoidal table ``(*positions.shape, dim)`` against the reference (a tolerance
growing with the position), the catalogue's sinusoid mistakes
(docs/diagnosis.md#the-catalogue-alibi-t5-deberta-sinusoid) and the frequencies, pairing, offset and rule the
candidate used.

.. code-block:: text

    refpos check sinusoid --candidate P.npy --dim D (--positions P.npy | --length T)
                          [--base 1e4] [--layout interleaved] [--spacing paper]
    refpos check sinusoid --config CONFIG.json --candidate P.npy --positions P.npy

The fit (:func:`fit_sinusoid`): a table row is :math:`(\sin p\omega_k, \cos p\omega_k)` per pair, i.e. the
complex number :math:`e^{ip\omega_k}` of a unit input: the RoPE fit (:func:`refpos.check.shared.fit.fit_pairs`)
recovers every :math:`\hat\omega_k`, the pairing (layout), a shift of the positions, and the spacing and base that
reproduce the frequencies.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.shared import stream
from refpos.check.shared.arrays import (
    default_dtype,
    float_kind,
    host,
    integer_positions,
    np_ns,
    same_shape,
)
from refpos.check.shared.fit import common_offset, fit_pairs
from refpos.check.shared.request import Progress, Request
from refpos.check.tables.common import (
    Match,
    as_np,
    as_rows,
    float32_angles,
    layer_rows,
    sample,
    try_mutants,
    verdict,
)
from refpos.encodings.sinusoidal import LAYOUTS, SPACINGS
from refpos.golden.exact import tolerance as tol
from refpos.golden.files.npy import read_npy
from refpos.pairs import pair_channels


def diagnose_sinusoid(candidate: np.ndarray, positions: np.ndarray, *, dim: int, base: float, layout: str,
                      spacing: str, atol: Any) -> list[Match]:
    """Sinusoid catalogue for a table ``(N, dim)`` at ``positions`` ``(N,)``."""
    import refpos

    def table(lay: str = layout, sp: str = spacing, offset: int = 0) -> np.ndarray:
        return as_np(refpos.encodings.sinusoidal.sinusoidal(np_ns().asarray(positions), dim, base=base, layout=lay,
                                                          spacing=sp, offset=offset))

    reference = table()
    other_layout = "concat" if layout == "interleaved" else "interleaved"
    other_spacing = "tensor2tensor" if spacing == "paper" else "paper"
    _, _, sin_channels, cos_channels = pair_channels(layout, dim)  # where the layout writes pair k
    perm = np.empty(dim, dtype=np.int64)  # (dim,): each pair's sin and cos exchanged
    perm[sin_channels], perm[cos_channels] = cos_channels, sin_channels
    mutants = [
        ("sinusoid_layout_swap", f"equals the {other_layout!r} layout instead of {layout!r} (same values, channels "
         "permuted: equivalent from scratch, not with pretrained weights)", lambda: table(lay=other_layout)),
        ("sinusoid_spacing", f"equals the {other_spacing!r} frequency spacing instead of {spacing!r} (the k = 0 "
         "pair agrees, ω = 1; the others differ)", lambda: table(sp=other_spacing)),
        ("sinusoid_sin_cos_swap", "equals the reference with sin and cos exchanged in every pair",
         lambda: reference[..., perm]),
    ]
    for offset in (1, 2):
        mutants.append(("sinusoid_position_offset", f"equals the reference at positions p + {offset} (fairseq / "
                        "M2M100 start at padding_idx + 1)", lambda o=offset: table(offset=o)))
    return try_mutants(candidate, atol, mutants, reference)


def fit_sinusoid(candidate: np.ndarray, positions: np.ndarray, *, dim: int, base: float, layout: str, spacing: str,
                 dtype: str, channel_error: np.ndarray, channel_ratio: np.ndarray) -> dict[str, Any]:
    """The frequencies, pairing, offset and rule a sinusoid table candidate ``(N, dim)`` used (rows at
    ``positions`` ``(N,)``), in the RoPE identification's form (``pairs``, ``fitted``); ``channel_error``,
    ``channel_ratio`` ``(dim,)``: each channel's largest error and ratio to its tolerance in the comparison."""
    import refpos

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


def stream_sinusoid(raw: np.ndarray, positions: np.ndarray, dim: int, base: float, layout: str, spacing: str,
                    dtype: str, progress: Progress) -> dict[str, Any]:
    """Check a sinusoid table ``raw`` ``(*positions.shape, dim)`` (validated shape), block by block."""
    import refpos

    rows = as_rows(raw)  # (L, T, dim)
    rows_positions = positions.reshape(rows.shape[:-1])  # (L, T)
    freqs = np.asarray(to_numpy(refpos.encodings.sinusoidal_frequencies(dim, base=base, spacing=spacing, xp=np_ns())))

    def table(at: np.ndarray) -> np.ndarray:
        return np.asarray(to_numpy(refpos.encodings.sinusoidal.sinusoidal(np_ns().asarray(at), dim, base=base,
                                                                          layout=layout, spacing=spacing)))

    def reference_of(lead: slice, block: slice, rule: str = dtype) -> tuple[np.ndarray, np.ndarray]:
        at = rows_positions[lead, block]  # (k, rows)
        reference = table(at)  # (k, rows, dim)
        return reference, np.asarray(tol.rope_tolerance(rule, at, freqs, reference=reference))

    tally = stream.compare_rows(rows, rows_positions, reference_of, progress)
    result = verdict("sinusoid", dtype, tally, raw.shape, rows.shape)
    if tally.n_outside == 0:
        return result
    lead_index, token_index = sample(rows_positions, tally.worst_index, dim)
    at = rows_positions[lead_index, token_index]  # (N,)
    cand = np.asarray(rows[lead_index, token_index], dtype=np.float64)  # (N, dim)
    atol = np.asarray(tol.rope_tolerance(dtype, at, freqs, reference=table(at)))
    result["diagnosis"] = [*tally.non_finite(), *diagnose_sinusoid(cand, at, dim=dim, base=base, layout=layout,
                                                                   spacing=spacing, atol=atol)]
    result.update(fit_sinusoid(cand, at, dim=dim, base=base, layout=layout, spacing=spacing, dtype=dtype,
                               channel_error=tally.channel_error, channel_ratio=tally.channel_ratio))
    if dtype == "float64" and stream.compare_rows(rows, rows_positions, partial(reference_of, rule="float32")
                                                  ).n_outside == 0:  # a second pass, under the float32 tolerance
        result["diagnosis"].insert(0, float32_angles())
    if len(token_index) < rows_positions.size:
        result["diagnosis_rows"] = len(token_index)
    return result


def check_sinusoid(candidate: Any, positions: Any, *, dim: int, base: float = 10000.0, layout: str = "interleaved",
                   spacing: str = "paper", dtype: str | None = None,
                   progress: Progress = None) -> dict[str, Any]:
    """Compare a sinusoidal table ``(*positions.shape, dim)`` with the reference (position-aware tolerance).

    The table may be memory-mapped: it is compared block by block along the positions
    (:func:`refpos.check.stream_sinusoid`); the diagnosis runs on a sample of the rows.
    """
    raw = float_kind(host(candidate), "candidate")
    dtype = tol.check_dtype(dtype or default_dtype(raw))
    positions = integer_positions(positions)
    same_shape(raw, (*positions.shape, dim), "a table (*positions.shape, dim)")
    return stream_sinusoid(raw, positions, dim, base, layout, spacing, dtype, progress)


def run(request: Request) -> dict[str, Any]:
    """``refpos check sinusoid``: ``--dim``, ``--base``, ``--layout``, ``--spacing`` and the positions
    (``--positions`` or ``--length``); with ``--config`` the layer's width, layout, spacing, base and position
    offset (``--positions`` are the model's positions; the rows read are ``p + offset``)."""
    layer = request.layer
    if layer is not None:
        return {**check_sinusoid(request.candidate, layer_rows(request), dim=layer.dim, base=layer.base,
                                 layout=layer.layout, spacing=layer.spacing, dtype=request.dtype,
                                 progress=request.progress),
                **request.where()}
    if request.option("positions"):
        positions = read_npy(request.option("positions"))
    else:
        length = request.need("length", "--positions or --length")
        same_shape(request.candidate, (length, request.need("dim", "--dim D")), "--length × --dim")  # before arange
        positions = np.arange(length)
    return check_sinusoid(request.candidate, positions, dim=request.need("dim", "--dim D"),
                          base=request.option("base", 10000.0), layout=request.option("layout", "interleaved"),
                          spacing=request.option("spacing", "paper"), dtype=request.dtype, progress=request.progress)


def golden(case: dict[str, Any], args: list[Any], inputs: dict[str, np.ndarray], candidate: np.ndarray,
           dtype: str) -> dict[str, Any]:
    """The check of a golden case of ``sinusoidal(positions, dim, base, layout, spacing)``."""
    return check_sinusoid(candidate, inputs["positions"], dim=int(args[1]), base=float(args[2]), layout=str(args[3]),
                          spacing=str(args[4]), dtype=dtype)


__all__ = ["check_sinusoid", "diagnose_sinusoid", "fit_sinusoid", "golden", "run", "stream_sinusoid"]
