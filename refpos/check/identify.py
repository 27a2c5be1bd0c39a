r"""``refpos check rope`` identifies what the candidate computed: per pair, and as a whole.

From the rows of a check (the input ``x``, the candidate's output, the positions) this module fits every pair
(:mod:`refpos.check.fit`) under each pairing of the channels the config could have meant (layouts; placements
of a partial rotation) and, for M-RoPE, against each position axis, and keeps for each pair the pairing and the
axis under which it is a rotation at one frequency; a pair that is no rotation under any is fitted as each other
map a wrong table writes (:mod:`refpos.check.fit_maps`: a reflection, the sin term reflected) and keeps the
first it is (``map``). Then:

* ``pairs``: per pair ``j`` the reference's ``ω_j`` and ``A`` beside the fitted :math:`\hat\omega_j`,
  :math:`\hat A_j` (with their bounds), the pair's largest error and whether it is within its tolerance
  (``ok``, from the comparison itself), the band of the config's rule it falls in
  (:func:`refpos.check.rule_fit.pair_bands`) and, for M-RoPE, the axis it reads and the axis it was fitted to;
* ``fitted``: the ``layout`` (and placement), the ``position_offset`` ``δ`` shared by every pair (or
  ``None`` with the reason), the ``attention_factor`` shared by every pair (or ``None``), which positions
  the candidate used (the ones given, or the token index), and the ``rule``: the keys of the config's rule
  that reproduce the fitted frequencies (:func:`refpos.check.rule_fit.fit_rule`), or ``None`` with the reason;
  and the ``reading`` of the frequencies when they are another exponent (:mod:`refpos.check.readings`).

:func:`identify_frequencies` does the same for a candidate that *is* the frequencies (a ``frequencies`` golden
case). :mod:`refpos.check.identify_text` writes the report's lines.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.fit import PairFits, common_offset, fit_pairs
from refpos.check.fit_maps import MAPS, fit_map
from refpos.check.fit_names import fit_names
from refpos.check.problem import np_ns
from refpos.check.readings import structural_reading
from refpos.check.rule_fit import fit_rule, pair_bands
from refpos.rope.mrope import AXES

#: what a pair was fitted against when it is none of the position axes
TOKEN_INDEX = "token index"


def pairings(rope: Any) -> list[tuple[str, str, tuple[list[int], ...]]]:
    """``(layout, placement, channels)`` of every pairing of the channels the config could have meant, the
    config's first: each layout, and for a partial rotation each placement of the rotated span."""
    from refpos.rope.config import LAYOUTS, PLACEMENTS
    from refpos.rope.forms import pair_channels

    placements = [rope.placement] + [p for p in PLACEMENTS if p != rope.placement and p != "proportional"
                                     and rope.placement != "proportional" and rope.rotary_dim < rope.head_dim]
    out = []
    for placement in placements:
        for layout in [rope.layout] + [lay for lay in LAYOUTS if lay != rope.layout]:
            try:
                other = dataclasses.replace(rope, layout=layout, placement=placement)
            except ValueError:
                continue
            out.append((layout, placement, pair_channels(other)))
    return out


def _pairs_of(a: np.ndarray, channels: tuple[list[int], ...], side: int) -> np.ndarray:
    """Complex pairs ``u + iv`` ``(N, m)`` of rows ``a`` ``(N, D)``: input channels (side 0) or output (1)."""
    u, v = channels[2 * side], channels[2 * side + 1]
    z = np.empty((a.shape[0], len(u)), dtype=np.complex128)
    z.real, z.imag = a[:, u], a[:, v]  # no arithmetic: an infinite channel stays infinite, without NaN
    return z


def _select(fits: list[PairFits], choice: np.ndarray) -> PairFits:
    """Pair ``j``'s fit from ``fits[choice[j]]``."""
    j = np.arange(choice.size)
    per_pair = ("notes", "maps")
    pick = {f.name: np.stack([getattr(fit, f.name) for fit in fits])[choice, j]
            for f in dataclasses.fields(PairFits) if f.name not in per_pair}
    return PairFits(**pick, **{name: tuple(getattr(fits[c], name)[i] for i, c in enumerate(choice))
                               for name in per_pair})


