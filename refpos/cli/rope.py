"""``refpos rope CONFIG``: what a transformers config.json resolves to, field by field.

Prints every RoPE parameter with its provenance (config / default / derived), the keys the resolver did
not use, its notes, the attention factor, the DeepSeek softmax multiplier and the inverse frequencies.
A per-layer-type config prints every layer type unless ``--layer-type`` picks one. ``--json`` prints
the same as one JSON object (per layer type: an object keyed by layer type).

Examples
--------
.. code-block:: console

    $ refpos rope path/to/config.json --seq-len 8192
    $ refpos rope path/to/model_dir --layer-type full_attention --json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from refpos.backend import to_numpy
from refpos.rope.config import RopeConfig
from refpos.rope.hf import from_hf_config, hf_layer_types
from refpos.rope.scaling import rope_frequencies, softmax_multiplier


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos rope``."""
    parser.add_argument("config", help="path to a config.json, or a model directory holding one")
    parser.add_argument("--layer-type", default=None, help="layer type of a per-layer config (e.g. full_attention)")
    parser.add_argument("--strict", action="store_true", help="fail on unused keys of the rope dict")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="current sequence length L (dynamic NTK, LongRoPE); default: unknown")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def describe(rope: RopeConfig, seq_len: int | None = None) -> dict[str, Any]:
    """The resolved configuration as a JSON-ready dict."""
    inv_freq, factor = rope_frequencies(rope, seq_len=seq_len)
    return {
        "params": rope.to_params(),
        "provenance": dict(rope.provenance),
        "unused_keys": list(rope.unused_keys),
        "notes": list(rope.notes),
        "seq_len": seq_len,
        "attention_factor": factor,
        "softmax_multiplier": softmax_multiplier(rope),
        "inv_freq": [float(w) for w in to_numpy(inv_freq)],
    }


def _text(summary: dict[str, Any], title: str) -> str:
    lines = [title]
    for key, value in summary["params"].items():
        field = "theta" if key == "rope_theta" else key
        shown = f"[{len(value)} values: {value[0]!r} … {value[-1]!r}]" if isinstance(value, list) else repr(value)
        lines.append(f"  {key:<34} {shown:<28} ({summary['provenance'].get(field, 'default')})")
    inv = summary["inv_freq"]
    lines.append(f"  attention factor A = {summary['attention_factor']!r}"
                 + (f" at seq_len {summary['seq_len']}" if summary["seq_len"] is not None else ""))
    if summary["softmax_multiplier"] != 1.0:
        lines.append(f"  DeepSeek softmax multiplier = {summary['softmax_multiplier']!r}")
    lines.append(f"  inv_freq: {len(inv)} pairs, ω_0 = {inv[0]!r}, ω_last = {inv[-1]!r}")
    lines.append(f"  unused keys: {', '.join(summary['unused_keys']) or '(none)'}")
    lines.extend(f"  note: {note}" for note in summary["notes"])
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Resolve and print; bad input raises ValueError / TypeError (exit status 2 in ``refpos.cli``)."""
    layers = [args.layer_type] if args.layer_type else list(hf_layer_types(args.config)) or [None]
    summaries = {layer: describe(from_hf_config(args.config, strict=args.strict, layer_type=layer), args.seq_len)
                 for layer in layers}
    if args.json:
        print(json.dumps(summaries[None] if layers == [None] else summaries, indent=1))
        return 0
    for layer, summary in summaries.items():
        print(_text(summary, f"{args.config}" + (f" [{layer}]" if layer else "")))
    return 0
