"""The catalogue's names for what the fit found: a fitted part that equals a catalogued mistake is named by it.

Each RoPE mistake of the catalogue is a change to the reference's call (:mod:`refpos.check.rope_mistakes`): of
its layout or placement, its positions (a shift, the token index, another axis per pair for M-RoPE), its
frequencies ``ω`` or its attention factor ``A``. The fit (:mod:`refpos.check.identify`) recovers those same
parts from the candidate. A variant of a mistake is *exhibited* by the fit when every part the variant changes
equals the fitted one (the frequencies within their bounds); the parts it leaves alone are not looked at, so a
candidate with two mistakes (a swapped layout *and* shifted positions) is named by both, where its output
matches no single mutant.

Mistakes found otherwise have their own test here: ``wrong_theta`` when the rule fit changes only the base of
plain RoPE, ``attention_factor_mismatch`` when the shared fitted amplitude is none of ``1, A, A²``.
``float32_angles`` (a phase path's precision, not a part of the call) is not a fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.catalogue import family, known
from refpos.check.mistakes import Context, RopeCall, Variant
from refpos.check.problem import np_ns
from refpos.check.rope_mistakes import ROPE_MISTAKES
from refpos.rope.rules import PLAIN

Match = dict[str, Any]


def _per_pair_rows(call: RopeCall, token_index: np.ndarray) -> list[np.ndarray] | None:
    """The positions each pair of ``call`` is rotated at, ``m`` arrays ``(N,)`` (M-RoPE: its axis's row)."""
    from refpos.rope.mrope import pair_axes

    m = call.inv_freq.size
    if call.rope.mrope_section is None:
        return [np.asarray(call.positions)] * m
    axes = pair_axes(call.rope.mrope_section, call.rope.mrope_scheme)
    return [np.asarray(call.positions[a]) for a in axes]


def _positions_match(reference: RopeCall, variant: RopeCall, fitted: dict[str, Any], pairs: list[dict[str, Any]],
                     token_index: np.ndarray, rows: np.ndarray | None) -> bool | None:
    """Whether the fitted positions are the variant's; ``None`` when the variant does not change them."""
    mine, theirs = _per_pair_rows(reference, token_index), _per_pair_rows(variant, token_index)
    if all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True)):
        return None
    if reference.rope.mrope_section is not None:  # each fitted pair must read the variant's row
        named = {"t": reference.positions[0], "h": reference.positions[1], "w": reference.positions[2],
                 "token index": token_index}
        checked = [p for p in pairs if p["rotation"] and p.get("fitted_against") in named]
        return bool(checked) and all(np.array_equal(named[p["fitted_against"]], theirs[p["index"]]) for p in checked)
    keep = np.ones(mine[0].shape, dtype=bool) if rows is None else rows
    shift = np.unique(theirs[0][keep] - mine[0][keep])
    if np.array_equal(theirs[0], token_index):
        return fitted.get("positions") == "token index"
    return shift.size == 1 and fitted.get("position_offset") == int(shift[0])


def _exhibits(reference: RopeCall, variant: Variant, fitted: dict[str, Any], pairs: list[dict[str, Any]],
              token_index: np.ndarray) -> bool:
    """Whether every part ``variant`` changes equals the fitted one (and it changes at least one)."""
    call = variant.call
    if call.pairs is not None or call.angle_dtype != reference.angle_dtype or call.inv_freq.shape != \
            reference.inv_freq.shape:
        return False  # other channels, another phase path, another pair count: not parts the fit recovers
    checks = []
    for part in ("layout", "placement"):
        if getattr(call.rope, part) != getattr(reference.rope, part):
            checks.append(fitted.get(part) == getattr(call.rope, part))
    positions = _positions_match(reference, call, fitted, pairs, token_index, variant.rows)
    if positions is not None:
        checks.append(positions)
    if not np.array_equal(call.inv_freq, reference.inv_freq):
        checks.append(frequencies_shown(call.inv_freq, reference.inv_freq, pairs))
    if call.attention_factor != reference.attention_factor:
        amp, bound = fitted.get("attention_factor"), fitted.get("attention_factor_bound") or 0.0
        checks.append(amp is not None and abs(amp - call.attention_factor) <= bound)
    return bool(checks) and all(checks)


def frequencies_shown(variant: np.ndarray, reference: np.ndarray, pairs: list[dict[str, Any]]) -> bool:
    """Whether the fitted frequencies are the variant's: every fitted pair is within its bound of the variant's
    ω, and on at least one of them the variant's ω is not the reference's (a variant that changes only pairs
    the fit did not determine is not shown by the pairs it left alone)."""
    fitted = [p for p in pairs if p["rotation"] and p["omega_fitted"] is not None]
    bound = {p["index"]: p["omega_bound"] or 0.0 for p in fitted}
    return all(abs(p["omega_fitted"] - variant[p["index"]]) <= bound[p["index"]] for p in fitted) and any(
        abs(variant[j] - reference[j]) > bound[j] for j in bound)