def _fit_pairing(x: np.ndarray, y: np.ndarray, channels: tuple[list[int], ...], regressors: list[np.ndarray],
                 expected: np.ndarray, dtype: str, omega: np.ndarray) -> tuple[PairFits, np.ndarray]:
    """The fit of every pair under one pairing: against its expected regressor (``expected[j]``) when that
    makes it a rotation, else against the regressor under which it fits best; a pair that is a rotation under
    none, as the first other map of :data:`refpos.check.fit_maps.MAPS` that it is (against its expected
    regressor). Returns the fits and the index of the regressor each pair was fitted against."""
    z_in, z_out = _pairs_of(x, channels, 0), _pairs_of(y, channels, 1)
    fits = [fit_pairs(z_in, z_out, p, dtype, omega) for p in regressors]
    misfit = np.stack([f.misfit for f in fits])  # (R, m)
    best = np.argmin(misfit, axis=0)
    own = misfit[expected, np.arange(omega.size)]
    choice = np.where(own <= 1.0, expected, np.where(misfit[best, np.arange(omega.size)] <= 1.0, best, expected))
    chosen = _select(fits, choice)
    for name in MAPS:
        if name == "rotation" or chosen.explained.all():
            continue
        axes = [int(a) for a in np.unique(expected)]
        options = [chosen, *(fit_map(name, z_in, z_out, regressors[a], dtype, omega) for a in axes)]
        own_map = np.array([1 + axes.index(int(a)) for a in expected])  # each pair's fit against its own regressor
        take = ~chosen.explained & np.array([options[o].explained[j] for j, o in enumerate(own_map)])
        chosen = _select(options, np.where(take, own_map, 0))
        choice = np.where(take, expected, choice)
    return chosen, choice


def identify_rope(rope: Any, seq_len: int | None, dtype: str, x: np.ndarray, y: np.ndarray, positions: np.ndarray,
                  token_index: np.ndarray, channel_error: np.ndarray, channel_ratio: np.ndarray) -> dict[str, Any]:
    """The identification of a RoPE candidate (the module docstring).

    ``x``, ``y``: the rows ``(N, D)`` (input, candidate output, float64); ``positions``: ``(N,)``, or ``(3, N)``
    for M-RoPE; ``token_index``: ``(N,)``, each row's index along the sequence; ``channel_error``,
    ``channel_ratio``: ``(D,)``, each output channel's largest error and largest ratio to its tolerance over
    the whole comparison (``ok`` per pair is read from them).
    """
    import refpos

    omega_ref, factor = refpos.rope_frequencies(rope, seq_len=seq_len, xp=np_ns())
    omega_ref, factor = np.asarray(to_numpy(omega_ref), dtype=np.float64), float(factor)
    m = omega_ref.size
    mrope = rope.mrope_section is not None
    if mrope:
        from refpos.rope.mrope import pair_axes

        regressors, names = [np.asarray(positions[a]) for a in range(3)], list(AXES)
        expected = np.asarray(pair_axes(rope.mrope_section, rope.mrope_scheme))
    else:
        regressors, names, expected = [np.asarray(positions)], ["positions"], np.zeros(m, dtype=np.int64)
    if not any(np.array_equal(token_index, r) for r in regressors):
        regressors.append(np.asarray(token_index))
        names.append(TOKEN_INDEX)
    best = _best_pairing(rope, x, y, regressors, expected, dtype, omega_ref)
    precision = dtype
    if best[1] < m and dtype == "float64":  # a float32 phase path declared float64: fit to float32's precision
        coarse = _best_pairing(rope, x, y, regressors, expected, "float32", omega_ref)
        if coarse[:2] > best[:2]:
            best, precision = coarse, "float32"
    _, _, layout, placement, fits, choice = best
    pairs = _pair_entries(rope, seq_len, omega_ref, factor, fits, choice, names, expected, regressors,
                          channel_error, channel_ratio)
    out_u, out_v = pairings(rope)[0][2][2:]
    for pair, u, v in zip(pairs, out_u, out_v, strict=True):
        pair["non_finite"] = int(np.count_nonzero(~np.isfinite(y[:, u]) | ~np.isfinite(y[:, v])))
    reference = _reference(rope, omega_ref)
    passing = _pass_through(rope, channel_ratio)
    fitted = {"layout": layout if best[0] else None, "placement": placement if best[0] else None,
              "position_offset": None, "attention_factor": None, "rule": None, "positions": None,
              "precision": precision, "pass_through": passing}
    if not best[0]:
        fitted["reason"] = ("no pairing of the channels makes any pair a rotation at one frequency in the positions "
                            "given, nor a reflection (refpos.check.fit_maps)")
        return {"pairs": pairs, "fitted": fitted, "reference": reference}
    used = [name for name in names if any(names[c] == name and ok for c, ok in
                                          zip(choice, fits.explained, strict=True))]
    fitted["positions"] = used if mrope else (used[0] if len(used) == 1 else used)
    on_positions = fits.explained & np.array([names[c] != TOKEN_INDEX for c in choice])
    delta, bound, why = common_offset(fits, on_positions)
    if delta is None:
        fitted["position_offset_reason"] = why
    else:
        nearest = round(delta)
        fitted["position_offset"] = nearest if abs(delta - nearest) <= max(bound, 1e-9) else delta
        fitted["position_offset_bound"] = bound
    fitted["attention_factor"], fitted["attention_factor_bound"], reason = _shared_amplitude(fits)
    if reason:
        fitted["attention_factor_reason"] = reason
    fitted.update(rule_entries(rope, seq_len, np.where(fits.explained, fits.omega, np.nan), fits.omega_bound))
    ident = {"pairs": pairs, "fitted": fitted, "reference": reference}
    fitted["names"] = fit_names(rope, seq_len, ident, np.asarray(positions), np.asarray(token_index))
    return ident


