"""``refpos positions CONFIG``: what every layer of every stack of a config.json does with positions.

Prints one line per stack (``decoder layers 0-47: rope ×36, none+scale ×12 (every 4th)``; a stack's input
embedding, ``vision input: grid(bicubic)``), then each distinct kind of layer with what its positions are read
from (``reads: rotation ← position_ids (else cache_position)``, :mod:`refpos.models.sources`) and its parameters
(a RoPE's resolved fields and frequencies, ALiBi's slopes and order, T5's buckets, a learned or sinusoidal
table's length and offset, a position grid's native size and way, ...) and what each stack's positions are
computed from (``needs image_grid: the patch grid of each image``), then whether the resolution is complete:
each key it does not model with what it does, every refused layer with its reason, and for a family the
table does not know, what its config does not state. ``--json`` prints
:meth:`refpos.models.ModelPositions.describe`; ``--strict`` makes anything incomplete an error (exit 2).

``--transformers-version X.Y`` names the transformers release whose code the model runs, over the config's own
``transformers_version`` (:mod:`refpos.models.releases`). ``--assume KEY=VALUE`` (repeatable) and
``--assume-file ROW.toml`` state the family row of a ``model_type`` the family table does not know
(:mod:`refpos.models.stated`): ``--assume family=llama`` borrows that family's row, ``--assume encoding=rope
--assume layout=half --assume rope.theta_key=rotary_emb_base`` states the columns themselves, a row file holds
them as a ``families.toml`` row does; each is checked as the table's rows are.

Examples
--------
.. code-block:: console

    $ refpos positions path/to/config.json
    $ refpos positions path/to/model_dir --json
    $ refpos positions my_model/config.json --assume family=llama
    $ refpos positions my_model/config.json --assume-file my_model_row.toml --strict
    $ refpos positions Qwen2.5-VL/config.json --layout text:6,image:1x8x12,text:6 --out positions.npy

``--layout SPANS`` prints the M-RoPE position ids of a token layout instead (:mod:`refpos.cli.positions_layout`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from refpos.check.shared.stream import ranges as format_ranges
from refpos.cli import positions_layout
from refpos.models.kinds.rope import RopeLayer
from refpos.models.positions import ASSUMABLE, ModelPositions, model_positions
from refpos.models.records import LayerRecord
from refpos.models.sources import shown as shown_source
from refpos.models.stated import assume_pairs, read_row_file
from refpos.rope.config import RopeConfig


def add_assume(parser: argparse.ArgumentParser) -> None:
    """``--assume KEY=VALUE``, ``--assume-file ROW.toml`` (the family row of a model_type the table does not know:
    :mod:`refpos.models.stated`) and ``--transformers-version X.Y``, shared by ``positions``, ``rope``, ``golden
    model`` and ``check --config``."""
    parser.add_argument("--assume", action="append", default=[], metavar="KEY=VALUE",
                        help="a column of the family row of a model_type the table does not know (one of "
                             f"{', '.join(ASSUMABLE)}; dotted into a fact table: rope.theta_key=base; VALUE a TOML "
                             "value or a bare word), e.g. family=llama, or encoding=rope and layout=half")
    parser.add_argument("--assume-file", default=None, metavar="ROW.toml",
                        help="the family row as a TOML file: the keys of a [family.<model_type>] table of "
                             "families.toml at its top level, without source (--assume values override them)")
    parser.add_argument("--transformers-version", default=None, metavar="X.Y",
                        help="the transformers release whose code the model runs, over the config's "
                             "transformers_version (a family whose position code changed between releases needs one)")


def assumptions(args: argparse.Namespace) -> dict[str, Any] | None:
    """The row stated by ``--assume-file`` and ``--assume`` (``None`` when neither is given); a malformed one is a
    ``ValueError``."""
    row = read_row_file(args.assume_file) if getattr(args, "assume_file", None) is not None else {}
    pairs = assume_pairs(args.assume)
    for kind, facts in pairs.items():  # a flag's fact joins the file's fact table
        if isinstance(facts, dict) and isinstance(row.get(kind), dict):
            pairs[kind] = {**row[kind], **facts}
    stated = {**row, **pairs}
    return stated or None


def resolve(config: Any, args: argparse.Namespace, *, strict: bool = False) -> ModelPositions:
    """:func:`refpos.model_positions` with the row an ``--assume`` / ``--assume-file`` command line states and its
    ``--transformers-version``."""
    return model_positions(config, assume=assumptions(args), strict=strict,
                           transformers_version=getattr(args, "transformers_version", None))


def refuse_unknown(positions: ModelPositions, command: str) -> None:
    """A ``ValueError`` (exit 2, one line) when the family is unknown: its positional keys and what to pass to state
    its row."""
    if positions.unknown:
        why = next(iter(positions.unknown.values()))
        raise ValueError(why.replace("state its row", f"to run {command}, state its row", 1))


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos positions``."""
    parser.add_argument("config", help="path to a config.json, or a model directory holding one")
    parser.add_argument("--strict", action="store_true",
                        help="fail when anything is refused, unknown or not modelled")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_assume(parser)
    positions_layout.add_options(parser)


