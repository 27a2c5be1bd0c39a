"""Figures drawn from the reference code: ``refpos plot --list``, ``refpos plot NAME --out FILE.svg``.

Every figure in ``docs/figures/`` is drawn by one function here from refpos itself, so the pictures show exactly
what the code computes. matplotlib is imported only when a figure is drawn (the optional ``plot`` extra:
``pip install 'refpos[plot]'``). The arrays are computed in float64 NumPy (``xp=numpy``), whatever the backend.

``refpos plot --all --out-dir docs/figures --force`` redraws every committed figure (SVG: vector, sharp in print
and at any zoom); ``--out FILE.png`` draws a PNG instead. The figure of a user's own model is
:mod:`refpos.tools.model_plots` (``refpos plot --config CONFIG``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.tools.figures import DPI, FIGSIZE, FORMATS, MIN_FONT_SIZE, STYLE, pyplot, save_figure
from refpos.validation import check_choice, check_int

__all__ = ["CAPTIONS", "DPI", "FIGSIZE", "MIN_FONT_SIZE", "PLOTS", "STYLE", "draw", "make_figure", "plot_names"]

Figure = Any

#: plot name -> (drawing function, one-line description)
PLOTS: dict[str, tuple[Callable[[Figure], None], str]] = {}
#: plot name -> figure size (inches) where it differs from FIGSIZE
_SIZES: dict[str, tuple[float, float]] = {}
#: plot name -> one line: what to see in it (the caption under the figure in docs/figures.md)
CAPTIONS: dict[str, str] = {}

def _register(
    name: str, description: str, caption: str, figsize: tuple[float, float] | None = None
) -> Callable[[Callable[[Figure], None]], Callable[[Figure], None]]:
    def deco(fn: Callable[[Figure], None]) -> Callable[[Figure], None]:
        PLOTS[name] = (fn, description)
        CAPTIONS[name] = caption
        if figsize is not None:
            _SIZES[name] = figsize
        return fn

    return deco


def _annotate(ax: Any, values: np.ndarray, vmin: float, vmax: float, fmt: str = "{:.2f}") -> None:
    """Write each value of a small matrix into its cell (viridis: white text on the dark end)."""
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            dark = (values[i, j] - vmin) < 0.6 * (vmax - vmin)
            ax.text(j, i, fmt.format(values[i, j]), ha="center", va="center", fontsize=10,
                    color="white" if dark else "black")


# ----------------------------------------------------------------------------------------------------
# sinusoidal
# ----------------------------------------------------------------------------------------------------
@_register("sinusoid-heatmap", "the sinusoidal table (d = 128) and the period of each of its 64 hands",
           "Fast hands (left columns) change every token, slow ones barely move in 128 positions; periods run "
           "from 6.28 to 54,410 tokens.")
def plot_sinusoid_heatmap(fig: Figure) -> None:
    from refpos.encodings.sinusoidal import sinusoidal, sinusoidal_frequencies

    dim, n_positions = 128, 128
    table = to_numpy(sinusoidal(np.arange(n_positions), dim, xp=np))  # (T, d)
    ax = fig.add_subplot(1, 2, 1)
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
    ax.set_xlabel("channel (interleaved sin, cos pairs)")
    ax.set_ylabel("position p")
    ax.set_title(r"$P[p, :]$, $d = 128$")
    fig.colorbar(image, ax=ax, fraction=0.05)

    periods = 2.0 * math.pi / to_numpy(sinusoidal_frequencies(dim, xp=np))  # (d/2,)
    ax = fig.add_subplot(1, 2, 2)
    ax.semilogy(np.arange(dim // 2), periods, ".-", markersize=3)
    ax.axhline(n_positions, color="grey", lw=0.8, ls="--")
    ax.text(3, periods[0], f"fastest: {periods[0]:.2f} tokens", fontsize=9, va="center")
    ax.text(dim // 2 - 3, periods[-1], f"slowest: {periods[-1]:,.0f} tokens", fontsize=9, va="center",
            ha="right")
    ax.text(dim // 2 - 1, n_positions * 0.7, f"{n_positions} positions (left)", fontsize=9, color="grey",
            ha="right", va="top")
    ax.set_xlabel("hand k (pair of channels)")
    ax.set_ylabel(r"period $2\pi/\omega_k$ (tokens)")
    ax.set_title("64 clock hands: one turn takes")


# ----------------------------------------------------------------------------------------------------
# RoPE
# ----------------------------------------------------------------------------------------------------
def _llama2_inv_freq() -> np.ndarray:
    """ω of Llama-2-7B (θ = 1e4, d = 128), the running example of the RoPE figures."""
    from refpos.rope.config import RopeConfig
    from refpos.rope.scaling import rope_frequencies

    return to_numpy(rope_frequencies(RopeConfig(theta=10000.0, head_dim=128), xp=np)[0])


@_register("rope-angles", "RoPE angle of each pair against position (Llama-2, θ = 1e4), training range 4096 marked",
           "Past the shaded training range the slow pairs reach angles never seen in training; pairs 46-63 never "
           "turn once in 4096 tokens.", figsize=(7.6, 3.9))
def plot_rope_angles(fig: Figure) -> None:
    train = 4096
    omega = _llama2_inv_freq()  # (64,)
    positions = np.arange(0, 4 * train + 1)  # (T,)
    ax = fig.add_subplot(1, 2, 1)
    ax.axvspan(0, train, color="0.9")
    ax.text(train * 0.5, 1.08, "training range", fontsize=9, ha="center")
    for j in (40, 46, 52, 63):
        wavelength = 2.0 * math.pi / omega[j]
        ax.plot(positions, np.cos(positions * omega[j]), lw=1, label=f"j = {j} (λ = {wavelength:,.0f})")
    ax.set_ylim(-1.1, 1.2)
    ax.set_xlabel("position p")
    ax.set_ylabel(r"$\cos(p\,\omega_j)$")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False)  # below: no curve hidden
    ax.set_title("slow pairs: angles beyond training are new")

    ax = fig.add_subplot(1, 2, 2)
    reached = train * omega  # largest angle seen in training, per pair
    ax.semilogy(np.arange(omega.size), reached, ".-", markersize=3)
    ax.axhline(2.0 * math.pi, color="grey", lw=0.8, ls="--")
    critical = int(np.argmax(reached < 2.0 * math.pi))
    ax.axvline(critical - 0.5, color="crimson", lw=0.8, ls="--")
    ax.text(1, 2.0 * math.pi * 1.4, r"one full turn ($2\pi$)", fontsize=9, color="grey")
    ax.text(critical + 1, reached[0] * 0.3, f"pairs ≥ {critical}:\nnever a full turn\nin training",
            fontsize=9, color="crimson", va="top")
    ax.set_xlabel("pair j")
    ax.set_ylabel(r"angle $4096\,\omega_j$ (rad)")
    ax.set_title("how far each hand turned in training")


@_register("rope-decay", "RoPE's long-range decay: the relative upper bound (1/m)·Σ_j |S_j| against distance",
           "The bound falls from 32.5 at distance 0 (every pair aligned) to about 10 by 100 tokens, then ripples "
           "between about 2 and 10 out to 100,000: a decay, but not a monotone one.")
def plot_rope_decay(fig: Figure) -> None:
    omega = _llama2_inv_freq()  # (m,)
    m = omega.size

    def bound(distance: np.ndarray) -> np.ndarray:
        phases = np.exp(1j * distance[:, None] * omega[None, :])  # (R, m)
        partial = np.cumsum(phases, axis=1)  # S_1 … S_m: S_j = Σ_{k<j} e^{i r ω_k}
        return np.abs(partial).sum(axis=1) / m  # (R,)

    near = np.arange(0, 257)
    ax = fig.add_subplot(1, 2, 1)
    ax.plot(near, bound(near.astype(np.float64)), lw=1)
    ax.set_xlabel("relative distance r")
    ax.set_ylabel(r"$\frac{1}{m}\sum_j |S_j|$")
    ax.set_title(r"$\theta = 10^4$, $d = 128$, $r \leq 256$")
    far = np.unique(np.round(np.logspace(0, 5, 600)))
    ax = fig.add_subplot(1, 2, 2)
    ax.semilogx(far, bound(far), lw=1)
    ax.set_xlabel("relative distance r (log)")
    ax.set_ylabel(r"$\frac{1}{m}\sum_j |S_j|$")
    ax.set_title("out to 100,000 tokens")


#: Phi-3.5-mini-instruct's LongRoPE long factors (config.json, rope_scaling.long_factor; d = 96)
_PHI35_LONG_FACTOR = (
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
    1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863,
    4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137,
    17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156,
    50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457,
    62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457,
    63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
    64.51000213623047, 64.52999877929688, 64.83999633789062,
)


@_register("rope-scaling", "each RoPE scaling rule's inv_freq / default against wavelength (log), and YaRN's ramp",
           "Linear slows every pair by s = 8; the others keep the fast pairs (left) and slow the slow ones (right), "
           "each switching at its own wavelength, some smoothly; LongRoPE's factors reach 65.", figsize=(8.0, 4.8))
def plot_rope_scaling(fig: Figure) -> None:
    from refpos.rope.config import RopeConfig
    from refpos.rope.scaling import rope_frequencies, yarn_correction_range, yarn_ramp

    def ratio(rope: RopeConfig, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        plain = to_numpy(rope_frequencies(RopeConfig(theta=rope.theta, head_dim=rope.head_dim), xp=np)[0])
        scaled = to_numpy(rope_frequencies(rope, seq_len=seq_len, xp=np)[0])
        return 2.0 * math.pi / plain, scaled / plain  # wavelength λ_j, ω'_j / ω_j

    s, train, d = 8.0, 4096, 128
    yarn = RopeConfig(rope_type="yarn", head_dim=d, factor=s, original_max_position_embeddings=train)
    rules = [
        ("linear (PI)", RopeConfig(rope_type="linear", head_dim=d, factor=s), None, "-"),
        ("NTK-aware", RopeConfig(rope_type="ntk", head_dim=d, factor=s), None, "-"),
        ("YaRN", yarn, None, "-"),
        ("llama3 (lf 1, hf 4)", RopeConfig(rope_type="llama3", head_dim=d, factor=s,
                                           original_max_position_embeddings=train, low_freq_factor=1.0,
                                           high_freq_factor=4.0), None, "-"),
    ]
    ax = fig.add_subplot(1, 2, 1)
    for label, rope, seq_len, style in rules:
        wavelength, r = ratio(rope, seq_len)
        ax.loglog(wavelength, r, style, lw=1.2, label=label)
    dynamic = RopeConfig(rope_type="dynamic", head_dim=d, factor=2.0, max_position_embeddings=train)
    for n, length in enumerate((2 * train, 4 * train)):
        wavelength, r = ratio(dynamic, length)
        times = f"$L = {length // train}L_0$"
        label = f"dynamic NTK (s = 2), {times}" if n == 0 else f"… {times}"
        ax.loglog(wavelength, r, ":", color="0.35", lw=1.2, label=label)
    phi = RopeConfig(rope_type="longrope", head_dim=96, original_max_position_embeddings=train,
                     max_position_embeddings=131072, short_factor=(1.0,) * 48, long_factor=_PHI35_LONG_FACTOR)
    wavelength, r = ratio(phi, train + 1)
    ax.loglog(wavelength, r, "--", lw=1.2, label="LongRoPE (Phi-3.5, long)")
    ax.axvline(train, color="black", lw=0.8)
    ax.text(train * 1.1, 1.15, r"$L_0 = 4096$", fontsize=9)
    ax.set_ylim(5e-3, 2.0)
    ax.set_xlabel(r"wavelength $2\pi/\omega_j$ of the default pair (tokens)")
    ax.set_ylabel(r"$\omega'_j / \omega_j$")
    ax.set_title(r"$\theta = 10^4$, $d = 128$, $s = 8$ (fast pairs left)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, frameon=False)

    ax = fig.add_subplot(1, 2, 2)
    ramp = to_numpy(yarn_ramp(yarn, xp=np))  # (m,): 0 keep ω, 1 interpolate ω/s
    lo, hi = yarn_correction_range(yarn)
    ax.plot(np.arange(ramp.size), ramp, ".-", markersize=3)
    ax.axvspan(lo, hi, color="0.9")
    ax.text(2, 0.85, f"j ≤ {lo}: ≥ 32 turns in $L_0$\nkept (extrapolate)", fontsize=9)
    ax.text(hi + 1, 0.15, f"j ≥ {hi}:\n< 1 turn\ndivided by s", fontsize=9)
    ax.set_xlabel("pair j")
    ax.set_ylabel(r"ramp $\gamma_j$ (share of $\omega_j/s$)")
    ax.set_title(r"YaRN's ramp ($\beta_{fast} = 32$, $\beta_{slow} = 1$)")


# ----------------------------------------------------------------------------------------------------
# biases: ALiBi and T5
# ----------------------------------------------------------------------------------------------------
@_register("alibi-bias", "ALiBi bias matrices (causal, 8 heads, 16 tokens) for heads 1, 3, 5 and 8",
           "With equal content scores a query's weights are softmax(−m·(i − j)): head 1 looks at the last few "
           "tokens, head 8 spreads evenly over all of them.", figsize=(8.4, 2.6))
def plot_alibi_bias(fig: Figure) -> None:
    from matplotlib.colors import LogNorm

    from refpos.core.softmax import softmax
    from refpos.encodings.alibi import alibi_bias, alibi_slopes

    n_heads, t = 8, 16
    bias = to_numpy(alibi_bias(n_heads, t, t, xp=np))  # (H, T, T)
    slopes = to_numpy(alibi_slopes(n_heads, xp=np))
    allowed = np.tril(np.ones((t, t), dtype=bool))  # (T, T): causal, True = may attend
    # the bias alone through the softmax (every content score equal): each head's reach on one scale
    weights = to_numpy(softmax(bias, mask=allowed))  # (H, T, T)
    norm = LogNorm(vmin=1e-3, vmax=1.0)
    for n, head in enumerate((0, 2, 4, 7)):
        ax = fig.add_subplot(1, 4, n + 1)
        shown = np.where(allowed, np.maximum(weights[head], norm.vmin), np.nan)  # masked keys left blank
        image = ax.imshow(shown, cmap="viridis", norm=norm, interpolation="nearest")
        ax.set_title(f"head {head + 1}: m = 1/{round(1 / slopes[head])}")
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    fig.colorbar(image, ax=fig.axes, fraction=0.03, shrink=0.8, label=r"weight $\propto e^{-m(i-j)}$")


@_register("t5-bias", "T5 relative buckets (32 buckets, max_distance 128), bidirectional and causal",
           "Near distances get a bucket each (below 8 in the encoder, 16 in the decoder), farther ones share "
           "logarithmic buckets up to 128 and one beyond; the decoder puts every future key in bucket 0.",
           figsize=(8.4, 3.3))
def plot_t5_bias(fig: Figure) -> None:
    from refpos.encodings.t5 import t5_bucket

    t = 160
    positions = np.arange(t)
    rel = positions[None, :] - positions[:, None]  # (T, T), key minus query
    for n, bidirectional in enumerate((True, False)):
        buckets = to_numpy(t5_bucket(rel, bidirectional=bidirectional))
        ax = fig.add_subplot(1, 3, n + 1)
        image = ax.imshow(buckets, cmap="viridis", vmin=0, vmax=31, interpolation="nearest")
        ax.set_title("encoder (bidirectional)" if bidirectional else "decoder (causal)")
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    fig.colorbar(image, ax=fig.axes[:2], fraction=0.03, label="bucket (bias = table[bucket, h])")
    ax = fig.add_subplot(1, 3, 3)
    rel_line = np.arange(-150, 151)
    ax.step(rel_line, to_numpy(t5_bucket(rel_line, bidirectional=True)), where="mid", label="bidirectional")
    ax.step(rel_line, to_numpy(t5_bucket(rel_line, bidirectional=False)), where="mid", label="causal")
    ax.axvline(0, color="grey", lw=0.6)
    ax.set_xlabel("rel = j − i")
    ax.set_ylabel("bucket")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)  # below: no step hidden
    ax.set_title("bucket of each distance")


# ----------------------------------------------------------------------------------------------------
# the worked example (我 愛 你)
# ----------------------------------------------------------------------------------------------------
@_register("worked-example", "the worked example 我 愛 你: attention weights without and with the distance bias",
           "Without the bias 我 (I) and 愛 (love) spread their attention evenly; with it every word gives most "
           "weight to itself and less to farther words.")
def plot_worked_example(fig: Figure) -> None:
    from refpos.pipeline.worked_example import worked_example

    labels = ["I (wo)", "love (ai)", "you (ni)"]
    panels = [
        ("without bias: softmax(S/2)", worked_example(with_bias=False, xp=np)),
        ("with bias: softmax((S + B)/2)", worked_example(with_bias=True, xp=np)),
    ]
    for n, (title, trace) in enumerate(panels):
        ax = fig.add_subplot(1, 2, n + 1)
        weights = to_numpy(trace["A"])[0]  # (T, T), the single head
        ax.imshow(weights, vmin=0.0, vmax=1.0, cmap="viridis")
        _annotate(ax, weights, 0.0, 1.0)
        ax.set_xticks(range(3), labels)
        ax.set_yticks(range(3), labels)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        ax.set_title(title)


# ----------------------------------------------------------------------------------------------------
# drawing and the command
# ----------------------------------------------------------------------------------------------------
def plot_names() -> list[str]:
    """Names of every plot, in the order of ``refpos plot --list``."""
    return list(PLOTS)


def make_figure(name: str) -> Figure:
    """The figure of plot ``name``, drawn in the house style (the caller closes it with pyplot's ``close``).

    Raises
    ------
    ValueError
        ``name`` is not a plot.
    ImportError
        matplotlib is not installed.
    """
    check_choice("name", name, plot_names())
    plt = pyplot()
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=_SIZES.get(name, FIGSIZE), layout="constrained")
        try:
            PLOTS[name][0](fig)
            fig.canvas.draw()  # lay it out while the style holds
        except BaseException:
            plt.close(fig)
            raise
    return fig


def draw(name: str, out: str | Path, *, dpi: int = DPI, force: bool = False) -> Path:
    """Draw the plot ``name`` into ``out`` (``.svg`` or ``.png``) and return its path (an existing file is
    replaced only with ``force``: :func:`refpos.tools.figures.save_figure`).

    Raises
    ------
    ValueError
        ``name`` is not a plot, ``out`` does not end in ``.svg`` or ``.png``, ``dpi`` < 10, or ``out`` is
        refused (a symlink, an existing file without ``force``).
    ImportError
        matplotlib is not installed.
    """
    check_choice("name", name, plot_names())
    check_int("dpi", dpi, minimum=10)
    if Path(out).suffix.lower() not in FORMATS:
        raise ValueError(f"out must be a .svg or .png file, got {str(out)!r}")
    fig = make_figure(name)
    try:
        return save_figure(fig, out, dpi=dpi, force=force)
    finally:
        pyplot().close(fig)

# figures drawn by a module of their own (a plot function and its (name, description, caption, size)), after the above
from refpos.tools import (  # noqa: E402
    plots_axis_tables,
    plots_bias_table,
    plots_conv_position,
    plots_deberta,
    plots_decomposed,
    plots_fit,
    plots_fourier,
    plots_grid,
    plots_layout,
    plots_learned,
    plots_shaw_key,
    plots_sincos2d,
    plots_sinusoid1d,
    plots_tiled_grid,
    plots_vision_rope,
)

_register(*plots_deberta.PLOT)(plots_deberta.plot_deberta_buckets)
_register(*plots_fit.FIT_PLOT)(plots_fit.plot_fit_example)
_register(*plots_bias_table.BIAS_TABLE_PLOT)(plots_bias_table.plot_bias_table)
_register(*plots_conv_position.CONV_POSITION_PLOT)(plots_conv_position.plot_conv_position)
_register(*plots_grid.GRID_PLOT)(plots_grid.plot_grid_resample)
_register(*plots_decomposed.DECOMPOSED_PLOT)(plots_decomposed.plot_decomposed_index)
_register(*plots_sincos2d.SINCOS2D_PLOT)(plots_sincos2d.plot_sincos2d)
_register(*plots_fourier.FOURIER_PLOT)(plots_fourier.plot_fourier_sam)
_register(*plots_sinusoid1d.SINUSOID1D_PLOT)(plots_sinusoid1d.plot_sinusoid1d)
_register(*plots_vision_rope.VISION_ROPE_PLOT)(plots_vision_rope.plot_vision_rope)
_register(*plots_axis_tables.AXIS_TABLES_PLOT)(plots_axis_tables.plot_axis_tables)
for _plot, _draw in (*plots_layout.DRAWN, *plots_shaw_key.DRAWN, *plots_tiled_grid.DRAWN, *plots_learned.DRAWN):
    _register(*_plot)(_draw)  # each module's (name, description, caption, size) and its drawing function
