"""``refpos plot``: every plot draws an SVG (and a PNG on request); the committed figures in docs/figures
match the plot list; ``refpos plot --config`` draws a model's frequencies, bands, attention factor and
M-RoPE axes as the reference computes them."""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from refpos import RopeConfig
from refpos.backend import to_numpy
from refpos.cli import main
from refpos.models import from_hf_config
from refpos.rope.mrope import pair_axes
from refpos.rope.scaling import attention_factor, rope_frequencies
from refpos.tools import model_plots, plots

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "figures"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: every committed figure: the plots, and the documentation's model figures
COMMITTED = [*plots.plot_names(), *model_plots.DOC_MODELS]
needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="matplotlib not installed (extra 'plot')"
)

#: the figures docs/figures.md lists, by plot name
REQUIRED = [
    "sinusoid-heatmap",
    "rope-angles",
    "rope-decay",
    "alibi-bias",
    "t5-bias",
    "rope-scaling",
    "worked-example",
]


def test_required_plots_are_registered():
    assert set(REQUIRED) <= set(plots.plot_names())


def test_list_names_every_plot(capsys):
    assert main(["plot", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == plots.plot_names()


def _is_svg(data: bytes) -> bool:
    return data.startswith(b"<?xml") and b"<svg" in data[:2000] and data.rstrip().endswith(b"</svg>")


@needs_matplotlib
@pytest.mark.parametrize("name", plots.plot_names())
def test_plot_writes_svg(name: str, tmp_path: Path):
    out = plots.draw(name, tmp_path / f"{name}.svg")
    data = out.read_bytes()
    assert _is_svg(data)
    assert 5_000 < len(data) < 250_000, f"{name}: {len(data)} bytes"


@needs_matplotlib
def test_cli_draws_one_as_svg_or_png(tmp_path: Path, capsys):
    name = "worked-example"  # the quickest to draw
    for out, check in ((tmp_path / "fig.svg", _is_svg), (tmp_path / "fig.png", lambda b: b.startswith(PNG_SIGNATURE))):
        assert main(["plot", name, "--out", str(out)]) == 0
        assert check(out.read_bytes())
        assert str(out) in capsys.readouterr().out


@needs_matplotlib
def test_the_same_figure_gives_the_same_bytes(tmp_path: Path):
    name = "worked-example"
    first, second = plots.draw(name, tmp_path / "a.svg"), plots.draw(name, tmp_path / "b.svg")
    assert first.read_bytes() == second.read_bytes()


def test_bad_requests_name_the_parameter(tmp_path: Path, capsys):
    with pytest.raises(ValueError, match="name"):
        plots.draw("no-such-plot", tmp_path / "x.png")
    with pytest.raises(ValueError, match="out"):
        plots.draw(plots.plot_names()[0], tmp_path / "x.jpg")
    with pytest.raises(ValueError, match="dpi"):
        plots.draw(plots.plot_names()[0], tmp_path / "x.png", dpi=1)
    assert main(["plot"]) == 2  # neither NAME nor --all nor --config
    assert "NAME" in capsys.readouterr().err
    assert main(["plot", "rope-decay", "--config", str(LLAMA)]) == 2  # two at once
    assert "got NAME and --config" in capsys.readouterr().err
    assert main(["plot", "rope-decay", "--layer-type", "full_attention"]) == 2
    assert "go with --config" in capsys.readouterr().err


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_figure_exists_and_is_used(name: str):
    figure = FIGURES / f"{name}.svg"
    assert figure.exists(), f"redraw with: refpos plot --all --out-dir docs/figures --force ({figure} is missing)"
    assert figure.stat().st_size < 250_000
    pages = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    assert f"figures/{name}.svg" in pages, f"no page in docs/ shows figures/{name}.svg"


def test_no_figure_is_left_over():
    """Every file in docs/figures is a committed figure of the list (no PNG of an earlier drawing)."""
    assert sorted(p.name for p in FIGURES.iterdir()) == sorted(f"{name}.svg" for name in COMMITTED)


# ------------------------------------------------------------------------------- print quality
CONFIGS = ROOT / "golden" / "configs"
LLAMA = CONFIGS / "meta-llama--Llama-3.1-8B.json"
#: models whose figure (refpos plot --config) is checked like the documentation's: every rule, both M-RoPE forms
MODEL_ROPES = {
    "llama3": lambda: from_hf_config(LLAMA),
    "yarn-deepseek": lambda: from_hf_config(CONFIGS / "deepseek-ai--DeepSeek-V3.json"),
    "longrope": lambda: from_hf_config(CONFIGS / "microsoft--Phi-3.5-mini-instruct.json"),
    "mrope": lambda: from_hf_config(CONFIGS / "Qwen--Qwen2-VL-7B-Instruct.json"),
    "mrope-interleaved": lambda: from_hf_config(CONFIGS / "Qwen--Qwen3-VL-8B-Instruct.json"),
    "dynamic": lambda: RopeConfig(rope_type="dynamic", head_dim=128, factor=2.0, max_position_embeddings=4096),
    "proportional": lambda: RopeConfig(rope_type="proportional", head_dim=256, partial_rotary_factor=0.25,
                                       placement="proportional"),
    "linear": lambda: RopeConfig(rope_type="linear", head_dim=64, factor=4.0),
}
#: every figure the print-quality tests look at: the plots, and a model figure per kind of rule
FIGURE_IDS = [*plots.plot_names(), *(f"model:{kind}" for kind in MODEL_ROPES)]


#: figures drawn once per module and read by several tests (none changes a figure), closed at the end
_DRAWN: dict[str, object] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_drawn():
    """Close the cached figures at the end; meanwhile matplotlib may hold all of them open without warning (its
    warning past 20 open figures is an error under the suite's filterwarnings, raised inside any later figure)."""
    if importlib.util.find_spec("matplotlib") is not None:
        import matplotlib

        matplotlib.rcParams["figure.max_open_warning"] = len(FIGURE_IDS) + 20
    yield
    if _DRAWN:
        import matplotlib.pyplot as plt

        for fig in _DRAWN.values():
            plt.close(fig)
        _DRAWN.clear()


@contextlib.contextmanager
def drawn(name: str):
    """The figure of ``name`` (a plot, or ``model:KIND`` of :data:`MODEL_ROPES`), laid out; drawn once."""
    if name not in _DRAWN:
        if name.startswith("model:"):
            _DRAWN[name] = model_plots.model_figure(MODEL_ROPES[name.removeprefix("model:")](), name)
        else:
            _DRAWN[name] = plots.make_figure(name)
    yield _DRAWN[name]


def _panels(fig) -> list:
    """The axes that plot data (not colorbars)."""
    return [ax for ax in fig.axes if not hasattr(ax, "_colorbar")]


MATH = re.compile(r"\$[^$]*\$")
#: a config key written as it is (sliding_window): words of two or more letters joined by underscores
SNAKE_CASE = re.compile(r"[A-Za-z]{2,}(?:_[A-Za-z0-9]{2,})+")


@needs_matplotlib
@pytest.mark.parametrize("name", FIGURE_IDS)
def test_text_is_legible_and_has_no_raw_tex(name: str):
    """Every text is at least MIN_FONT_SIZE points, and TeX markup only inside $…$ (mathtext renders it)."""
    from matplotlib.text import Text

    with drawn(name) as fig:
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        assert texts
        small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < plots.MIN_FONT_SIZE]
        assert not small, f"{name}: text smaller than {plots.MIN_FONT_SIZE} pt: {small}"
        raw = [t.get_text() for t in texts if re.search(r"[_^\\]", SNAKE_CASE.sub("", MATH.sub("", t.get_text())))]
        assert not raw, f"{name}: TeX markup outside $…$ shows as typed: {raw}"


@needs_matplotlib
@pytest.mark.parametrize("name", FIGURE_IDS)
def test_no_legend_covers_a_curve(name: str):
    with drawn(name) as fig:
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
        for legend in legends:
            box = legend.get_window_extent()
            for ax in fig.axes:
                for line in ax.get_lines():
                    xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))  # (n, 2) px
                    inside = ((xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0)
                              & (xy[:, 1] <= box.y1))
                    assert not inside.any(), f"{name}: the legend covers {int(inside.sum())} points of " \
                                             f"{line.get_label()!r}"