def _group_lines(layer: LayerRecord, indices: list[int]) -> list[str]:
    """The parameters of one kind of layer, one line each."""
    where = f"  {layer.stack} {layer.label}" + (f" [{layer.layer_type}]" if layer.layer_type else "") + \
        f": layers {ranges(indices)}"
    lines = [where]
    if layer.reads:
        lines.append("    reads: " + "; ".join(f"{use} ← {shown_source(source)}" for use, source in layer.reads))
    params = layer.params()
    if isinstance(layer, RopeLayer):
        rope = layer.rope
        lines.append(f"    {rope.rope_type} RoPE, theta {rope.theta!r}, head_dim {rope.head_dim}, rotary_dim "
                     f"{rope.rotary_dim}, layout {rope.layout}, placement {rope.placement}"
                     + (f", mrope_section {list(rope.mrope_section)}" if rope.mrope_section else "")
                     + (", angle_sign -1 (each pair turns by −p·ω)" if rope.angle_sign == -1 else ""))
        lines.append(f"    {rule_facts(rope)}")
        params = {k: v for k, v in params.items() if k != "rope"}
    for key, value in params.items():
        if value is None or key in ("at",):
            continue
        shown = f"[{len(value)} values: {value[0]!r} … {value[-1]!r}]" if isinstance(value, list) and \
            len(value) > 4 else repr(value)
        lines.append(f"    {key}: {shown}")
    return lines


#: the symbols the docs give a rule's keys (docs/extrapolation.md), shown beside the key
SYMBOLS = {"factor": "s", "original_max_position_embeddings": "L0", "max_position_embeddings": "Lmax"}


def rule_facts(rope: RopeConfig) -> str:
    """One line of what the scaling rule reads: each key of its record (:data:`refpos.rope.rules.RULES`: its
    parameters and the keys it requires) with its value, and the attention factor ``A`` it gives."""
    from refpos.rope.rules import rule_of
    from refpos.rope.scaling import rope_frequencies

    rule = rule_of(rope.rope_type)
    params = rope.to_params()
    keys = [*rule.parameters, *(key for key, _ in rule.required if key not in rule.parameters)]
    facts = []
    for key in keys:
        value = params.get(key)
        if value is None:
            continue
        shown = f"[{len(value)} values: {value[0]!r} … {value[-1]!r}]" if isinstance(value, list) and \
            len(value) > 4 else repr(value)
        facts.append(f"{key}{' ' + SYMBOLS[key] if key in SYMBOLS else ''} = {shown}")
    factor = float(rope_frequencies(rope)[1])
    return f"{rule.name}: " + ", ".join([*facts, f"attention factor A = {factor:.10g}"])


def text(positions: ModelPositions, title: str) -> str:
    """The report ``refpos positions`` prints."""
    lines = [title]
    if positions.nesting:
        lines.append(f"  language model read from {positions.nesting[:-1]}")
    lines += [f"  part {name}: {path} ({model_type or 'no model_type'})" for name, path, model_type in positions.parts]
    lines += [f"  {line}" for line in positions.summary().splitlines()]
    needs = positions.needs()
    for (stack, layer_type, label), indices in positions.kinds().items():  # one record of each kind
        first = next(r for r in positions.stack(stack) if (r.layer_type, r.label) == (layer_type, label))
        lines += _group_lines(first, indices)
        for name, what in needs.pop(stack, {}).items():  # once per stack, after its first kind of layer
            lines.append(f"    needs {name}: {what}")
    problems = {**positions.not_modelled, **positions.unknown}
    lines.append("  complete: yes" if positions.complete else
                 f"  complete: NO ({len(problems)} not modelled or unknown, "
                 f"{sum(r.kind == 'refused' for r in positions)} layers refused)")
    lines += [f"    {key}: {why}" for key, why in sorted(problems.items())]
    lines += [f"  note: {note}" for note in positions.notes]
    return "\n".join(lines)


def ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5`` (:func:`refpos.check.rope.identify_text.ranges` with a hyphen)."""
    return format_ranges(indices, dash="-")


def run(args: argparse.Namespace) -> int:
    """Resolve and print; bad input raises ValueError / TypeError (exit 2 in :mod:`refpos.cli`)."""
    if args.layout is not None:  # M-RoPE position ids of a token layout (refpos.cli.positions_layout)
        return positions_layout.run(args)
    if args.out is not None:
        raise ValueError("--out writes the ids of --layout: give --layout SPANS")
    positions = resolve(args.config, args, strict=args.strict)
    print(json.dumps(positions.describe(), indent=1) if args.json else text(positions, str(args.config)))
    return 0
