"""The figure of one model's RoPE: ``refpos plot --config CONFIG``.

Drawn from what ``refpos rope CONFIG`` resolves (:func:`refpos.models.from_hf_config`), in three parts:

* **frequencies per pair**: the model's ``ω'_j`` against the unscaled ``ω_j = θ^{-2j/d}`` of the same
  head, with the bands of its scaling rule shaded (:func:`rule_bands`) and the frequency of one turn in
  the pre-training length ``L_0``; a rule whose frequencies depend on the current length ``L`` (dynamic
  NTK, LongRoPE) is drawn at several lengths;
* **the attention factor** ``A`` that multiplies cos and sin, against ``L`` (and DeepSeek's softmax
  multiplier where the config sets one);
* for M-RoPE, **the position each pair reads** (t, h or w).

A llama3 band edge in the wrong place, a factor that was not applied, sections in the wrong order: each
shows at a glance. Keys the config sets that refpos does not model are named under the figure.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.rope.config import RopeConfig
from refpos.rope.mrope import pair_axes
from refpos.rope.rules import rule_of
from refpos.rope.scaling import attention_factor, rope_frequencies, softmax_multiplier, yarn_correction_range
from refpos.tools.figures import STYLE, pyplot, save_figure

#: one band of a scaling rule: what the rule does to the pairs there, first pair, last pair (fractional)
Band = tuple[str, float, float]
#: fill colours of the bands, in order (kept, blended, divided)
BAND_COLOURS = ("#dbe9f6", "#fdebd0", "#e8dff5")
#: colours of the M-RoPE axes t, h, w
AXIS_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c")
MODEL_FIGSIZE = (8.6, 4.4)
#: the documentation's figures of real models (docs/figures.md), drawn by ``refpos plot --all`` like the
#: others: figure name -> a config of the committed goldens (``golden/configs/``)
DOC_MODELS = {
    "model-llama-3.1-8b": "meta-llama--Llama-3.1-8B.json",
    "model-qwen2-vl-7b": "Qwen--Qwen2-VL-7B-Instruct.json",
}


def pair_at_turns(turns: float, rope: RopeConfig) -> float:
    r"""The (fractional) pair whose unscaled wavelength fits ``turns`` times into ``L_0``.

    .. math:: \lambda_j = 2\pi\,\theta^{2j/d} = L_0 / n \iff j = \frac{d \ln\bigl(L_0 / (2\pi n)\bigr)}{2 \ln\theta}
    """
    return rope.rotary_dim * math.log(rope.original_max_position_embeddings / (2 * math.pi * turns)) / (
        2 * math.log(rope.theta))


def rule_bands(rope: RopeConfig) -> tuple[Band, ...]:
    """The bands of pairs a scaling rule treats differently, fast pairs first; ``()`` for a rule with none.

    * yarn: pairs up to ``lo`` keep ``ω``, from ``hi`` on they are divided by ``s``, the ramp blends
      between (:func:`refpos.rope.scaling.yarn_correction_range`, truncated and clamped as the rule is);
    * llama3: wavelengths below ``L_0/h`` keep ``ω`` (more than ``h`` turns in ``L_0``), above ``L_0/l``
      they are divided by ``s``, the band between (edges included) is blended.

    Llama 3.1 (θ = 5e5, d = 128, ``L_0`` = 8192, l = 1, h = 4): pair 28 turns more than 4 times in
    ``L_0`` (λ = 1955), pair 35 less than once (λ = 8219):

    >>> llama = RopeConfig(rope_type="llama3", theta=500000.0, head_dim=128, factor=8.0,
    ...                    original_max_position_embeddings=8192, low_freq_factor=1.0, high_freq_factor=4.0)
    >>> [(name, round(first, 2), round(last, 2)) for name, first, last in rule_bands(llama)]
    [('keeps ω', 0.0, 28.22), ('blends ω and ω/s', 28.22, 34.98), ('ω/s', 34.98, 63.0)]
    """
    last = float(rope.n_pairs - 1)
    reads = rule_of(rope.rope_type).parameters  # the rule's record: which band parameters it reads
    if "beta_fast" in reads:  # YaRN and its kin: the ramp between the correction range's ends
        lo, hi = yarn_correction_range(rope)
        edges = (float(lo), float(hi))
        names = ("keeps ω", "ramp from ω to ω/s", "ω/s")
    elif "low_freq_factor" in reads:  # llama3: wavelength bands at L_0/h and L_0/l
        edges = (pair_at_turns(rope.high_freq_factor, rope), pair_at_turns(rope.low_freq_factor, rope))
        names = ("keeps ω", "blends ω and ω/s", "ω/s")
    else:
        return ()
    fast, slow = (min(max(edge, 0.0), last) for edge in edges)
    return tuple((name, a, b) for name, a, b in zip(names, (0.0, fast, slow), (fast, slow, last), strict=True))


def curve_lengths(rope: RopeConfig, seq_len: int | None) -> list[int | None]:
    """The lengths ``L`` to draw ``ω'`` at: the one asked for, else where the rule's ``ω'`` changes with ``L``."""
    if seq_len is not None:
        return [seq_len]
    l0 = rope.original_max_position_embeddings
    if "long_factor" in rule_of(rope.rope_type).parameters:  # LongRoPE: the short factors up to L_0, then long
        return [l0, max(rope.max_position_embeddings or 0, l0 + 1)]
    longest = rope.max_position_embeddings or l0
    if longest and not np.array_equal(to_numpy(rope_frequencies(rope, xp=np)[0]),
                                      to_numpy(rope_frequencies(rope, seq_len=2 * longest, xp=np)[0])):
        return [2 * longest, 4 * longest]  # dynamic NTK: the base grows past L_max
    return [None]