def variants_of(call: RopeCall, context: Context) -> list[tuple[str, Variant]]:
    """``(id, variant)`` of every diagnosed RoPE and M-RoPE mistake of the catalogue found by a mutant."""
    out = []
    for entry in [*family("rope"), *family("mrope")]:
        mistake = ROPE_MISTAKES.get(entry.id)
        if mistake is None or not entry.diagnosed or mistake.found_by != "mutant":
            continue
        try:
            out += [(entry.id, v) for v in mistake.variants(call, context)]
        except (ValueError, TypeError):
            continue
    return out


def _rule_names(rope: Any, fitted: dict[str, Any]) -> list[Match]:
    """``wrong_theta`` when the rule fit changes only the base of plain RoPE; a structural reading of the
    frequencies (:mod:`refpos.check.readings`) comes first in its evidence."""
    changed = fitted.get("rule_changed") or {}
    if not (rope.rope_type == PLAIN and set(changed) == {"rope_theta"} and changed["rope_theta"][1] != 10000.0):
        return []
    evidence = (f"plain RoPE with rope_theta = {changed['rope_theta'][1]:.6g} reproduces ω̂ (the config says "
                f"{changed['rope_theta'][0]:g})")
    return [{"id": known("wrong_theta"), "evidence": with_reading(f"the fit shows it: {evidence}", fitted)}]


def with_reading(evidence: str, fitted: dict[str, Any]) -> str:
    """``evidence`` of an equivalence, after the structural reading of the frequencies when there is one."""
    reading = (fitted.get("reading") or {}).get("text")
    return f"{reading}; equivalently, {evidence}" if reading else evidence


def frequency_names(rope: Any, seq_len: int | None, ident: dict[str, Any]) -> list[Match]:
    """The catalogued mistakes a candidate holding the frequencies themselves (a ``frequencies`` golden case,
    :func:`refpos.check.identify.identify_frequencies`) shows: each mistake whose variant's ``ω`` every pair
    equals within its bound (:func:`frequencies_shown`), and ``wrong_theta`` from the rule fit — what the
    ``apply`` case of the same model names from the rotated rows."""
    import refpos

    omega, factor = refpos.rope_frequencies(rope, seq_len=seq_len, xp=np_ns())
    call = RopeCall(rope, np.zeros(1, dtype=np.int64), seq_len, np.asarray(to_numpy(omega)), float(factor))
    found: list[Match] = []
    for mistake_id, variant in variants_of(call, Context(np.zeros(1, dtype=np.int64), 0, 0)):
        if mistake_id in {f["id"] for f in found} or variant.call.inv_freq.shape != call.inv_freq.shape:
            continue
        if not np.array_equal(variant.call.inv_freq, call.inv_freq) and frequencies_shown(
                variant.call.inv_freq, call.inv_freq, ident["pairs"]):
            found.append({"id": known(mistake_id), "evidence": f"the frequencies show it: {variant.evidence}"})
    return found + [n for n in _rule_names(rope, ident["fitted"]) if n["id"] not in {f["id"] for f in found}]


def fit_names(rope: Any, seq_len: int | None, ident: dict[str, Any], positions: np.ndarray,
              token_index: np.ndarray) -> list[Match]:
    """The catalogued mistakes the fit exhibits (the module docstring), each ``{"id", "evidence"}``.

    ``positions``: the fitted rows' positions ``(N,)`` (``(3, N)`` for M-RoPE), ``token_index`` their index.
    """
    fitted, pairs = ident["fitted"], ident["pairs"]
    if fitted.get("layout") is None:
        return []
    reference = RopeCall.of(rope, positions, seq_len)
    context = Context(token_index, int(np.min(positions)), int(np.max(positions)))
    found: list[Match] = []
    for mistake_id, variant in variants_of(reference, context):
        if mistake_id not in {f["id"] for f in found} and _exhibits(reference, variant, fitted, pairs, token_index):
            found.append({"id": known(mistake_id), "evidence": f"the fit shows it: {variant.evidence}"})
    found += _rule_names(rope, fitted)
    amp, a = fitted.get("attention_factor"), ident["pairs"][0]["amplitude"] if ident["pairs"] else 1.0
    bound = fitted.get("attention_factor_bound") or 0.0
    if amp is not None and all(abs(amp - v) > bound for v in (a, 1.0, a * a)):
        found.append({"id": known("attention_factor_mismatch"), "evidence": f"the fit shows it: every pair is "
                      f"scaled by {amp:.10g} (reference A = {a:.10g}): another magnitude rule"})
    return found


def merge(diagnosis: list[Match], names: list[Match], fitted: dict[str, Any] | None = None) -> list[Match]:
    """The diagnosis with the fit's names it lacks (before the error profile); ``closest_mistake`` dropped when
    the fit names a mistake; ``wrong_theta`` (an equivalence) after the structural reading of ``fitted``'s
    frequencies when they have one."""
    if fitted and fitted.get("reading"):
        diagnosis = [{**d, "evidence": with_reading(d["evidence"], fitted)} if d["id"] == "wrong_theta" and
                     not d["evidence"].startswith(fitted["reading"]["text"]) else d for d in diagnosis]
    have = {d["id"] for d in diagnosis}
    new = [n for n in names if n["id"] not in have]
    if not new:
        return diagnosis
    kept = [d for d in diagnosis if d["id"] != "closest_mistake"]
    tail = [d for d in kept if d["id"] == "error_profile"]
    return [d for d in kept if d["id"] != "error_profile"] + new + tail
