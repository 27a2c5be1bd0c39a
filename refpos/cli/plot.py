"""``refpos plot``: list the documentation's figures, draw one or all of them, or draw a model's RoPE.

* ``refpos plot --list``; ``refpos plot NAME [--out FILE.svg]``; ``refpos plot --all --out-dir DIR``;
* ``refpos plot --config CONFIG [--layer-type T] [--seq-len L] [--out FILE.svg]``: the RoPE of a
  transformers ``config.json`` (:mod:`refpos.tools.model_plots`): its frequencies per pair against the
  unscaled ones with the rule's bands, the attention factor, and for M-RoPE the position each pair reads.

Figures are SVG by default; ``--out FILE.png`` writes a PNG at ``--dpi``. Every figure is written by
:func:`refpos.outputs.write_file`: never through a symlink, and over an existing file only with ``--force``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from refpos.cli.options import DPI as DPI_RANGE
from refpos.cli.options import SEQ_LEN, help_with
from refpos.outputs import check_output
from refpos.tools.plots import DPI, PLOTS, draw


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos plot``."""
    parser.add_argument("name", nargs="?", help="the plot to draw (see --list)")
    parser.add_argument("--list", action="store_true", help="list the plots and exit")
    parser.add_argument("--config", type=Path, default=None,
                        help="draw this model's RoPE: a config.json, or a model folder holding one")
    parser.add_argument("--layer-type", default=None, help="--config: layer type of a per-layer config")
    parser.add_argument("--seq-len", type=SEQ_LEN, default=None,
                        help=help_with(SEQ_LEN, "--config: draw the frequencies at this length L only (dynamic NTK, "
                                               "LongRoPE; default: the lengths where they change)"))
    parser.add_argument("--out", help="output file, .svg or .png (default NAME.svg; --config: MODEL-rope.svg)")
    parser.add_argument("--all", action="store_true",
                        help="draw every plot, and the documentation's model figures, into --out-dir")
    parser.add_argument("--out-dir", default=".", help="directory for --all (default: .)")
    parser.add_argument("--dpi", type=DPI_RANGE, default=DPI,
                        help=help_with(DPI_RANGE, f"resolution of a PNG (default {DPI})"))
    parser.add_argument("--force", action="store_true", help="replace existing files (never a symlink)")


def check_layer_type(config: Path, layer_type: str | None) -> None:
    """A ``ValueError`` naming ``--layer-type`` when the config's RoPE is per layer type and none (or another)
    is given, or when one is given for a config with one RoPE."""
    from refpos.models.hf import hf_layer_types

    types = hf_layer_types(config)
    choices = " or ".join(f"--layer-type {t}" for t in types)
    if types and layer_type is None:
        raise ValueError(f"--config {config}: the RoPE is per layer type ({', '.join(types)}): give {choices}")
    if types and layer_type not in types:
        raise ValueError(f"--layer-type {layer_type}: --config {config} has the layer types {', '.join(types)}: "
                         f"give {choices}")
    if not types and layer_type is not None:
        raise ValueError(f"--layer-type {layer_type}: --config {config} has one RoPE for every layer: drop "
                         "--layer-type")


def run(args: argparse.Namespace) -> int:
    """``refpos plot``: list the plots, draw one (or all), or draw a model's RoPE."""
    if args.list:
        width = max(len(n) for n in PLOTS)
        for name, (_, description) in PLOTS.items():
            print(f"{name:<{width}}  {description}")
        return 0
    chosen = [what for what, given in (("NAME", args.name is not None), ("--all", args.all),
                                        ("--config", args.config is not None)) if given]
    if len(chosen) != 1:
        raise ValueError("give one plot NAME, --all, or --config CONFIG (see refpos plot --list)"
                         + (f"; got {' and '.join(chosen)}" if chosen else ""))
    if args.config is None and (args.layer_type is not None or args.seq_len is not None):
        raise ValueError("--layer-type and --seq-len go with --config")
    if args.config is not None:
        from refpos.tools.model_plots import draw_model

        check_layer_type(args.config, args.layer_type)
        if args.out is not None:
            check_output(args.out, force=args.force)
        print(draw_model(args.config, args.out, layer_type=args.layer_type, seq_len=args.seq_len, dpi=args.dpi,
                         force=args.force))
        return 0
    jobs = [(n, Path(args.out_dir) / f"{n}.svg") for n in PLOTS] if args.all else [
        (args.name, Path(args.out or f"{args.name}.svg"))]
    models = {}
    if args.all:  # and the documentation's figures of real models
        from refpos.tools.model_plots import DOC_MODELS

        models = {name: Path(args.out_dir) / f"{name}.svg" for name in DOC_MODELS}
    for path in [*(path for _, path in jobs), *models.values()]:  # every refusal before the first figure
        check_output(path, force=args.force)
    for name, path in jobs:
        print(draw(name, path, dpi=args.dpi, force=args.force))
    if models:
        from refpos.tools.model_plots import doc_model_config, draw_model

        for name, path in models.items():
            print(draw_model(doc_model_config(name), path, dpi=args.dpi, force=args.force))
    return 0
