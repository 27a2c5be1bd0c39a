"""The fit of a candidate drawn: fitted against reference frequency per pair (``refpos check --plot FILE``).

:func:`plot_identification` draws a check's identification (:mod:`refpos.check.identify`) into a figure: on
the left the reference ``ω_j`` of every pair, the fitted :math:`|\\hat\\omega_j|` and the unscaled
:math:`\\theta^{-2j/d}` on a log scale, the bands of the config's rule shaded; every pair is drawn, each kind
with its own marker (:data:`PAIR_MARKERS`: within or outside its tolerance, turning backwards, another map than
a rotation, no frequency at all — the last on the reference line); on the right
:math:`|\\hat\\omega_j|/\\omega_j`. An ALiBi check draws the fitted slope of every
head against the reference's.

The documentation's figure ``fit-llama3`` (docs/diagnosis.md#the-fit) is the worked example there: Llama-3.1's
llama3 scaling with the wavelength taken as the period ``1/ω``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: (name, description, caption, figure size): what ``refpos.tools.plots`` registers the example under
FIT_PLOT = ("fit-llama3", "refpos check's fit of a llama3 port that takes the wavelength as 1/ω: ω̂ against ω per pair",
        "Pairs 29–43 (marked) turn at frequencies the config does not give: kept where llama3 blends or divides by "
        "s; the fit is reproduced by low_freq_factor and high_freq_factor divided by 2π.", (8.4, 4.0))

#: shades of the bands of a rule, in the order the bands come
BAND_SHADES = ("#f2f2f2", "#dde6f0", "#f0e4d8", "#e2f0dd")


def _band_spans(pairs: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    """Runs of consecutive pairs with one band label: ``(first, last, label)``."""
    spans: list[tuple[int, int, str]] = []
    for pair in pairs:
        label = pair.get("band") or ""
        if spans and spans[-1][2] == label:
            spans[-1] = (spans[-1][0], pair["index"], label)
        else:
            spans.append((pair["index"], pair["index"], label))
    return spans


#: how each kind of pair is drawn (:func:`pair_kinds`): marker, colour, legend label
PAIR_MARKERS = {
    "ok": ("o", "#1f77b4", "fitted ω̂ (ok)"),
    "wrong": ("x", "#d62728", "fitted ω̂ (outside tolerance)"),
    "backwards": ("v", "#d62728", "fitted |ω̂|, ω̂ < 0 (turns backwards)"),
    "other_map": ("s", "#ff7f0e", "not a rotation (a reflection): |ω̂|"),
    "no_fit": ("o", "0.45", "no ω̂ (drawn at ω): not a rotation at one frequency"),
}


def pair_kinds(pairs: list[dict[str, Any]]) -> np.ndarray:
    """The kind of every pair as drawn (:data:`PAIR_MARKERS`, or ``"moved"``: an M-RoPE pair fitted to another
    axis, drawn with that axis's letter): each pair is drawn, whatever the fit found."""
    kinds = []
    for p in pairs:
        w = p["omega_fitted"]
        if p.get("axis_fitted") and p["axis_fitted"] != p.get("axis"):
            kinds.append("moved")  # an M-RoPE pair that reads another axis: drawn with that axis as its marker
        elif w is None or not np.isfinite(w) or w == 0:
            kinds.append("no_fit")
        elif p.get("map") not in (None, "rotation"):
            kinds.append("other_map")
        elif w < 0:
            kinds.append("backwards")
        else:
            kinds.append("ok" if p["ok"] else "wrong")
    return np.array(kinds)


def plot_identification(fig: Any, result: dict[str, Any]) -> None:
    """Draw a check's identification (``pairs`` of RoPE or sinusoid, or ``heads`` of ALiBi) into ``fig``."""
    if "heads" in result:
        _plot_heads(fig, result)
        return
    pairs = result["pairs"]
    j = np.array([p["index"] for p in pairs])
    omega = np.array([p["omega"] for p in pairs], dtype=np.float64)
    fitted = np.array([np.nan if p["omega_fitted"] is None else p["omega_fitted"] for p in pairs], dtype=np.float64)
    wrong = np.array([not p["ok"] for p in pairs])
    unscaled = (result.get("reference") or {}).get("omega_unscaled")
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for ax in (left, right):
        labels = [s for s in _band_spans(pairs) if s[2]]
        for k, (first, last, label) in enumerate(labels):
            shade = BAND_SHADES[sorted({s[2] for s in labels}).index(label) % len(BAND_SHADES)] if label else None
            ax.axvspan(first - 0.5, last + 0.5, color=shade, lw=0, zorder=0, label=label.split(":")[0] if ax is left
                       and label not in [lb for _, _, lb in labels[:k]] and len(labels) <= 8 else None)
    if unscaled is not None:
        left.plot(j, unscaled, color="grey", lw=0.9, ls="--", label=r"$\theta^{-2j/d}$ (unscaled)")
    left.plot(j, omega, color="black", lw=1.3, label="reference ω")
    kinds = pair_kinds(pairs)
    size = np.abs(fitted)  # a pair turning backwards (ω̂ < 0) is drawn at |ω̂|, with its own marker
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = size / omega
    for kind, (marker, colour, label) in PAIR_MARKERS.items():
        at = kinds == kind
        if not at.any():
            continue
        style = {"ls": "none", "marker": marker, "ms": 5.5 if marker == "x" else 4.2, "color": colour,
                 "mfc": "none" if kind == "no_fit" else colour, "mew": 1.5 if marker == "x" else 1.0}
        left.plot(j[at], omega[at] if kind == "no_fit" else size[at], label=label, **style)
        if kind != "no_fit":
            right.plot(j[at], ratio[at], **style)
    read = [p.get("axis_fitted") if p.get("axis_fitted") != p.get("axis") else None for p in pairs]
    for axis in sorted({r for r in read if r}):  # M-RoPE pairs fitted to another axis: that axis as the marker
        at = np.array([r == axis for r in read]) & (kinds == "moved")
        left.plot(j[at], size[at], ls="none", marker=f"${axis}$", ms=7, color="#d62728",
                  label=f"fitted ω̂, reads {axis}")
    left.set_yscale("log")
    left.set_xlabel("pair j")
    left.set_ylabel("frequency (rad per position)")
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)), frameon=False, fontsize=8.5)
    right.axhline(1.0, color="black", lw=1.0)
    finite = ratio[np.isfinite(ratio) & (ratio > 0)]
    if finite.size and finite.max() / finite.min() > 10:  # a log scale for a spread of ratios, else linear
        right.set_yscale("log")
    elif finite.size:  # at least ±5 %: ratios within the fit's own precision draw as the line at 1
        low, high = min(float(finite.min()), 0.95), max(float(finite.max()), 1.05)
        right.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
    right.set_xlabel("pair j")
    right.set_ylabel("|ω̂| / ω")
    fitted_whole = result.get("fitted") or {}
    parts = [f"layout {fitted_whole['layout']}"] if fitted_whole.get("layout") else []
    if fitted_whole.get("position_offset") not in (None, 0):
        parts.append(f"offset {fitted_whole['position_offset']}")
    changed = fitted_whole.get("rule_changed") or {}
    rule = ", ".join(f"{k.replace('_', ' ')} {v[1]:.4g}" if isinstance(v[1], float) else
                     f"{k.replace('_', ' ')} {v[1]}" for k, v in changed.items() if not isinstance(v[1], list))
    right.set_title("fitted over reference, per pair", fontsize=9.5)
    left.set_title(f"{int(wrong.sum())} of {len(pairs)} pairs outside the tolerance", fontsize=9.5)
    if parts or rule:
        from refpos.tools.model_plots import wrap_to_width

        title = "fit: " + "; ".join(parts + ([rule] if rule else []))
        fig.suptitle(wrap_to_width(title, fig.get_figwidth(), 9.5), fontsize=9.5)


