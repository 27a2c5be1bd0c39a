"""Name the mistake: the RoPE catalogue of numerical signatures (docs/diagnosis.md), tried by ``refpos check``.

Each RoPE mistake of the catalogue is a change to the reference's call (:mod:`refpos.check.rope_mistakes`);
its variants for the checked call are evaluated (*mutants* of the reference) and the candidate is tested
against each within the same tolerance the reference comparison used. A match is reported with its
evidence. Besides the mutants: ``float32_angles`` (within float32's tolerance only), ``wrong_theta`` (the
frequency probe fits another base), ``attention_factor_mismatch`` (a constant magnitude ratio);
``error_profile`` (always, when the candidate fails) describes where and how the error grows;
``closest_mistake`` (when none matches) names the mutant that came closest when it lies within
:data:`NEAR_MISS` times the tolerance, and otherwise says that no catalogued mistake is close, with the nearest
one's distance. docs/diagnosis.md has cause, signature and a real example of each.

Everything here works on NumPy arrays (``refpos check`` reads ``.npy`` files); the reference values come
from :func:`refpos.apply_rope` on the NumPy backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from refpos.check.catalogue import family, known
from refpos.check.mistakes import Context, RopeCall
from refpos.check.problem import RopeProblem, fit, pair_magnitude
from refpos.check.rope_mistakes import ROPE_MISTAKES
from refpos.golden import tolerance as tol
from refpos.rope.rules import PLAIN

Match = dict[str, Any]


class Mutant(NamedTuple):
    """One mistake of the catalogue, built for a problem: what it is, and how to compute its output."""

    id: str  # the catalogue id (refpos/data/mistakes.toml)
    evidence: str  # what the mistake is, for the report
    build: Callable[[], np.ndarray]  # the mutant's output for the problem's inputs
    rows: np.ndarray | None = None  # where the mutant exists (bool mask of the rows; None: everywhere),
    #                                 e.g. positions p − 3 only from p = 3 on
    channels: Any = None  # the mutant's own pairs when they are not the reference's: its tolerance scales
    #                       with its own pairs' sizes


def _mutants(pb: RopeProblem) -> list[Mutant]:
    """Every applicable mutant of the catalogue for this problem: the variants of each RoPE mistake that
    ``refpos check`` finds by matching (:data:`refpos.check.rope_mistakes.ROPE_MISTAKES`), in catalogue order."""
    call = RopeCall(pb.rope, pb.positions, pb.seq_len, pb.inv_freq, pb.attention_factor)
    context = Context(pb.token_index, pb.min_position, pb.max_position)
    out = []
    for entry in family("rope"):
        mistake = ROPE_MISTAKES.get(entry.id)
        if mistake is None or mistake.found_by != "mutant" or not entry.diagnosed:
            continue
        try:
            variants = mistake.variants(call, context)
        except (ValueError, TypeError):  # a variant the config cannot express (e.g. a llama3 0/0 band)
            continue
        for variant in variants:
            channels = variant.call.channels
            own = None if [list(c) for c in channels] == [list(c) for c in pb.channels] else channels
            out.append(Mutant(mistake.id, variant.evidence, lambda c=variant.call: c.run(pb.x), variant.rows, own))
    return out


#: a mutant is named the closest mistake only within this factor of its tolerance. A port that makes the
#: mistake in another correct form (another angle form, another order of the products) stays within a few
#: times the bound a correct form has: the tolerance of each dtype is the worst case of its forms, measured
#: 0.9–2.1× apart (docs/diagnosis.md#tolerance). Ten times leaves that spread a factor of 5; a candidate 10³×
#: or more from every mutant differs from each by far more than any rounding explains, and naming the nearest
#: would point at a mistake it does not make.
NEAR_MISS = 10.0

#: the frequency probe's fit by the candidate's dtype: (smallest ω used, largest log-space residual). A
#: float32 rotation by ω at p = 1 is resolved to about 2⁻²⁴ of the pair, so only ω ≥ 0.01 give log ω to
#: ~1e-5; float64 resolves every ω to ~1e-16 relative
PROBE_FIT = {"float64": (0.0, 1e-6), "float32": (1e-2, 1e-4)}


def frequency_probe(pb: RopeProblem, candidate: np.ndarray) -> dict[str, Any] | None:
    """Recover the candidate's ω from rows at position 1 (all ω ≤ 1 < π: atan2 returns ω exactly)."""
    min_omega = PROBE_FIT.get(pb.dtype, PROBE_FIT["float32"])[0]
    rows = np.argwhere(pb.positions == 1)
    if rows.size == 0:
        return None
    idx = tuple(rows[0])
    u_in, v_in, u_out, v_out = pb.channels
    u, v = pb.x[idx][u_in], pb.x[idx][v_in]
    u2, v2 = candidate[idx][u_out], candidate[idx][v_out]
    if not (np.all(np.isfinite(u2)) and np.all(np.isfinite(v2))):
        return None  # a non-finite candidate has no angle to recover (it is named non-finite elsewhere)
    omega = np.arctan2(u * v2 - v * u2, u * u2 + v * v2)  # (m,)
    ok = np.hypot(u, v) > 1e-8
    result: dict[str, Any] = {"inv_freq": [float(w) for w in omega]}
    j = np.arange(omega.size)
    use = ok & (omega > min_omega) & (j > 0)
    if use.sum() >= 2:
        d = pb.rope.rotary_dim
        expo = 2 * j[use] / d
        slope = np.sum(np.log(omega[use]) * expo) / np.sum(expo**2)
        result["fitted_theta"] = float(np.exp(-slope))
        result["fit_residual"] = float(np.max(np.abs(np.log(omega[use]) - slope * expo)))  # log-space, 0 for b'^(−2j/d)
    return result