@needs_matplotlib
@pytest.mark.parametrize("name", FIGURE_IDS)
def test_every_panel_has_a_y_label_and_shows_its_data(name: str):
    """A y label on every panel; every image spans at least a quarter of its colour scale (no blank panel)."""
    with drawn(name) as fig:
        for n, ax in enumerate(_panels(fig)):
            assert ax.get_ylabel().strip(), f"{name}: panel {n + 1} has no y label"
            for image in ax.get_images():
                values = np.ma.masked_invalid(np.ma.asarray(image.get_array(), dtype=float)).compressed()
                shown = np.asarray(image.norm(values), dtype=float)
                span = float(shown.max() - shown.min())
                assert span >= 0.25, f"{name}: panel {n + 1} uses {span:.3f} of its colour scale: it looks blank"


def test_default_resolution_is_print_quality():
    assert plots.DPI >= 150


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_figure_is_vector_with_print_quality_images(name: str):
    """Text is drawn as outlines (no <text>: the figure needs no font), and every embedded image (a
    heatmap) has at least 150 pixels per inch of the box it fills (SVG lengths are points, 72 an inch)."""
    svg = (FIGURES / f"{name}.svg").read_text(encoding="utf-8")
    assert "<text" not in svg, f"{name}: text as <text> depends on the reader's fonts"
    for data, width in re.findall(r'<image xlink:href="data:image/png;base64,([^"]+)"[^>]*?width="([\d.]+)"', svg):
        pixels = struct.unpack(">I", base64.b64decode(data)[16:20])[0]  # IHDR width
        assert pixels >= 150 * float(width) / 72 - 2, f"{name}: an image of {pixels} px in {width} pt"


