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
  rows.

A family the table does not know is refused (exit 2, one line naming the model type and ``--assume``)
unless ``--assume`` states its conventions; a layer that is refused, has no attention or has another kind is
refused by name.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from refpos.check.run import (
    Unusable,
    check_alibi,
    check_deberta,
    check_sinusoid,
    check_t5,
    default_dtype,
    same_shape,
)
from refpos.cli.options import MAX_WIDTH, Number
from refpos.cli.positions import add_assume, refuse_unknown, resolve
from refpos.encodings.alibi import FORMS, alibi_slopes
from refpos.golden import tolerance as tol
from refpos.golden.compare import compare
from refpos.golden.npy import read_npy
from refpos.models.kinds.absolute import AbsoluteLayer
from refpos.models.kinds.alibi import AlibiLayer
from refpos.models.kinds.deberta import DebertaLayer
from refpos.models.kinds.registry import check_targets
from refpos.models.kinds.rope import RopeLayer
from refpos.models.kinds.t5 import T5Layer
from refpos.models.records import LayerRecord

#: a layer's index in its stack
LAYER_INDEX = Number(int, minimum=0, maximum=MAX_WIDTH)
#: check target -> the record kinds it checks
TARGET_KINDS = check_targets()


def configure(parser: argparse.ArgumentParser) -> None:
    """The options that pick a model's layer (``--stack``, ``--layer``), ``--table`` and ``--assume``."""
    parser.add_argument("--stack", default=None, choices=("encoder", "decoder"),
                        help="with --config: the stack of the layer (default: the first with that kind)")
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


def rope_of(args: argparse.Namespace) -> tuple[Any, dict[str, str]]:
    """The RoPE of the chosen layer and the resolution's not-modelled report."""
    layer = layer_of(args, "rope")
    assert isinstance(layer, RopeLayer)
    return layer.rope, dict(layer.rope.not_modelled)


def check_layer(args: argparse.Namespace, target: str, candidate: np.ndarray, dtype: str,
                progress: Any) -> dict[str, Any]:
    """``refpos check alibi | t5 | sinusoid | learned --config``: the candidate against the chosen layer."""
    layer = layer_of(args, target)
    where = {"layer": {"stack": layer.stack, "index": layer.index, "kind": layer.kind,
                       "reads": {use: list(source) for use, source in layer.reads}, **layer.params()}}
    if isinstance(layer, AlibiLayer):
        return {**_alibi(args, layer, candidate, dtype, progress), **where}
    if isinstance(layer, DebertaLayer):
        if layer.position_buckets <= 0:
            raise Unusable(f"--config {args.config}: {layer.stack} layer {layer.index} has no log buckets "
                           f"(position_buckets={layer.position_buckets}): nothing for refpos check deberta to check")
        rel = _need_array(args.relative, "--relative REL.npy (query − key)", target)
        return {**check_deberta(candidate, rel, position_buckets=layer.position_buckets,
                                max_relative_positions=layer.params()["relative_range"], progress=progress), **where}
    if isinstance(layer, T5Layer):
        rel = _need_array(args.relative, "--relative REL.npy (memory − query)", target)
        return {**check_t5(candidate, rel, bidirectional=layer.bidirectional, num_buckets=layer.num_buckets,
                           max_distance=layer.max_distance, progress=progress), **where}
    assert isinstance(layer, AbsoluteLayer)
    positions = _need_array(args.positions, "--positions P.npy", target)
    if positions.dtype.kind not in "iu":
        raise Unusable(f"positions must be an integer array, got {positions.dtype}")
    try:
        rows = layer.rows(positions)
    except ValueError as exc:
        raise Unusable(str(exc)) from None
    if layer.kind == "sinusoidal":
        return {**check_sinusoid(candidate, rows, dim=layer.dim, base=layer.base, layout=layer.layout,
                                 spacing=layer.spacing, dtype=dtype, progress=progress), **where}
    table = _need_array(args.table, "--table T.npy (the trained position table)", target)
    if table.ndim != 2 or (layer.table_size is not None and table.shape[0] != layer.table_size):
        raise Unusable(f"--table must be ({layer.table_size}, width) for this layer, got {tuple(table.shape)}")
    reference = np.asarray(table, dtype=np.float64)[rows]
    result = _direct("learned", candidate, reference, dtype)
    if not result["ok"]:  # which rows the candidate read: the table row each of its rows equals
        from refpos.check.fit_tables import fit_learned

        result["rows_read"] = fit_learned(np.asarray(candidate, dtype=np.float64), np.asarray(table, dtype=np.float64),
                                          rows, np.asarray(tol.value_tolerance(result["dtype"], reference)).max())
    return {**result, **where}


def _need_array(path: str | None, flag: str, target: str) -> np.ndarray:
    if path is None:
        raise Unusable(f"refpos check {target} --config needs {flag}")
    return read_npy(path)


def _alibi(args: argparse.Namespace, layer: AlibiLayer, candidate: np.ndarray, dtype: str,
           progress: Any) -> dict[str, Any]:
    n = len(layer.slopes)
    official = np.allclose(layer.slopes, np.asarray([float(m) for m in _official(n)]), rtol=1e-15, atol=0.0)
    if candidate.ndim == 1 or (layer.form in FORMS and official):
        if not official:
            return _direct("alibi", candidate, np.asarray(layer.slopes), dtype)
        return check_alibi(candidate, n, q_len=args.q_len, k_len=args.k_len, form=layer.form, dtype=dtype,
                           head_dim=args.head_dim, progress=progress)
    if args.q_len is None or args.k_len is None:
        raise Unusable("a bias candidate needs --q-len and --k-len")
    same_shape(candidate, (n, args.q_len, args.k_len), "a bias (heads, q_len, k_len)")
    # an unpadded sequence of k_len keys whose last q_len are the queries: its mask is all ones, so the keys read
    # the mask's running count (BLOOM, Falcon) or their index (MPT) alike
    slots, mask = np.arange(args.k_len - args.q_len, args.k_len), np.ones(args.k_len, dtype=np.int64)
    return _direct("alibi", candidate, layer.bias(cache_position=slots, attention_mask=mask, rounded=False), dtype)


def _official(n: int) -> list[float]:
    return list(np.asarray(alibi_slopes(n, xp="numpy")))


def _direct(target: str, candidate: np.ndarray, reference: np.ndarray, dtype: str) -> dict[str, Any]:
    """The candidate against a reference of position-independent values, within the dtype's value tolerance."""
    cand = np.asarray(candidate)
    if cand.dtype.kind != "f":
        raise Unusable(f"candidate must be a floating array, got {cand.dtype}")
    same_shape(cand, reference.shape, f"the layer's {target} reference")
    dtype = tol.check_dtype(dtype or default_dtype(cand))
    atol = np.asarray(tol.value_tolerance(dtype, reference))
    summary = compare(cand.astype(np.float64), reference, atol=atol, equal_nan=True).summary()
    summary["worst_index"] = summary["worst_index"] or []
    return {"target": target, "dtype": dtype, **summary, "diagnosis": []}


__all__ = ["TARGET_KINDS", "check_layer", "configure", "layer_of", "rope_of"]
