"""``refpos plot``: every plot draws a PNG; the committed figures in docs/figures match the plot list."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from refpos.cli import main
from refpos.tools import plots

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "figures"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
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


@needs_matplotlib
@pytest.mark.parametrize("name", plots.plot_names())
def test_plot_writes_png(name: str, tmp_path: Path):
    out = plots.draw(name, tmp_path / f"{name}.png")
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert 2_000 < len(data) < 250_000, f"{name}: {len(data)} bytes"


@needs_matplotlib
def test_cli_draws_one(tmp_path: Path, capsys):
    out = tmp_path / "fig.png"
    assert main(["plot", plots.plot_names()[0], "--out", str(out)]) == 0
    assert out.read_bytes().startswith(PNG_SIGNATURE)
    assert str(out) in capsys.readouterr().out


def test_bad_requests_name_the_parameter(tmp_path: Path, capsys):
    with pytest.raises(ValueError, match="name"):
        plots.draw("no-such-plot", tmp_path / "x.png")
    with pytest.raises(ValueError, match="out"):
        plots.draw(plots.plot_names()[0], tmp_path / "x.jpg")
    with pytest.raises(ValueError, match="dpi"):
        plots.draw(plots.plot_names()[0], tmp_path / "x.png", dpi=1)
    assert main(["plot"]) == 2  # neither NAME nor --all
    assert "NAME" in capsys.readouterr().err


@pytest.mark.parametrize("name", plots.plot_names())
def test_committed_figure_exists_and_is_used(name: str):
    figure = FIGURES / f"{name}.png"
    assert figure.exists(), f"redraw with: refpos plot --all --out-dir docs/figures ({figure} is missing)"
    assert figure.stat().st_size < 250_000
    pages = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    assert f"figures/{name}.png" in pages, f"no page in docs/ shows figures/{name}.png"


# ------------------------------------------------------------------------------- print quality
@contextlib.contextmanager
def drawn(name: str):
    """The figure of ``name``, laid out, closed afterwards."""
    import matplotlib.pyplot as plt

    fig = plots.make_figure(name)
    try:
        yield fig
    finally:
        plt.close(fig)


def _panels(fig) -> list:
    """The axes that plot data (not colorbars)."""
    return [ax for ax in fig.axes if not hasattr(ax, "_colorbar")]


MATH = re.compile(r"\$[^$]*\$")


@needs_matplotlib
@pytest.mark.parametrize("name", plots.plot_names())
def test_text_is_legible_and_has_no_raw_tex(name: str):
    """Every text is at least MIN_FONT_SIZE points, and TeX markup only inside $…$ (mathtext renders it)."""
    from matplotlib.text import Text

    with drawn(name) as fig:
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        assert texts
        small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < plots.MIN_FONT_SIZE]
        assert not small, f"{name}: text smaller than {plots.MIN_FONT_SIZE} pt: {small}"
        raw = [t.get_text() for t in texts if re.search(r"[_^\\]", MATH.sub("", t.get_text()))]
        assert not raw, f"{name}: TeX markup outside $…$ shows as typed: {raw}"


@needs_matplotlib
@pytest.mark.parametrize("name", plots.plot_names())
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
@pytest.mark.parametrize("name", plots.plot_names())
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


@pytest.mark.parametrize("name", plots.plot_names())
def test_committed_figure_is_drawn_at_print_resolution(name: str):
    """The PNG's width in pixels is its figure width in inches times at least 150 dpi."""
    data = (FIGURES / f"{name}.png").read_bytes()
    width = struct.unpack(">I", data[16:20])[0]  # IHDR: width, height after the 8-byte signature + chunk head
    inches = plots._SIZES.get(name, plots.FIGSIZE)[0]
    assert width >= 150 * inches - 2, f"{name}: {width} px for {inches} in: redraw with refpos plot --all"


def test_figure_page_shows_every_figure_with_its_caption():
    page = (ROOT / "docs" / "figures.md").read_text(encoding="utf-8")
    for name in plots.plot_names():
        caption = plots.CAPTIONS[name]
        assert len(caption.splitlines()) == 1 and caption.endswith("."), name
        pattern = re.compile(rf"!\[[^\]]*\]\(figures/{re.escape(name)}\.png\)\n\n(.*)\n")
        found = pattern.search(page)
        assert found is not None, f"docs/figures.md does not show figures/{name}.png"
        assert found.group(1) == f"*{caption}*", f"docs/figures.md: the line under {name} is not its caption"
