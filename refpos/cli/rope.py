"""``refpos rope CONFIG``: what a transformers config.json resolves to, field by field.

Prints the layer schedule (``layers 0-47: rope ×36, none ×12 (every 4th)``; which layers rotate, with
which RoPE, which have their query scaled by position), then every distinct RoPE's parameters with their
provenance (config / default / derived), the attention factor, the DeepSeek softmax multiplier and the
inverse frequencies; then whether the resolution is complete: each key that changes positions or
attention and is not modelled, with what it does, apart from the harmless unused keys. ``--strict``
makes anything not modelled an error. A ``model_type`` the family table does not know is refused, as ``refpos
positions`` refuses it, unless ``--assume`` / ``--assume-file`` state its family row. ``--layer-type`` prints one
layer type's RoPE only. ``--json``
prints the same as one JSON object (``layers``, ``kinds``, ``query_scale``, ``ropes``,
``not_modelled``, ``complete``, ``unused_keys``, ``notes``).

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
from refpos.cli.options import SEQ_LEN, help_with
from refpos.cli.positions import add_assume, assumptions, ranges, refuse_unknown
from refpos.models.families import Family, family_of
from refpos.models.hf import (
    check_rope_family,
    from_hf_config,
    hf_layer_types,
    language_config,
    load_hf_config,
    resolve_rope,
)
from refpos.models.hf_files import as_language_view
from refpos.models.layers import LayerSchedule, hf_layers, layer_schedule
from refpos.models.positions import model_positions
from refpos.models.schedule import LayerCountMissing
from refpos.rope.config import RopeConfig
from refpos.rope.scaling import rope_frequencies, softmax_multiplier


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos rope``."""
    parser.add_argument("config", help="path to a config.json, or a model directory holding one")
    parser.add_argument("--layer-type", default=None, help="layer type of a per-layer config (e.g. full_attention)")
    parser.add_argument("--strict", action="store_true",
                        help="fail when a key that changes positions or attention is not modelled")
    parser.add_argument("--seq-len", type=SEQ_LEN, default=None,
                        help=help_with(SEQ_LEN, "current sequence length L (dynamic NTK, LongRoPE); default: unknown"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_assume(parser)


def describe(rope: RopeConfig, seq_len: int | None = None) -> dict[str, Any]:
    """The resolved configuration as a JSON-ready dict."""
    inv_freq, factor = rope_frequencies(rope, seq_len=seq_len)
    return {
        "params": rope.to_params(),
        "provenance": dict(rope.provenance),
        "unused_keys": list(rope.unused_keys),
        "not_modelled": dict(rope.not_modelled),
        "complete": not rope.not_modelled,
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
        long = isinstance(value, list) and len(value) > 8  # a few values (mrope_section) are shown whole
        shown = f"[{len(value)} values: {value[0]!r} … {value[-1]!r}]" if long else repr(value)
        lines.append(f"  {key:<34} {shown:<28} ({summary['provenance'].get(field, 'default')})")
    inv = summary["inv_freq"]
    lines.append(f"  attention factor A = {summary['attention_factor']!r}"
                 + (f" at seq_len {summary['seq_len']}" if summary["seq_len"] is not None else ""))
    if summary["softmax_multiplier"] != 1.0:
        lines.append(f"  DeepSeek softmax multiplier = {summary['softmax_multiplier']!r}")
    lines.append(f"  inv_freq: {len(inv)} pairs, ω_0 = {inv[0]!r}, ω_last = {inv[-1]!r}")
    lines.extend(f"  note: {note}" for note in summary["notes"])
    return "\n".join(lines)


def unused_keys(ropes: list[RopeConfig], read: set[str] = frozenset()) -> list[str]:
    """The keys of a config that nothing read: in the unused keys of every one of its RoPEs (a key one layer type
    reads, such as Gemma 3's ``rope_local_base_freq``, is read) and not in ``read`` (the keys the layer schedule
    or the not-modelled report took)."""
    unused = set.intersection(*(set(rope.unused_keys) for rope in ropes)) if ropes else set()
    return sorted(unused - set(read))


def schedule_reads(config: Any) -> set[str]:
    """The keys the layer schedule reads (the layer count, the layer pattern), at the language config's path."""
    from refpos.models.layers import SCHEDULE_KEYS
    from refpos.models.schedule import LAYER_COUNT_KEYS

    _, prefix, _ = language_config(load_hf_config(config))
    return {prefix + key for key in (*LAYER_COUNT_KEYS, *SCHEDULE_KEYS)}


def _schedule_json(schedule: LayerSchedule, seq_len: int | None, config: Any) -> dict[str, Any]:
    ropes: dict[str, Any] = {}
    configs: list[RopeConfig] = []
    for layer in schedule:
        key = layer.layer_type or "all"
        if layer.rope is not None and key not in ropes:
            ropes[key] = describe(layer.rope, seq_len)
            configs.append(layer.rope)
    unused = unused_keys(configs, set(schedule.not_modelled) | schedule_reads(config))
    for summary in ropes.values():
        summary.pop("not_modelled", None)
        summary["unused_keys"] = unused
    return {
        "layers": schedule.summary(),
        "kinds": {f"{t or 'all'}/{kind}": indices for (t, kind), indices in schedule.kinds().items()},
        "query_scale": {str(layer.index): layer.scale.as_dict() for layer in schedule if layer.scale},
        "ropes": ropes,
        "not_modelled": dict(schedule.not_modelled),
        "complete": schedule.complete,
        "unused_keys": unused,
        "notes": list(schedule.notes),
    }


def _schedule_text(data: dict[str, Any], title: str) -> str:
    lines = [title, f"  {data['layers']}"]
    for kind, indices in data["kinds"].items():
        lines.append(f"  {kind}: layers {ranges(indices)}")
    scaled = data["query_scale"]
    if scaled:
        rule = dict(next(iter(scaled.values())))
        name = rule.pop("rule")
        shown = ", ".join(f"{k}={v!r}" for k, v in rule.items())
        lines.append(f"  query scale {name} ({shown}) on {len(scaled)} layers")
    for key, summary in data["ropes"].items():
        summary = {**summary, "notes": []}  # the notes are printed once, in the report below
        lines.append(_text(summary, f"  RoPE [{key}]").replace("\n", "\n  ").rstrip())
    lines += _report_lines(data["not_modelled"], data["unused_keys"], data["notes"])
    return "\n".join(line for line in lines if line.strip())


def _report_lines(not_modelled: dict[str, str], unused: list[str], notes: list[str]) -> list[str]:
    lines = ["  complete: yes (every position-relevant key is modelled)" if not not_modelled else
             f"  complete: NO, {len(not_modelled)} not modelled:"]
    lines += [f"    {key}: {why}" for key, why in sorted(not_modelled.items())]
    lines.append(f"  unused keys (harmless for positions): {', '.join(unused) or '(none)'}")
    lines += [f"  note: {note}" for note in notes]
    return lines


def stated_family(args: argparse.Namespace) -> Family | None:
    """The row ``--assume`` / ``--assume-file`` state for a model type the family table does not know (``None`` for
    a known one: its own row is read); a family the table does not know and no row stated is refused as
    ``refpos positions`` refuses it (exit 2, one line with its positional keys and what to pass)."""
    view = as_language_view(args.config)
    model_type = view.raw.get("model_type")
    if isinstance(model_type, str) and family_of(model_type) is not None:
        return None
    positions = model_positions(view.raw, assume=assumptions(args))
    refuse_unknown(positions, "refpos rope")
    return positions.family


def _stated_schedule(args: argparse.Namespace, family: Family) -> LayerSchedule:
    view = as_language_view(args.config)
    encoding = check_rope_family(family, view.raw, ("rope", "none", "no_attention"))
    schedule, problems = layer_schedule(view, family, rope_on=encoding == "rope")
    if args.strict and problems:
        raise ValueError(f"strict: not modelled or unused: {problems} (strict=False resolves and reports them)")
    return schedule


def _stated_rope(args: argparse.Namespace, family: Family | None, layer_type: str | None) -> RopeConfig:
    if family is None:
        return from_hf_config(args.config, strict=args.strict, layer_type=layer_type)
    rope, problems = resolve_rope(as_language_view(args.config), layer_type, per_layer=False, family=family)
    if args.strict and problems:
        raise ValueError(f"strict: not modelled or unused: {problems} (strict=False resolves and reports them)")
    return rope


def run(args: argparse.Namespace) -> int:
    """Resolve and print; bad input raises ValueError / TypeError (exit status 2 in ``refpos.cli``).

    Without ``--layer-type``: the layer schedule (:func:`refpos.models.hf_layers`) and each distinct RoPE; a config
    that does not give its layer count is resolved per layer type, without a schedule. A model type the family
    table does not know is refused unless ``--assume`` / ``--assume-file`` state its row (:func:`stated_family`).
    """
    family = stated_family(args)
    if args.layer_type is None:
        try:
            schedule = hf_layers(args.config, strict=args.strict) if family is None else _stated_schedule(args, family)
        except LayerCountMissing:
            pass
        else:
            data = _schedule_json(schedule, args.seq_len, args.config)
            print(json.dumps(data, indent=1) if args.json else _schedule_text(data, str(args.config)))
            return 0
    every = list(hf_layer_types(args.config)) or [None]
    layers = [args.layer_type] if args.layer_type else every
    ropes = {layer: _stated_rope(args, family, layer)
             for layer in dict.fromkeys([*layers, *every])}  # every layer type: what one of them reads is read
    summaries = {layer: describe(ropes[layer], args.seq_len) for layer in layers}
    for summary in summaries.values():
        summary["unused_keys"] = unused_keys(list(ropes.values()), set(summary["not_modelled"]))
    if args.json:
        print(json.dumps(summaries[None] if layers == [None] else summaries, indent=1))
        return 0
    for layer, summary in summaries.items():
        print(_text(summary, f"{args.config}" + (f" [{layer}]" if layer else "")))
        print("\n".join(_report_lines(summary["not_modelled"], summary["unused_keys"], [])))
    return 0
