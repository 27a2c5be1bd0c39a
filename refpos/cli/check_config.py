"""``refpos check TARGET --config CONFIG``: the parameters of a check read from a model's layer.

With ``--config``, each target takes what the model's code fixes from the layer it names (``--stack``,
``--layer``; default: the first layer of that kind), resolved by :func:`refpos.model_positions`:

* ``rope``: the layer's RoPE (``--layer-type`` picks a layer type of a per-layer config);
* ``alibi``: the head count, the bias form and the slopes; a family whose form is not one of the check's
  (MPT's end-anchored key index) is compared with the layer's exact bias directly;
* ``t5``: the direction of the stack, the bucket count and the maximal distance;
* ``deberta``: the log buckets' ``position_buckets`` and relative range (``--relative`` holds query − key);
* ``sinusoid``: the width, layout, spacing, base and the position offset (``--positions`` are the model's
  positions; the rows read are ``p + offset``);
* ``learned``: ``--table T.npy`` (the trained table) read at ``p + offset``: the candidate is the embedding
  rows;
* the vision and audio kinds (``grid``, ``bias_table``, ``conv_position``, ``decomposed``, ``sincos2d``,
  ``fourier``, ``sinusoid1d``, ``vision_rope``, ``axis_tables``, ``tiled_grid``): ``--call CALL.json`` holds the
  weights and the inputs; the arguments it leaves out are the layer record's (a grid's way and extra rows, a
  window's form and size, a kernel's groups and activation, …), and an argument contradicting the record is refused
  naming it and both values (:func:`refpos.golden.cases.model_kind_cases.layer_arguments`). ``--stack`` names any
  stack of the model (``vision``, ``vision.input``, ``audio.input``, …).

The layer goes to the target (:mod:`refpos.check.targets`) as :attr:`refpos.check.shared.request.Request.layer`;
the kinds each target checks are the registry's (:data:`refpos.check.targets.TARGET_KINDS`).

A family the table does not know is refused (exit 2, one line naming the model type and ``--assume``)
unless ``--assume`` states its conventions; a layer that is refused, has no attention or has another kind is
refused by name.
"""

from __future__ import annotations

import argparse
import re

from refpos.check.shared.arrays import Unusable
from refpos.check.targets import TARGET_KINDS
from refpos.cli.options import MAX_WIDTH, Number
from refpos.cli.positions import add_assume, refuse_unknown, resolve
from refpos.models.records import LayerRecord

#: a layer's index in its stack
LAYER_INDEX = Number(int, minimum=0, maximum=MAX_WIDTH)


def _stack(value: str) -> str:
    """A stack name as :func:`refpos.model_positions` names them: words of letters and ``_`` joined by dots."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*", value or ""):
        raise argparse.ArgumentTypeError(f"a stack name (encoder, decoder, vision, vision.input, …), got {value!r}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    """The options that pick a model's layer (``--stack``, ``--layer``), ``--table`` and ``--assume``."""
    parser.add_argument("--stack", default=None, type=_stack,
                        help="with --config: the stack of the layer (encoder, decoder, vision, vision.input, "
                             "audio.input, …; default: the first with that kind)")
    parser.add_argument("--layer", type=LAYER_INDEX, default=None,
                        help="with --config: the layer's index in its stack (default: the first of that kind)")
    parser.add_argument("--table", default=None, help="learned: the trained position table (.npy)")
    add_assume(parser)


def layer_of(args: argparse.Namespace, target: str) -> LayerRecord:
    """The layer ``args.config`` has for ``target`` (see the module docstring); :class:`Unusable` otherwise."""
    try:
        positions = resolve(args.config, args)
        refuse_unknown(positions, f"refpos check {target}")
    except (ValueError, TypeError, KeyError, OSError) as exc:
        raise Unusable(f"--config {args.config} does not resolve: {str(exc).splitlines()[0]}") from None
    kinds = TARGET_KINDS[target]
    layers = [layer for layer in positions if (args.stack is None or layer.stack == args.stack)
              and (args.layer is None or layer.index == args.layer)
              and (getattr(args, "layer_type", None) is None or layer.layer_type == args.layer_type)]
    if not layers:
        raise Unusable(f"--config {args.config} has no layer with --stack {args.stack} --layer {args.layer}"
                       + (f" --layer-type {args.layer_type}" if getattr(args, "layer_type", None) else ""))
    chosen = next((layer for layer in layers if layer.kind in kinds), None)
    if chosen is None:
        first = layers[0]
        what = getattr(first, "reason", "") or first.label
        raise Unusable(f"--config {args.config}: {first.stack} layer {first.index} is {first.kind} ({what}), "
                       f"not {target}: the config's layers are {'; '.join(positions.summary().splitlines())}")
    return chosen


__all__ = ["configure", "layer_of"]