def test_figure_page_shows_every_figure_with_its_caption():
    page = (ROOT / "docs" / "figures.md").read_text(encoding="utf-8")
    for name in plots.plot_names():
        caption = plots.CAPTIONS[name]
        assert len(caption.splitlines()) == 1 and caption.endswith("."), name
        pattern = re.compile(rf"!\[[^\]]*\]\(figures/{re.escape(name)}\.svg\)\n\n(.*)\n")
        found = pattern.search(page)
        assert found is not None, f"docs/figures.md does not show figures/{name}.svg"
        assert found.group(1) == f"*{caption}*", f"docs/figures.md: the line under {name} is not its caption"


# ------------------------------------------------------------------------------- refpos plot --config
#: the rules write ω = θ^(-2j/d) as 1/θ^(2j/d) (YaRN) or divide it by s: a correctly rounded power, then a
#: reciprocal or a division, each within half an ulp, against one power: a few ulps, never a blend
SAME = 4 * np.finfo(np.float64).eps


def band_problems(rope: RopeConfig, bands) -> list[str]:
    """What the rule does against what its bands say: pairs wholly inside the first band keep ω, wholly
    inside the last are ω/s, strictly inside the middle one lie strictly between (a blend)."""
    omega = to_numpy(rope_frequencies(rope)[0])
    plain = model_plots.unscaled(rope, omega.size)
    (_, keep_lo, keep_hi), (_, mid_lo, mid_hi), (_, div_lo, div_hi) = bands
    problems = []
    for j in range(omega.size):
        if keep_lo <= j < keep_hi and not np.isclose(omega[j], plain[j], rtol=SAME, atol=0):
            problems.append(f"pair {j} is in the kept band but ω' = {omega[j]!r} ≠ ω = {plain[j]!r}")
        elif div_lo < j <= div_hi and not np.isclose(omega[j], plain[j] / rope.factor, rtol=SAME, atol=0):
            problems.append(f"pair {j} is in the ω/s band but ω' = {omega[j]!r} ≠ ω/s = {plain[j] / rope.factor!r}")
        elif mid_lo < j < mid_hi and not plain[j] / rope.factor * (1 + SAME) < omega[j] < plain[j] * (1 - SAME):
            problems.append(f"pair {j} is in the blended band but ω' = {omega[j]!r} is not between ω/s and ω")
    return problems


BAND_ROPES = {
    "llama3 (Llama 3.1)": lambda: from_hf_config(LLAMA),
    "llama3 (l = 2, h = 8)": lambda: RopeConfig(rope_type="llama3", head_dim=128, theta=5e5, factor=16.0,
                                                original_max_position_embeddings=4096, low_freq_factor=2.0,
                                                high_freq_factor=8.0),
    "yarn (DeepSeek-V3)": lambda: from_hf_config(CONFIGS / "deepseek-ai--DeepSeek-V3.json"),
    "yarn (s = 4, untruncated)": lambda: RopeConfig(rope_type="yarn", head_dim=64, factor=4.0, truncate=False,
                                                    original_max_position_embeddings=2048),
}


