"""The lines ``refpos check`` prints for an identification (:mod:`refpos.check.identify`).

One line for the whole (pairing, positions, offset, attention factor), one per group of wrong pairs (the pairs
outside their tolerance, as ranges, grouped by the band of the config's rule they fall in and what the
candidate used there), one for the rule that reproduces the fitted frequencies::

    fit: layout half, positions as given, offset 0, attention factor 1 (reference 1)
    fit: 15 of 64 pairs outside the tolerance, by band and what the candidate used:
      29–34  smooth band: blended  ω̂ = θ^(−2j/d), kept
      35–37  low band: ω/s         ω̂ = θ^(−2j/d), kept
      38–43  low band: ω/s         ω̂/ω = 1.5 … 6.566
    fit: llama3 reproduces ω̂ with low_freq_factor = 0.159155 (config 1: × 1/2π), …
"""

from __future__ import annotations

import math
from typing import Any

#: the most groups of wrong pairs the report lists (the JSON has every pair)
MAX_GROUPS = 12
#: ratios the report names when a changed key is the config's times one of them
NAMED_RATIOS = {"2π": 2 * math.pi, "1/2π": 1 / (2 * math.pi), "2": 2.0, "1/2": 0.5}


def ranges(indices: list[int], dash: str = "–") -> str:
    """``[0, 1, 2, 5]`` as ``0–2, 5`` (``dash`` between the ends of a run)."""
    spans, start = [], indices[0]
    for prev, cur in zip(indices, [*indices[1:], None], strict=True):
        if cur is None or cur != prev + 1:
            spans.append(f"{start}" if start == prev else f"{start}{dash}{prev}")
            start = cur
    return ", ".join(spans)


