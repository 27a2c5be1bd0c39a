"""Name the mistake: the RoPE catalogue of numerical signatures (docs/diagnosis.md), tried by ``refpos check``.

Each entry builds the output a known mistake produces (a *mutant* of the reference) and tests whether
the candidate equals it within the same tolerance the reference comparison used. A match is reported
with its evidence. Catalogue (ids; docs/diagnosis.md has cause, signature and a real example of each):

``layout_swap``, ``position_offset``, ``float32_angles``, ``bf16_angles``, ``default_theta``,
``wrong_theta``, ``unscaled_frequencies``, ``double_scaled_frequencies``, ``missing_attention_factor``,
``squared_attention_factor``, ``attention_factor_mismatch``, ``longrope_factor_swap``,
``partial_rotary_placement``; ``error_profile`` (always, when the candidate fails) describes where and
how the error grows; ``closest_mistake`` (when none matches) names the mutant that came closest and its
ratio to the tolerance.

Everything here works on NumPy arrays (``refpos check`` reads ``.npy`` files); the reference values come
from :func:`refpos.apply_rope` on the NumPy backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from refpos.backend import to_numpy
from refpos.check.catalogue import known
from refpos.check.problem import RopeProblem, fit, np_ns, pair_magnitude, rotate_pairs, round_to
from refpos.golden import tolerance as tol
from refpos.pairs import pair_channels

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
    """Every applicable mutant of the catalogue for this problem (:class:`Mutant`)."""
    import refpos
    from refpos.rope.config import LAYOUTS
    from refpos.rope.forms import pair_channels as rope_channels
    from refpos.rope.params import rope_config_from_params
    from refpos.rope.scaling import base_inv_freq

    rope, out = pb.rope, []
    for layout in LAYOUTS:
        if layout != rope.layout and rope.rope_type != "proportional":
            other = dataclasses.replace(rope, layout=layout)
            out.append(Mutant("layout_swap", f"equals the reference computed with the {layout!r} layout instead of "
                        f"{rope.layout!r} (the channel permutation P of docs/conventions.md#pair-layouts; exact at "
                        "position 0)",
                        lambda o=other: pb.apply(o), channels=rope_channels(other)))
    for delta in (d for d in range(-8, 9) if d):
        exists = pb.positions + delta >= 0  # the shifted reference exists from p = −δ on
        if exists.any():
            where = "" if exists.all() else f", compared from position {-delta} on"
            out.append(Mutant("position_offset", f"equals the reference at positions p {delta:+d}{where} (rotated q/k "
                        "shifted; logits hide it unless q and k offsets differ)",
                        lambda d=delta: pb.apply(positions=np.maximum(pb.positions + d, 0)),
                        rows=None if exists.all() else exists))
    first = pb.min_position
    if first > 0:
        out.append(Mutant("position_offset", f"equals the reference at positions p − {first}: the offset was dropped "
                    "(positions restarted at 0, e.g. a decode step without its cache offset)",
                    lambda: pb.apply(positions=pb.positions - first)))
    token_index = pb.token_index
    if not np.array_equal(token_index, pb.positions):
        out.append(Mutant("position_offset", "equals the reference at the token indices 0 … T−1 instead of the given "
                    "positions (position ids ignored: left padding, cache offset)",
                    lambda: pb.apply(positions=token_index)))
    for name, low in (("bfloat16", "bfloat16"), ("float16", "float16")):
        out.append(Mutant("bf16_angles", f"equals the reference with inv_freq rounded to {name} (a buffer downcast by "
                    "model.to(dtype) or inv_freq.to(x.dtype)): O(1) phase errors by p ≈ 1000",
                    lambda lo=low: pb.apply(frequencies=(round_to(pb.inv_freq, lo), pb.attention_factor))))
        rounded = round_to(pb.positions, low)
        if pb.max_position > 256 and np.all(np.isfinite(rounded)):
            out.append(Mutant("bf16_angles", f"equals the reference with positions rounded to {name} (positions "
                        "cast to the activation dtype: 257 → 256, 2049 → 2048)",
                        lambda r=rounded: pb.apply(positions=r.astype(np.int64))))
    if rope.theta != 10000.0 and rope.rope_type != "proportional":
        params = {**rope.to_params(), "rope_theta": 10000.0}
        out.append(Mutant("default_theta", f"equals the reference with rope_theta = 10000 instead of "
                    f"{rope.theta:g} (the config's base was not read and a default filled in)",
                    lambda p=params: pb.apply(rope_config_from_params(p))))
    default = np.asarray(to_numpy(base_inv_freq(rope.theta, rope.rotary_dim, np_ns())))
    if rope.rope_type not in ("default", "proportional") and default.shape == pb.inv_freq.shape:
        out.append(Mutant("unscaled_frequencies", f"equals plain RoPE (θ = {rope.theta:g}, no {rope.rope_type} "
                    "scaling) with A = 1: the rope_scaling block was parsed but never applied",
                    lambda: pb.apply(frequencies=(default, 1.0))))
        if pb.attention_factor != 1.0:
            out.append(Mutant("unscaled_frequencies", f"equals plain-RoPE frequencies with the attention factor A = "
                        f"{pb.attention_factor:.10g} kept: the {rope.rope_type} frequencies were not applied",
                        lambda: pb.apply(frequencies=(default, pb.attention_factor))))
        with np.errstate(divide="ignore", invalid="ignore"):
            twice = np.where(default > 0, pb.inv_freq**2 / default, 0.0)
        out.append(Mutant("double_scaled_frequencies", f"equals the reference with the {rope.rope_type} ratio ω'/ω "
                    "applied twice (e.g. positions divided and inv_freq divided, or freq_factors on top of "
                    "scaled frequencies)", lambda: pb.apply(frequencies=(twice, pb.attention_factor))))
    if pb.attention_factor != 1.0:
        out.append(Mutant("missing_attention_factor", "equals the reference with A = 1 instead of "
                    f"{pb.attention_factor:.10g}: every rotated channel is 1/A = {1 / pb.attention_factor:.6f} of the "
                    "reference (logits × 1/A²)",
                    lambda: pb.apply(frequencies=(pb.inv_freq, 1.0))))
        out.append(Mutant("squared_attention_factor", "equals the reference with A² = "
                    f"{pb.attention_factor**2:.10g}: the port multiplied HF's final attention_factor by its own mscale "
                    "(logits × A⁴ instead of A²)",
                    lambda: pb.apply(frequencies=(pb.inv_freq, pb.attention_factor**2))))
    if rope.rope_type == "longrope":
        orig = rope.original_max_position_embeddings
        other_len, branch = (orig, "short") if pb.seq_len > orig else (orig + 1, "long")
        out.append(Mutant("longrope_factor_swap", f"equals the reference computed with the {branch} factors (seq_len "
                    f"{other_len}); HF uses long factors iff seq_len > {orig}, here seq_len = {pb.seq_len}",
                    lambda n=other_len: pb.apply(seq_len=n)))
    out += _partial_mutants(pb, refpos)
    return out


def _partial_mutants(pb: RopeProblem, refpos: Any) -> list[Mutant]:
    rope = pb.rope
    head_dim, d = rope.head_dim, rope.rotary_dim
    if rope.rope_type == "proportional" or (d == head_dim and rope.placement == "first"):
        return []
    from refpos.rope.scaling import base_inv_freq

    out = []
    full_w = np.asarray(to_numpy(base_inv_freq(rope.theta, head_dim, np_ns())))
    m, mm = d // 2, head_dim // 2
    full_channels = pair_channels(rope.layout, head_dim)  # the pairs of a full-width rotation
    partner = None
    if rope.layout == "half":  # pair j of the rotary span partnered with j + head_dim/2, as full width pairs it
        partner = tuple(channels[:m] for channels in full_channels)
    if d < head_dim:
        out.append(Mutant("partial_rotary_placement", f"equals full-width RoPE over all {head_dim} channels (ω from "
                    f"θ^(−2j/{head_dim})): the partial rotary factor ({d} of {head_dim}) was ignored",
                    lambda: rotate_pairs(pb.x, pb.positions, full_w, pb.attention_factor, full_channels)))
        out.append(Mutant("partial_rotary_placement", f"equals the reference with the exponent denominator "
                    f"head_dim = {head_dim} instead of rotary_dim = {d} (ω_j = θ^(−2j/{head_dim}))",
                    lambda: rotate_pairs(pb.x, pb.positions, full_w[:m], pb.attention_factor, pb.channels)))
        if partner is not None and rope.placement == "first":
            out.append(Mutant("partial_rotary_placement", f"equals rotation of the pairs (i, i + {mm}) (half of the "
                        f"head) instead of (i, i + {m}) (half of the rotary span): the wrong partner",
                        lambda: rotate_pairs(pb.x, pb.positions, pb.inv_freq, pb.attention_factor, partner)))
    for placement in ("first", "last"):
        if placement != rope.placement:
            other = dataclasses.replace(rope, placement=placement)
            out.append(Mutant("partial_rotary_placement", f"equals the reference with the rotated channels placed "
                        f"{'first (head)' if placement == 'first' else 'last (tail, DeepSeek MLA)'} instead of "
                        f"{rope.placement}", lambda o=other: pb.apply(o)))
    return out


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
    closest: tuple[float, str, str, float] | None = None
    for level, dtype in enumerate(ladder):
        for mid, evidence, mutant, size, keep in built:
            limit = np.asarray(tol.rope_tolerance(dtype, pb.positions[keep], pb.inv_freq, reference=mutant,
                                                  magnitude=size))
            ok, err, ratio = fit(candidate[keep], mutant, limit)
            if level == 0 and (closest is None or ratio < closest[0]):
                closest = (ratio, mid, evidence, err)
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
        if pb.rope.rope_type == "default" and moved and probe["fit_residual"] < residual:
            found.append({"id": known("wrong_theta"), "evidence": "the frequency probe at position 1 recovers ω_j "
                          f"that fit θ' = {fitted:.6g}, the config says θ = {pb.rope.theta:g}", "fitted_theta": fitted})
    finite = bool(np.all(np.isfinite(candidate[np.isfinite(pb.reference)])))  # else: named non_finite
    if not found and finite and closest is not None and np.isfinite(closest[0]):
        ratio, mid, evidence, err = closest
        found.append({"id": known("closest_mistake"), "evidence": (
            f"no mistake of the catalogue matches; the closest is {mid} ({evidence.split(' (')[0]}): max "
            f"|candidate − mutant| = {err:.3g}, {ratio:.3g}× the {pb.dtype} tolerance"), "closest": mid,
            "max_ratio": ratio, "max_abs_error": err})
    return found


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