def diagnose_rope(pb: RopeProblem, candidate: np.ndarray) -> list[Match]:
    """Every catalogue entry the candidate matches, or ``closest_mistake`` when none does.

    The ``error_profile`` entry is the caller's (:meth:`refpos.check.stream.Tally.profile_entry`).
    """
    found: list[Match] = []
    ladder = [pb.dtype] + (["float32"] if pb.dtype == "float64" else [])
    built = []
    for mid, evidence, build, rows, channels in _mutants(pb):
        try:
            mutant = build()
        except (ValueError, TypeError):
            continue
        if mutant.shape != candidate.shape:
            continue
        keep = np.ones(pb.positions.shape, dtype=bool) if rows is None else rows  # the rows compared
        if np.array_equal(mutant[keep], pb.reference[keep]):
            continue
        # the mutant's own sizes: a permuted layout moves large pairs onto other channels
        size = np.maximum(pb.magnitude, np.abs(mutant))
        if channels is not None:
            size = np.maximum(size, pair_magnitude(pb.x, channels, pb.attention_factor))
        built.append((mid, evidence, mutant[keep], size[keep], keep))
    closest: tuple[float, str, str, float, str] | None = None
    for level, dtype in enumerate(ladder):
        for mid, evidence, mutant, size, keep in built:
            limit = np.asarray(tol.rope_tolerance(dtype, pb.positions[keep], pb.inv_freq, reference=mutant,
                                                  magnitude=size))
            ok, err, ratio = fit(candidate[keep], mutant, limit)
            if closest is None or ratio < closest[0]:
                closest = (ratio, mid, evidence, err, dtype)
            if ok and not any(m["id"] == mid and m["evidence"].startswith(evidence) for m in found):
                note = "" if level == 0 else " (within float32 rounding: the candidate also computes in float32)"
                found.append({"id": known(mid), "evidence": f"{evidence}; max |candidate − mutant| = {err:.3g} "
                              f"({ratio:.2g}× the {dtype} tolerance){note}", "max_abs_error": err})
        if found:
            break
    if pb.dtype == "float64":
        ok32, err, ratio = fit(candidate, pb.reference, pb.atol("float32"))
        if ok32:
            p = pb.positions.astype(np.float64)
            row_err = np.max(np.abs(candidate - pb.reference), axis=-1)  # (..., T)
            big = p > 0
            unit = p[big] * float(np.max(pb.inv_freq)) * 2.0**-24
            growth = float(np.max(row_err[big] / unit)) if big.any() else 0.0
            found.insert(0, {"id": known("float32_angles"), "evidence": (
                f"outside the float64 tolerance but within the float32 one ({ratio:.2g}× it): error "
                f"{float(np.max(row_err[~big])) if (~big).any() else 0.0:.2g} at p = 0, growing linearly to "
                f"{err:.3g}; max error / (p·max ω·2⁻²⁴) = {growth:.2f} (correct float32 phase paths measure 0.9–2.1). "
                "Declare --dtype float32 if that is intended"), "max_abs_error": err})
    explained = any(m["id"] != "float32_angles" for m in found)
    ratios = None if explained else _factor_ratio(pb, candidate)
    if ratios is not None:
        found.append(ratios)
        explained = True
    probe = None if explained else frequency_probe(pb, candidate)
    if probe and "fitted_theta" in probe:
        fitted = probe["fitted_theta"]
        residual = PROBE_FIT.get(pb.dtype, PROBE_FIT["float32"])[1]
        moved = abs(fitted / pb.rope.theta - 1) > 1e-3
        if pb.rope.rope_type == PLAIN and moved and probe["fit_residual"] < residual:
            found.append({"id": known("wrong_theta"), "evidence": "the frequency probe at position 1 recovers ω_j "
                          f"that fit θ' = {fitted:.6g}, the config says θ = {pb.rope.theta:g}", "fitted_theta": fitted})
    finite = bool(np.all(np.isfinite(candidate[np.isfinite(pb.reference)])))  # else: named non_finite
    if not found and finite and closest is not None and np.isfinite(closest[0]):
        found.append(closest_entry(*closest))
    return found