def _pass_through(rope: Any, channel_ratio: np.ndarray) -> str | None:
    """Which channels the config leaves alone but the candidate changed beyond the tolerance (``None``: none)."""
    from refpos.check.identify_text import ranges

    out_u, out_v = pairings(rope)[0][2][2:]
    others = sorted(set(range(channel_ratio.size)) - set(out_u) - set(out_v))
    changed = [c for c in others if channel_ratio[c] > 1.0]
    if not changed:
        return None
    return (f"channels {ranges(changed)} are not rotated by the config (they pass through) but differ from the input: "
            "the candidate rotates a wider span")


def _best_pairing(rope: Any, x: np.ndarray, y: np.ndarray, regressors: list[np.ndarray], expected: np.ndarray,
                  dtype: str, omega: np.ndarray) -> tuple[int, int, str, str, PairFits, np.ndarray]:
    """``(explained, rotations, layout, placement, fits, choice)`` of the pairing under which the most pairs are
    a map of :data:`refpos.check.fit_maps.MAPS`, then the most are rotations (the config's first, kept on a tie;
    the search stops when the config's makes every pair a rotation)."""
    results = []
    for layout, placement, channels in pairings(rope):
        fits, choice = _fit_pairing(x, y, channels, regressors, expected, dtype, omega)
        results.append((int(fits.explained.sum()), int(fits.rotation.sum()), layout, placement, fits, choice))
        if results[0][1] == omega.size:
            break
    return max(results, key=lambda r: r[:2])


def _reference(rope: Any, omega_ref: np.ndarray) -> dict[str, Any]:
    """What the report compares the fit with besides ω: the unscaled ``θ^(−2j/d)`` of every pair (``None``
    where the rule has no such table) and the scale ``s``."""
    from refpos.rope.scaling import base_inv_freq

    plain = np.asarray(to_numpy(base_inv_freq(rope.theta, rope.rotary_dim, np_ns())))
    return {"rope_type": rope.rope_type, "factor": rope.factor, "layout": rope.layout, "placement": rope.placement,
            "partial": rope.rotary_dim < rope.head_dim,
            "omega_unscaled": [float(w) for w in plain] if plain.shape == omega_ref.shape else None}


def _shared_amplitude(fits: PairFits) -> tuple[float | None, float | None, str]:
    """The amplitude every fitted pair shares (their mean) and its bound, or ``None`` and why not."""
    use = fits.explained
    if not use.any():
        return None, None, "no pair is a rotation or another map at one frequency"
    amp, bound = fits.amplitude[use], fits.amplitude_bound[use]
    mean = float(np.mean(amp))
    if np.all(np.abs(amp - mean) <= 2 * bound + 1e-15 * abs(mean)):
        return mean, float(2 * bound.max()), ""
    low, high = int(np.flatnonzero(use)[np.argmin(amp)]), int(np.flatnonzero(use)[np.argmax(amp)])
    return None, None, (f"the pairs' amplitudes differ: from {float(fits.amplitude[low]):.6g} (pair {low}) to "
                        f"{float(fits.amplitude[high]):.6g} (pair {high})")


