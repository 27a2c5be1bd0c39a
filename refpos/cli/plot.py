"""``refpos plot``: list the documentation's figures, or draw one or all of them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from refpos.cli.options import DPI as DPI_RANGE
from refpos.cli.options import help_with
from refpos.tools.plots import (
    DPI,
    PLOTS,
    draw,
)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos plot``."""
    parser.add_argument("name", nargs="?", help="the plot to draw (see --list)")
    parser.add_argument("--list", action="store_true", help="list the plots and exit")
    parser.add_argument("--out", help="output PNG file (default NAME.png)")
    parser.add_argument("--all", action="store_true", help="draw every plot into --out-dir")
    parser.add_argument("--out-dir", default=".", help="directory for --all (default: .)")
    parser.add_argument("--dpi", type=DPI_RANGE, default=DPI, help=help_with(DPI_RANGE, f"resolution (default {DPI})"))


def run(args: argparse.Namespace) -> int:
    """``refpos plot``: list the plots or draw one (or all)."""
    if args.list:
        width = max(len(n) for n in PLOTS)
        for name, (_, description) in PLOTS.items():
            print(f"{name:<{width}}  {description}")
        return 0
    if args.all == (args.name is not None):
        raise ValueError("give one plot NAME, or --all (see refpos plot --list)")
    jobs = [(n, Path(args.out_dir) / f"{n}.png") for n in PLOTS] if args.all else [
        (args.name, Path(args.out or f"{args.name}.png"))]
    try:
        for name, path in jobs:
            print(draw(name, path, dpi=args.dpi))
    except ImportError as exc:
        print(f"refpos plot: error: {exc}", file=sys.stderr)
        return 2
    return 0

