"""``refpos plot``: every plot draws a PNG; the committed figures in docs/figures match the plot list."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