def unscaled(rope: RopeConfig, n_pairs: int) -> np.ndarray:
    """``ω_j = θ^{-2j/d}`` of the same head without the rule: ``n_pairs`` pairs (``d = 2·n_pairs``)."""
    plain = RopeConfig(theta=rope.theta, head_dim=rope.head_dim, rotary_dim=2 * n_pairs)
    return to_numpy(rope_frequencies(plain, xp=np)[0])


def model_name(config: str | Path) -> str:
    """What the figure calls the model: the folder's name (a folder, or a file named ``config.json``),
    else the file's name without its suffix."""
    path = Path(config).resolve()
    if path.is_dir():
        return path.name
    return (path.parent.name or path.stem) if path.name == "config.json" else path.stem


def default_out(name: str) -> Path:
    """``<name>-rope.svg`` in the current folder, the name reduced to letters, digits, ``.``, ``_``, ``-``."""
    return Path(re.sub(r"[^A-Za-z0-9._-]+", "-", name.split("/")[-1]).strip("-.") + "-rope.svg")


def _title(name: str, rope: RopeConfig) -> str:
    parts = [f"{name}: {rope.rope_type} RoPE", f"θ = {rope.theta:g}", f"d = {rope.rotary_dim} of {rope.head_dim}"]
    if rope.factor is not None:
        parts.append(f"s = {rope.factor:g}")
    if rope.original_max_position_embeddings is not None:
        parts.append(f"$L_0$ = {rope.original_max_position_embeddings}")
    return ", ".join(parts)


def _frequencies(ax: Any, rope: RopeConfig, seq_len: int | None) -> None:
    curves = [(length, to_numpy(rope_frequencies(rope, seq_len=length, xp=np)[0]))
              for length in curve_lengths(rope, seq_len)]
    n_pairs = curves[0][1].size
    pairs = np.arange(n_pairs)
    for (name, first, last), colour in zip(rule_bands(rope), BAND_COLOURS, strict=False):
        ax.axvspan(first, last, color=colour, lw=0)
        ax.text((first + last) / 2, 1.01, name, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                fontsize=8.5)
    ax.semilogy(pairs, unscaled(rope, n_pairs), "--", color="0.45", lw=1.2, label=r"unscaled $\theta^{-2j/d}$")
    for length, omega in curves:
        rotated = omega > 0  # proportional RoPE: pairs past n_rot do not turn (ω = 0)
        label = r"this model $\omega'_j$" + ("" if length is None else f" at L = {length:,}")
        ax.semilogy(pairs[rotated], omega[rotated], ".-", lw=1.2, markersize=3, label=label)
        if not rotated.all():
            ax.text(pairs[~rotated][0], omega[rotated][-1], f"pairs ≥ {pairs[~rotated][0]}: ω = 0 (not rotated)",
                    fontsize=8.5, va="bottom")
    if rope.original_max_position_embeddings:
        ax.axhline(2 * math.pi / rope.original_max_position_embeddings, color="crimson", lw=0.8, ls=":",
                   label=r"one turn in $L_0$")
    ax.set_xlim(-0.5, n_pairs - 0.5)
    ax.set_xlabel("pair j (fast pairs left)")
    ax.set_ylabel(r"frequency $\omega_j$ (rad / token)")
    ax.legend(loc="lower left", fontsize=8.5, frameon=True, framealpha=0.9)


def _attention(ax: Any, rope: RopeConfig) -> None:
    marks = [x for x in (rope.original_max_position_embeddings, rope.max_position_embeddings) if x]
    top = 4 * max(marks, default=4096)
    lengths = np.unique(np.round(np.logspace(0, math.log10(top), 400)).astype(int))
    factors = np.array([attention_factor(rope, int(length)) for length in lengths])
    ax.semilogx(lengths, factors, lw=1.4, label="A (cos, sin × A)")
    multiplier = softmax_multiplier(rope)
    if multiplier != 1.0:
        ax.axhline(multiplier, color="0.3", ls="--", lw=1, label=f"softmax multiplier {multiplier:.4g}")
    for value, name in ((rope.original_max_position_embeddings, "$L_0$"), (rope.max_position_embeddings, "$L_{max}$")):
        if value:
            ax.axvline(value, color="0.6", lw=0.8)
            ax.text(value, 0.02, f" {name}", transform=ax.get_xaxis_transform(), fontsize=8.5, color="0.35")
    low, high = min(factors.min(), multiplier, 1.0), max(factors.max(), multiplier, 1.0)
    pad = max(0.05 * (high - low), 0.05)
    ax.set_ylim(low - pad, high + pad)
    ax.set_xlabel("sequence length L")
    ax.set_ylabel("attention factor")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=8.5, frameon=False)  # below: no line hidden