def _plot_heads(fig: Any, result: dict[str, Any]) -> None:
    heads = result["heads"]
    h = np.array([x["index"] for x in heads])
    slope = np.array([x["slope"] for x in heads])
    fitted = np.array([x["slope_fitted"] for x in heads])
    wrong = np.array([not x["ok"] for x in heads])
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(h, slope, color="black", lw=1.3, marker=".", label="reference slope")
    ax.plot(h[~wrong], fitted[~wrong], "o", ms=3.5, color="#1f77b4", label="fitted (ok)")
    ax.plot(h[wrong], fitted[wrong], "x", ms=6, mew=1.5, color="#d62728", label="fitted (outside tolerance)")
    ax.set_yscale("log")
    ax.set_xlabel("head h")
    ax.set_ylabel("slope")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, frameon=False)


def example_identification() -> dict[str, Any]:
    """The worked example of docs/diagnosis.md#the-fit: ``refpos check`` of Llama-3.1's golden apply case against
    a port whose llama3 wavelength is the period ``1/ω``."""
    import refpos
    from refpos.check.case import check_case
    from refpos.golden.manifest import default_golden_dir, find_case, load_manifest
    from refpos.rope.rules import Float64
    from refpos.rope.rules.llama3 import llama3_inv_freq

    root = default_golden_dir()
    case = find_case(load_manifest(root), "rope/meta-llama--Llama-3.1-8B/apply")
    x = np.load(root / case["inputs"]["x"]["file"], allow_pickle=False)
    positions = np.load(root / case["inputs"]["positions"]["file"], allow_pickle=False)
    rope = refpos.rope_config_from_params(case["parameters"]["rope"])
    period = np.asarray(llama3_inv_freq(rope, None, Float64(np), cycle=1.0))  # λ = 1/ω
    y = np.asarray(refpos.apply_rope(x, positions, rope, seq_len=case["parameters"]["seq_len"],
                                     frequencies=(period, 1.0)))
    return check_case(case["id"], y, golden_dir=root)


def plot_fit_example(fig: Any) -> None:
    plot_identification(fig, example_identification())


def draw_identification(result: dict[str, Any], out: str | Path, *, force: bool = False) -> Path:
    """Draw ``result``'s identification into ``out`` (``.svg`` or ``.png``) in the house style (an existing
    file is replaced only with ``force``: :func:`refpos.tools.figures.save_figure`)."""
    from refpos.tools.figures import FORMATS, STYLE, pyplot, save_figure

    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"--plot must name a .svg or .png file, got {str(out)!r}")
    if "pairs" not in result and "heads" not in result:
        raise ValueError("--plot draws a fit of frequencies (rope, sinusoid) or slopes (alibi); this check has none")
    plt = pyplot()
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=FIT_PLOT[3], layout="constrained")
        try:
            plot_identification(fig, result)
            return save_figure(fig, out, force=force)
        finally:
            plt.close(fig)