@pytest.mark.parametrize("kind", BAND_ROPES)
def test_the_bands_are_where_the_rule_changes(kind: str):
    rope = BAND_ROPES[kind]()
    bands = model_plots.rule_bands(rope)
    assert len(bands) == 3 and bands[0][1] == 0 and bands[-1][2] == rope.n_pairs - 1
    assert [b[2] for b in bands[:-1]] == [b[1] for b in bands[1:]], "the bands must tile the pairs"
    assert not band_problems(rope, bands), band_problems(rope, bands)
    # the check can fail: the bands of a rule one pair off (a band-edge bug) are caught
    shifted = tuple((name, max(lo - 1.5, 0.0), hi - 1.5 if hi < rope.n_pairs - 1 else hi) for name, lo, hi in bands)
    assert band_problems(rope, shifted), f"{kind}: bands shifted by 1.5 pairs pass"


def test_rules_without_bands_have_none():
    for rope in (RopeConfig(head_dim=64), RopeConfig(rope_type="linear", head_dim=64, factor=2.0),
                 MODEL_ROPES["longrope"](), MODEL_ROPES["dynamic"]()):
        assert model_plots.rule_bands(rope) == ()


@needs_matplotlib
@pytest.mark.parametrize("kind", ["llama3", "longrope", "mrope-interleaved", "proportional", "yarn-deepseek"])
def test_the_model_figure_shows_what_the_reference_computes(kind: str):
    """The lines are refpos's ω (unscaled and scaled, at each length drawn) and A(L); the strip is pair_axes."""
    rope = MODEL_ROPES[kind]()
    with drawn(f"model:{kind}") as fig:
        freq, attn, *strip = _panels(fig)
        lines = {line.get_label(): line for line in freq.get_lines()}
        omega = to_numpy(rope_frequencies(rope)[0])
        unscaled = lines["unscaled $\\theta^{-2j/d}$"].get_ydata()
        assert np.array_equal(unscaled, model_plots.unscaled(rope, omega.size))
        if rope.rope_type != "proportional":  # proportional: unscaled over the full head, θ^(-2j/D)
            assert np.array_equal(unscaled, to_numpy(rope_frequencies(RopeConfig(theta=rope.theta,
                                                                               head_dim=rope.head_dim,
                                                                               rotary_dim=rope.rotary_dim))[0]))
        for length in model_plots.curve_lengths(rope, None):
            label = "this model $\\omega'_j$" + ("" if length is None else f" at L = {length:,}")
            expected = to_numpy(rope_frequencies(rope, seq_len=length)[0])
            line = lines[label]
            assert np.array_equal(line.get_ydata(), expected[expected > 0])
            assert np.array_equal(line.get_xdata(), np.flatnonzero(expected > 0))
        lengths, factors = attn.get_lines()[0].get_data()
        assert all(a == attention_factor(rope, int(n)) for n, a in zip(lengths, factors, strict=True))
        if rope.mrope_section is not None:
            image = strip[0].get_images()[0].get_array()
            assert image.tolist() == [list(pair_axes(rope.mrope_section, rope.mrope_scheme))]
        else:
            assert not strip


@needs_matplotlib
def test_plot_config_writes_the_model_figure(tmp_path: Path, capsys):
    out = tmp_path / "llama.svg"
    assert main(["plot", "--config", str(LLAMA), "--out", str(out)]) == 0
    assert _is_svg(out.read_bytes()) and str(out) in capsys.readouterr().out
    folder = tmp_path / "My-Model"  # a model folder: the figure is named after it
    folder.mkdir()
    (folder / "config.json").write_bytes(LLAMA.read_bytes())
    assert main(["plot", "--config", str(folder)]) == 0
    written = Path(capsys.readouterr().out.strip())
    assert written.name == "My-Model-rope.svg"
    written.unlink()


@needs_matplotlib
def test_plot_config_of_a_per_layer_model_needs_the_layer_type(tmp_path: Path, capsys):
    gemma = CONFIGS / "google--gemma-3-12b-it-text_config.json"
    assert main(["plot", "--config", str(gemma), "--out", str(tmp_path / "g.svg")]) == 2
    assert "give --layer-type full_attention or --layer-type sliding_attention" in capsys.readouterr().err
    assert main(["plot", "--config", str(gemma), "--layer-type", "sliding_attention",
                 "--out", str(tmp_path / "g.svg")]) == 0


@needs_matplotlib
def test_what_is_not_modelled_is_named_under_the_figure():
    rope = MODEL_ROPES["longrope"]()
    assert rope.not_modelled  # Phi-3.5-mini's sliding window
    with drawn("model:longrope") as fig:
        footer = fig.get_supxlabel()
    assert all(key in footer for key in rope.not_modelled), footer