def _mrope_axes(ax: Any, rope: RopeConfig) -> None:
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    axes = np.array(pair_axes(rope.mrope_section, rope.mrope_scheme))[None, :]  # (1, m)
    ax.imshow(axes, aspect="auto", cmap=ListedColormap(AXIS_COLOURS), vmin=-0.5, vmax=2.5, interpolation="nearest",
              extent=(-0.5, axes.shape[1] - 0.5, 0, 1))
    ax.set_yticks([])
    ax.set_ylabel("reads", rotation=0, ha="right", va="center")
    ax.set_xlabel(f"pair j: M-RoPE sections {list(rope.mrope_section)}, {rope.mrope_scheme}")
    ax.legend(handles=[Patch(color=c, label=a) for c, a in zip(AXIS_COLOURS, "thw", strict=True)], ncols=3,
              loc="upper center", bbox_to_anchor=(0.5, -0.9), frameon=False, fontsize=8.5)


def model_figure(rope: RopeConfig, name: str, seq_len: int | None = None) -> Any:
    """The figure of ``rope`` (the caller closes it with pyplot's ``close``)."""
    plt = pyplot()
    mrope = rope.mrope_section is not None
    with plt.rc_context(STYLE):
        footnote = None
        if rope.not_modelled:
            footnote = wrap_to_width(f"not modelled by refpos (refpos rope CONFIG says why): "
                                     f"{', '.join(sorted(rope.not_modelled))}", MODEL_FIGSIZE[0], FOOTNOTE_SIZE)
        title = wrap_to_width(_title(name, rope), MODEL_FIGSIZE[0], TITLE_SIZE)
        height = (MODEL_FIGSIZE[1] + (0.9 if mrope else 0) + 0.3 * (footnote.count("\n") + 1 if footnote else 0)
                  + 0.25 * title.count("\n"))
        fig = plt.figure(figsize=(MODEL_FIGSIZE[0], height), layout="constrained")
        try:
            grid = fig.add_gridspec(2 if mrope else 1, 2, width_ratios=(2.3, 1),
                                    height_ratios=(6, 1) if mrope else (1,))
            _frequencies(fig.add_subplot(grid[0, 0]), rope, seq_len)
            _attention(fig.add_subplot(grid[0, 1]), rope)
            if mrope:
                _mrope_axes(fig.add_subplot(grid[1, 0]), rope)
            fig.suptitle(title, fontsize=TITLE_SIZE)
            if footnote:
                fig.supxlabel(footnote, fontsize=FOOTNOTE_SIZE, color="crimson")
            fig.canvas.draw()
        except BaseException:
            plt.close(fig)
            raise
    return fig


#: the footnote's size (points): refpos.tools.figures.MIN_FONT_SIZE, the smallest a figure carries
FOOTNOTE_SIZE = 8.5
#: the title's size (points)
TITLE_SIZE = 10.5
#: the share of the figure's width a line of the footnote may take (the rest: the figure's own padding)
TEXT_WIDTH = 0.94


def wrap_to_width(text: str, width_inches: float, fontsize: float) -> str:
    """``text`` broken after its commas into lines that fit :data:`TEXT_WIDTH` of a figure ``width_inches``
    wide at ``fontsize`` points (measured with matplotlib's own text layout), so no line runs past the edge."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    font = FontProperties(size=fontsize)

    def fits(line: str) -> bool:
        return TextPath((0, 0), line, prop=font).get_extents().width / 72 <= TEXT_WIDTH * width_inches

    lines: list[str] = []
    for part in re.split(r"(?<=, )", text):
        if lines and fits(lines[-1] + part.rstrip()):
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(line.rstrip() for line in lines)


def doc_model_config(name: str) -> Path:
    """The config of the documentation's model figure ``name`` (:data:`DOC_MODELS`)."""
    from refpos.installed import suite_root

    return suite_root() / "golden" / "configs" / DOC_MODELS[name]


def draw_model(config: str | Path, out: str | Path | None = None, *, layer_type: str | None = None,
               seq_len: int | None = None, dpi: int = 150, force: bool = False) -> Path:
    """Draw the RoPE of a transformers ``config.json`` (or its folder) into ``out`` (``.svg`` or ``.png``;
    an existing file is replaced only with ``force``: :func:`refpos.tools.figures.save_figure`).

    Raises
    ------
    ValueError, TypeError, OSError
        The config cannot be read or resolved (``layer_type`` is needed for per-layer configs), or
        ``out`` is not ``.svg``/``.png``.
    ImportError
        matplotlib is not installed.
    """
    import refpos

    rope = refpos.models.from_hf_config(config, layer_type=layer_type)
    name = model_name(config) + (f" ({layer_type})" if layer_type else "")
    fig = model_figure(rope, name, seq_len)
    try:
        return save_figure(fig, default_out(name) if out is None else out, dpi=dpi, force=force)
    finally:
        pyplot().close(fig)