def closest_entry(ratio: float, mid: str, evidence: str, err: float, dtype: str) -> Match:
    """``closest_mistake`` for the nearest mutant: named when within :data:`NEAR_MISS` times its ``dtype``
    tolerance, else the words that no catalogued mistake is close, with the nearest one's distance."""
    what = f"{mid} ({evidence.split(' (')[0]})"
    distance = f"max |candidate − mutant| = {err:.3g}, {ratio:.3g}× the {dtype} tolerance"
    if ratio <= NEAR_MISS:
        return {"id": known("closest_mistake"), "evidence": f"no mistake of the catalogue matches; the closest is "
                f"{what}: {distance}", "closest": mid, "max_ratio": ratio, "max_abs_error": err}
    return {"id": known("closest_mistake"), "evidence": (
        f"no catalogued mistake is close: the nearest, {what}, is {ratio:.3g}× the {dtype} tolerance away "
        f"(max |candidate − mutant| = {err:.3g}; a mistake is named the closest only within {NEAR_MISS:g}× its "
        "tolerance)"), "closest": None, "nearest": mid, "max_ratio": ratio, "max_abs_error": err}


def _factor_ratio(pb: RopeProblem, candidate: np.ndarray) -> Match | None:
    """A constant magnitude ratio on the rotated channels outside {1, A, 1/A}: another mscale rule."""
    _, _, u_out, v_out = pb.channels
    if not np.all(np.isfinite(candidate)):
        return None
    ref_norm = np.hypot(pb.reference[..., u_out], pb.reference[..., v_out])
    cand_norm = np.hypot(candidate[..., u_out], candidate[..., v_out])
    keep = ref_norm > 1e-6 * max(float(ref_norm.max()), 1e-300)
    if not keep.any():
        return None
    ratio = cand_norm[keep] / ref_norm[keep]
    mean = float(np.mean(ratio))
    if float(np.max(np.abs(ratio - mean))) > 1e-5 * mean or abs(mean - 1) < 1e-6:
        return None
    relation = {pb.attention_factor: "A (applied twice)", 1 / pb.attention_factor: "1/A (A missing)"}
    hint = next((v for k, v in relation.items() if abs(mean / k - 1) < 1e-6), None)
    return {"id": known("attention_factor_mismatch"), "evidence": (
        f"every rotated pair is the reference times a constant {mean:.10g} (reference A = {pb.attention_factor:.10g})"
        + (f" = {hint}" if hint else ": another magnitude rule (log applied twice, mscale and mscale_all_dim "
           "conflated, YaRN-repo multiply vs HF replace); the direction of each pair is right")),
        "ratio": mean}