def _number(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def _pair_entries(rope: Any, seq_len: int | None, omega_ref: np.ndarray, factor: float, fits: PairFits,
                  choice: np.ndarray, names: list[str], expected: np.ndarray, regressors: list[np.ndarray],
                  channel_error: np.ndarray, channel_ratio: np.ndarray) -> list[dict[str, Any]]:
    bands = pair_bands(rope, seq_len)
    entries = []
    for j in range(omega_ref.size):
        entry = {"index": j, "omega": float(omega_ref[j]), "omega_fitted": _number(fits.omega[j]),
                 "omega_bound": _number(fits.omega_bound[j]), "amplitude": factor,
                 "amplitude_fitted": _number(fits.amplitude[j]),
                 "amplitude_bound": _number(fits.amplitude_bound[j]), "max_error": None, "ok": None,
                 "phase_fitted": _number(fits.phase[j]), "phase_bound": _number(fits.phase_bound[j]),
                 "band": bands[j], "rotation": bool(fits.rotation[j]), "misfit": _number(fits.misfit[j]),
                 "map": fits.maps[j] if fits.explained[j] else None, "note": fits.notes[j]}
        if len(names) > 1 or names[0] != "positions":
            entry["fitted_against"] = names[choice[j]]
        if rope.mrope_section is not None:
            entry["axis"] = AXES[expected[j]]
            entry["band"] = f"{entry['axis']} section" + (f", {bands[j]}" if bands[j] else "")
            distinct = any(not np.array_equal(regressors[expected[j]], regressors[a]) for a in range(3))
            entry["axis_fitted"] = names[choice[j]] if fits.explained[j] and distinct else None
        entries.append(entry)
    return pair_status(rope, entries, channel_error, channel_ratio)


def pair_status(rope: Any, pairs: list[dict[str, Any]], channel_error: np.ndarray, channel_ratio: np.ndarray
                ) -> list[dict[str, Any]]:
    """``pairs`` with each pair's ``max_error`` and ``ok`` read from another comparison's per-channel errors
    (``(D,)`` for a rotated ``x``; ``(m,)`` for a per-pair table)."""
    from refpos.rope.forms import pair_channels

    if channel_error.size == len(pairs):  # one entry per pair
        u_out = v_out = list(range(len(pairs)))
    else:
        u_out, v_out = pair_channels(rope)[2:]
    out = []
    for pair in pairs:
        j = pair["index"]
        error = max(float(channel_error[u_out[j]]), float(channel_error[v_out[j]]))
        if np.isnan(channel_error[u_out[j]]) or np.isnan(channel_error[v_out[j]]):
            error = math.nan
        ratio = max(float(channel_ratio[u_out[j]]), float(channel_ratio[v_out[j]]))
        out.append({**pair, "max_error": error, "ok": bool(ratio <= 1.0)})
    return out


def identify_frequencies(rope: Any, seq_len: int | None, candidate: np.ndarray, bound: np.ndarray,
                         error: np.ndarray, ratio: np.ndarray) -> dict[str, Any]:
    """The identification of a candidate that holds the frequencies ``(m,)`` themselves: ``ω̂`` is the
    candidate, ``bound`` what its comparison allows; ``error``/``ratio`` per pair from that comparison."""
    import refpos

    omega_ref, factor = refpos.rope_frequencies(rope, seq_len=seq_len, xp=np_ns())
    omega_ref = np.asarray(to_numpy(omega_ref), dtype=np.float64)
    omega = np.where(np.isfinite(candidate), candidate, np.nan).astype(np.float64)
    bands = pair_bands(rope, seq_len)
    pairs = pair_status(rope, [{"index": j, "omega": float(omega_ref[j]), "omega_fitted": _number(omega[j]),
                                "omega_bound": _number(bound[j]), "amplitude": float(factor), "amplitude_fitted": None,
                                "max_error": None, "ok": None, "band": bands[j], "rotation": True, "misfit": None,
                                "note": None} for j in range(omega_ref.size)], error, ratio)
    fitted = {"layout": None, "placement": None, "position_offset": None, "attention_factor": None,
              "positions": None, **rule_entries(rope, seq_len, omega, np.asarray(bound, dtype=np.float64))}
    return {"pairs": pairs, "fitted": fitted, "reference": _reference(rope, omega_ref)}


def rule_entries(rope: Any, seq_len: int | None, omega: np.ndarray, bound: np.ndarray) -> dict[str, Any]:
    """The ``fitted`` entries of the rule: ``rule`` (the keys that reproduce ``omega``, or ``None``),
    ``rule_type``, ``rule_changed`` or ``rule_reason``, and ``reading`` when the frequencies have a structural
    reading (:mod:`refpos.check.readings`: another exponent, where the changed keys are only its equivalent)."""
    rule = fit_rule(rope, seq_len, omega, bound)
    out: dict[str, Any] = {"rule": rule.pop("keys"), "rule_type": rule["rope_type"]}
    if out["rule"] is None:
        out["rule_reason"] = rule["reason"]
    else:
        out["rule_changed"] = rule["changed"]
    if out["rule"] is None or out["rule_changed"]:
        reading = structural_reading(rope, seq_len, omega, bound)
        if reading is not None:
            out["reading"] = reading
    return out
