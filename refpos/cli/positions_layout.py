"""``refpos positions CONFIG --layout SPANS``: M-RoPE position ids of a token layout, by the config's rules.

``SPANS`` is written ``text:6,image:1x8x12,text:6`` (``video:TxHxW@S`` for a video, ``S`` seconds between two
temporal patches, ``+audio:N`` for its audio track; ``audio:N`` for audio tokens; :mod:`refpos.models.mm_layout`).
The family and the settings it reads (spatial merge, tokens per second, ...) are read from the config, each
printed with where it came from; ``--out FILE.npy`` writes the ``(3, T)`` ids (a new file, never through a
symlink: :func:`refpos.outputs.write_file`; ``--force`` replaces a file), ready for ``refpos check rope
--positions``.

Example
-------
.. code-block:: console

    $ refpos positions Qwen2.5-VL-7B-Instruct/config.json --layout text:3,image:1x8x12,text:2
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from refpos.models.hf_files import load_hf_config
from refpos.models.mm_layout import config_position_ids, parse_layout
from refpos.outputs import check_output


def add_options(parser: argparse.ArgumentParser) -> None:
    """``--layout`` and ``--out`` of ``refpos positions``."""
    parser.add_argument("--layout", default=None, metavar="SPANS",
                        help="M-RoPE: print the (3, T) position ids of a token layout, e.g. "
                             "text:6,image:1x8x12,text:6 (video:TxHxW@S[+audio:N], audio:N), by the config's "
                             "family rules")
    parser.add_argument("--out", type=Path, default=None, help="with --layout: write the ids to this new .npy file")
    parser.add_argument("--force", action="store_true", help="with --out: replace an existing file")


def _row(values: np.ndarray) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def text(ids: np.ndarray, rules: dict[str, tuple[Any, str]], layout: str, title: str) -> str:
    """The report: the rules with where each came from, the spans, and the ids row by row."""
    lines = [f"{title}: M-RoPE position ids of {layout} ({ids.shape[1]} tokens)"]
    lines += [f"  {key}: {value!r} ({where})" for key, (value, where) in rules.items()]
    for axis, row in zip("thw", ids, strict=True):
        lines += textwrap.wrap(_row(row), width=100, initial_indent=f"  {axis}: ", subsequent_indent="      ")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print (and with ``--out`` write) the ids; bad input is a ``ValueError`` (exit 2 in :mod:`refpos.cli`)."""
    from refpos.golden.npy import write_npy

    if args.out is not None and args.out.suffix != ".npy":
        raise ValueError(f"--out must name a .npy file, got {str(args.out)!r}")
    if args.out is not None:
        check_output(args.out, force=args.force)  # refused before the work; write_npy looks again
    spans = parse_layout(args.layout)
    try:
        ids, rules = config_position_ids(load_hf_config(args.config), spans)
    except ValueError as exc:  # a layout the config's rules refuse (too many tokens, a grid the merge does not divide)
        raise ValueError(f"--layout {args.layout}: {exc}" if str(exc).startswith("spans") else str(exc)) from None
    if args.json:
        print(json.dumps({"layout": args.layout, "rules": {k: {"value": v, "from": w} for k, (v, w) in rules.items()},
                          "position_ids": ids.tolist()}))
    else:
        print(text(ids, rules, args.layout, str(args.config)))
    if args.out is not None:
        write_npy(args.out, ids, force=args.force)
        print(f"  written: {args.out} (int64, shape {tuple(ids.shape)})")
    return 0
