"""The house style of refpos's figures, and how one is written to a file (SVG or PNG).

Used by :mod:`refpos.tools.plots` (the documentation's figures) and :mod:`refpos.tools.model_plots`
(``refpos plot --config``). matplotlib is imported only when a figure is drawn (the optional ``plot``
extra: ``pip install 'refpos[plot]'``).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from refpos.validation import check_int

#: a matplotlib Figure (matplotlib is imported only when a figure is drawn)
Figure = Any

#: default figure size (inches) and resolution: print quality (a 7.2-inch figure is 1080 px wide)
FIGSIZE = (7.2, 3.4)
DPI = 150
#: text sizes in points: at 150 dpi a 10 pt letter is about 21 px tall, legible at the page's width
STYLE = {
    "font.size": 10.0,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10.0,
    "xtick.labelsize": 9.0,
    "ytick.labelsize": 9.0,
    "legend.fontsize": 9.0,
}
#: the smallest text a figure may carry (points)
MIN_FONT_SIZE = 8.5


def pyplot() -> Any:
    """matplotlib's pyplot on the non-interactive Agg backend, or an ImportError that says what to install."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("refpos plot needs matplotlib: pip install 'refpos[plot]'") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


#: the formats a figure is written in, by the file's suffix: SVG (vector, the documentation's) or PNG
FORMATS = (".svg", ".png")


def save_figure(fig: Figure, out: str | Path, *, dpi: int = DPI, force: bool = False) -> Path:
    """Write ``fig`` to ``out`` as SVG or PNG (by its suffix); the same figure gives the same bytes.

    The figure is drawn in memory, then written by :func:`refpos.outputs.write_file`: never through a
    symlink, and over an existing file only with ``force``.

    Raises
    ------
    ValueError
        ``out`` does not end in ``.svg`` or ``.png``, ``dpi`` < 10, or ``out`` is refused (a symlink, not a
        regular file, an existing file without ``force``).
    """
    from refpos.outputs import write_file

    dpi = check_int("dpi", dpi, minimum=10)
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"out must be a .svg or .png file, got {str(out)!r}")
    plt = pyplot()
    drawn = io.BytesIO()
    # no date or software version in the file, and SVG ids from a fixed salt: quiet diffs of docs/figures
    if out.suffix.lower() == ".svg":
        with plt.rc_context({"svg.hashsalt": "refpos", "svg.fonttype": "path"}):
            fig.savefig(drawn, format="svg", dpi=dpi, metadata={"Date": None, "Creator": None})
    else:
        fig.savefig(drawn, format="png", dpi=dpi, metadata={"Software": None})
    return write_file(out, drawn.getvalue(), force=force)


def heat_panels(fig: Figure, panels: list[tuple[Any, str]], *, xlabel: str, ylabel: str, cmap: str = "RdBu_r",
                symmetric: bool = True, label: str | None = None) -> None:
    """One heat map per ``(values, title)`` side by side, each with its colour bar; ``symmetric``: one scale
    ``[-m, m]`` for every panel, ``m`` the largest ``|value|`` (NaN left blank)."""
    import numpy as np

    limit = max(float(np.nanmax(np.abs(values))) for values, _ in panels) if symmetric else None
    for panel, (values, title) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), panel + 1)
        scale = {"vmin": -limit, "vmax": limit} if symmetric else {}
        image = ax.imshow(values, cmap=cmap, interpolation="nearest", **scale)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        fig.colorbar(image, ax=ax, fraction=0.046, **({"label": label} if label else {}))