def _g(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return "nan" if value != value else f"{value:.6g}"
    return str(value)


def _phase_is(pair: dict[str, Any], angle: float) -> bool:
    """Whether the pair's fitted angle at ``p = 0`` is ``angle`` within its bound."""
    phase = pair.get("phase_fitted")
    if phase is None:
        return False
    allowed = (pair.get("phase_bound") or 0.0) + 1e-9
    return abs(math.remainder(phase - angle, 2 * math.pi)) <= allowed


def _map_used(pair: dict[str, Any]) -> str:
    """A pair that is another map of the pair than a rotation (:mod:`refpos.check.fit_maps`), and its ω̂."""
    from refpos.check.fit_maps import MAPS

    w, w_ref, bound = pair["omega_fitted"], pair["omega"], pair["omega_bound"] or 0.0
    at = ("ω̂ = ω" if abs(w - w_ref) <= bound else "ω̂ = −ω" if abs(w + w_ref) <= bound else "ω̂/ω") \
        if w is not None else "ω̂ undetermined"
    if pair["map"] == "sin_reflection" and at == "ω̂ = −ω":
        at += " (the table [−sin, sin]: the same map at −φ)"
    return f"not a rotation: {MAPS[pair['map']].what}, at {at}"


def _used(pair: dict[str, Any], plain: float | None, factor: float | None) -> str:
    """What the candidate used on one pair, in words."""
    if pair.get("non_finite"):
        return f"NaN or infinite on {pair['non_finite']} rows"
    if pair.get("axis_fitted") and pair["axis_fitted"] != pair.get("axis"):
        return f"reads {pair['axis_fitted']} instead of {pair['axis']}"
    if pair.get("map") not in (None, "rotation"):
        return _map_used(pair)
    if not pair["rotation"]:
        return pair["note"] or "not a rotation at one frequency in the positions given"
    w, w_ref, bound = pair["omega_fitted"], pair["omega"], pair["omega_bound"] or 0.0
    if w is None:
        return pair["note"] or "ω̂ undetermined"
    if abs(w - w_ref) <= bound:
        amp, amp_ref = pair["amplitude_fitted"], pair["amplitude"]
        return "ω̂ = ω" + (f", Â = {_g(amp)} (A = {_g(amp_ref)})" if amp is not None and abs(amp - amp_ref) >
                          2 * (pair.get("amplitude_bound") or 0.0) else "")
    if w < 0 and abs(w + w_ref) <= bound:
        if _phase_is(pair, math.pi / 2):
            return "sin and cos exchanged: a rotation by π/2 − ωp (ω̂ = −ω, angle π/2 at p = 0)"
        if _phase_is(pair, 0.0):
            return "sin negated (a sign flip): a rotation by −ωp, ω̂ = −ω"
        return "turns backwards: ω̂ = −ω"
    if w < 0:
        return "turns backwards: ω̂ < 0, ω̂/ω"
    if plain is not None and abs(w - plain) <= bound:
        return "ω̂ = θ^(−2j/d), kept"
    if plain is not None and factor and abs(w - plain / factor) <= bound:
        return "ω̂ = θ^(−2j/d)/s"
    return "ω̂/ω"


def _runs(pairs: list[dict[str, Any]], plains: list[float | None], factor: float | None
          ) -> list[tuple[list[int], str, str, list[float]]]:
    """The wrong pairs grouped by band and kind of use, in the order of their first pair: ``(indices, band, use,
    ratios ω̂/ω)`` (an interleaved M-RoPE assignment gives groups of every third pair)."""
    groups: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
    for pair, plain in zip(pairs, plains, strict=True):
        if pair["ok"]:
            continue
        indices, ratios = groups.setdefault((pair["band"], _used(pair, plain, factor)), ([], []))
        indices.append(pair["index"])
        if pair["omega_fitted"] is not None and pair["omega"]:
            ratios.append(pair["omega_fitted"] / pair["omega"])
    return [(indices, band, used, ratios) for (band, used), (indices, ratios) in groups.items()]


def _changed(changes: dict[str, list[Any]]) -> str:
    parts = []
    for key, (was, now) in changes.items():
        if isinstance(now, list):
            differ = [i for i, (a, b) in enumerate(zip(was or [], now, strict=False)) if abs(a - b) > 1e-9 * abs(a)]
            inverse = was and all(abs(a * b - 1) < 1e-6 for a, b in zip(was, now, strict=False))
            parts.append(f"{key} differing at {ranges(differ) if differ else 'no index'}"
                         + (" (the reciprocals of the config's)" if inverse else ""))
            continue
        text = f"{key} = {_g(now)} (config {_g(was)}"
        if isinstance(was, (int, float)) and isinstance(now, (int, float)) and was and not isinstance(was, bool):
            named = next((name for name, r in NAMED_RATIOS.items() if abs(now / was / r - 1) < 1e-6), None)
            text += f": × {named}" if named else f": × {now / was:.6g}"
        parts.append(text + ")")
    return ", ".join(parts)


def _versus(fitted: Any, config: Any) -> str:
    return f" (config: {config})" if config is not None and fitted != config else ""


def identification_lines(ident: dict[str, Any]) -> list[str]:
    """The report's lines (the module docstring) for an identification (``pairs``, ``fitted`` and, to say where
    the candidate kept or divided a frequency, ``reference``: the unscaled ``θ^(−2j/d)`` and the scale ``s``)."""
    fitted, pairs = ident["fitted"], ident["pairs"]
    reference = ident.get("reference") or {}
    plains = reference.get("omega_unscaled") or [None] * len(pairs)
    factor = reference.get("factor")
    lines = []
    if fitted.get("layout") is not None or fitted.get("reason"):
        whole = []
        if fitted.get("layout") is not None:
            whole.append(f"layout {fitted['layout']}" + _versus(fitted["layout"], reference.get("layout")))
            if reference.get("partial") or fitted.get("placement") != reference.get("placement"):
                whole.append(f"placement {fitted['placement']}" + _versus(fitted["placement"],
                                                                         reference.get("placement")))
        used = fitted.get("positions")
        if isinstance(used, list):
            whole.append(("positions: rows " if set(used) <= {"t", "h", "w"} else "positions: ") + ", ".join(used))
        elif used is not None:
            whole.append(f"positions {'as given' if used == 'positions' else used}")
        if fitted.get("layout") is not None:
            offset = fitted.get("position_offset")
            whole.append(f"offset {_g(offset)}" if offset is not None else
                         f"no common offset ({fitted.get('position_offset_reason', '')})")
            amp = fitted.get("attention_factor")
            whole.append(f"attention factor {_g(amp)} (reference {_g(pairs[0]['amplitude'])})" if amp is not None
                         else f"no common attention factor ({fitted.get('attention_factor_reason', '')})")
        precision = fitted.get("precision")
        declared = ident.get("dtype")
        head = "fit" + (f" (to {precision} precision: not a rotation to {declared}'s)"
                        if precision and declared and precision != declared else "")
        lines.append(f"{head}: " + "; ".join(filter(None, [", ".join(whole), fitted.get("reason")])))
        if fitted.get("pass_through"):
            lines.append(f"fit: {fitted['pass_through']}")
    wrong = [p for p in pairs if not p["ok"]]
    if wrong:
        runs = _runs(pairs, plains, factor)
        if len({r[2] for r in runs}) == 1 and not runs[0][2].endswith("ω̂/ω"):  # one use everywhere: no bands
            runs = [(sorted(i for r in runs for i in r[0]), "", runs[0][2], [])]
        banded = any(r[1] for r in runs)
        lines.append(f"fit: {len(wrong)} of {len(pairs)} pairs outside the tolerance, "
                     + ("by band and what the candidate used:" if banded else "what the candidate used:"))
        width = max(len(ranges(r[0])) for r in runs)
        band_width = max(len(r[1]) for r in runs)
        shown = runs if len(runs) <= MAX_GROUPS else runs[: MAX_GROUPS - 1]
        for indices, band, used, ratios in shown:
            if used.endswith("ω̂/ω") and ratios:
                used += f" = {min(ratios):.4g}" + (f" … {max(ratios):.4g}" if len(ratios) > 1 else "")
            lines.append(f"  {ranges(indices):<{width}}  " + (f"{band:<{band_width}}  " if banded else "") + used)
        if len(shown) < len(runs):
            rest = [i for r in runs[len(shown):] for i in r[0]]
            lines.append(f"  … {len(runs) - len(shown)} more groups: pairs {ranges(sorted(rest))} (--json lists each)")
    elif pairs:
        lines.append(f"fit: all {len(pairs)} pairs within the tolerance")
    lines += rule_lines(fitted)
    return lines


def rule_lines(fitted: dict[str, Any]) -> list[str]:
    """The line of the rule that reproduces ω̂; a structural reading (:mod:`refpos.check.readings`) first, the
    keys that also reproduce ω̂ as its equivalent."""
    rule, kind = fitted.get("rule"), fitted.get("rule_type")
    reading = (fitted.get("reading") or {}).get("text")
    if rule is not None:
        changed = fitted.get("rule_changed") or {}
        keys = f"with {_changed(changed)}" if changed else "with the config's own keys"
        return [f"fit: {reading}; equivalently, {kind} reproduces ω̂ {keys}" if reading else
                f"fit: {kind} reproduces ω̂ {keys}"]
    if reading:
        return [f"fit: {reading}"]
    if fitted.get("rule_reason"):
        return [f"fit: no {kind} keys reproduce ω̂: {fitted['rule_reason']}"]
    return []


def _sequence(geometric: dict[str, float] | None) -> str:
    if geometric is None:
        return "not one geometric sequence"
    return f"m_0·r^h with m_0 = {geometric['first']:.6g}, r = 2^{geometric['log2_ratio']:.6g}"


def alibi_lines(result: dict[str, Any]) -> list[str]:
    """The fitted slopes: the heads outside the tolerance, the form, the sequence the slopes make."""
    heads, fitted = result["heads"], result["fitted"]
    lines = []
    if fitted.get("form"):
        lines.append(f"fit: bias form {fitted['form']} (slopes fitted per head, residual "
                     f"{fitted['form_residual']:.3g} of the largest bias)")
    wrong = [h for h in heads if not h["ok"]]
    if wrong:
        shown = ", ".join(f"{h['index']}: {h['slope_fitted']:.6g} (× {h['slope_fitted'] / h['slope']:.9g})"
                          for h in wrong[:6])
        lines.append(f"fit: heads {ranges([h['index'] for h in wrong])} outside the tolerance; fitted slope (× the "
                     "reference's): " + shown + (" …" if len(wrong) > 6 else ""))
    lines.append(f"fit: the slopes are {_sequence(fitted['geometric'])}; the reference's are "
                 f"{_sequence(fitted['reference_geometric'])}")
    return lines


def bucket_lines(result: dict[str, Any], family: str) -> list[str]:
    """The fitted bucket map: the offsets in other buckets (runs) and the keys that reproduce the map."""
    found = result["bucket_map"]
    lines = [f"fit: {found['offsets']} distinct offsets, {found['differ']} in another bucket than the reference's"
             + (":" if found["runs"] else "")]
    for run in found["runs"][:8]:
        first, last = run["offsets"]
        where = f"{first}" if first == last else f"{first} … {last}"
        lines.append(f"  offsets {where}: buckets {ranges(run['buckets'])} (reference "
                     f"{ranges(run['reference_buckets'])})")
    if len(found["runs"]) > 8:
        lines.append(f"  … {len(found['runs']) - 8} more runs")
    if found.get("keys") is not None:
        changed = found.get("changed") or {}
        lines.append(f"fit: {family} buckets reproduce the map " + (
            "with " + ", ".join(f"{k} = {v[1]} (config {v[0]})" for k, v in changed.items()) if changed
            else "with the config's own keys"))
    elif found.get("reason"):
        lines.append(f"fit: {found['reason']}")
    return lines


def learned_lines(found: dict[str, Any]) -> list[str]:
    """The table rows a learned candidate read."""
    offset = found.get("row_offset")
    if offset is not None:
        return [f"fit: every candidate row is the table row {offset:+d} from the one the layer reads (it reads p + "
                "its position offset)" if offset else "fit: every candidate row is the table row the layer reads"]
    return [f"fit: {found['rows_matched']} of {found['rows']} candidate rows equal a table row; {found['reason']}"]


def report_lines(result: dict[str, Any]) -> list[str]:
    """The identification lines of any check's result (RoPE and sinusoid pairs, ALiBi heads, bucket maps, the
    rows a learned candidate read)."""
    if "rows_read" in result:
        return learned_lines(result["rows_read"])
    if "pairs" in result:
        return identification_lines(result)
    if "heads" in result:
        return alibi_lines(result)
    if "bucket_map" in result:
        return bucket_lines(result, result.get("target", ""))
    return []
