"""Golden cases of a model's layers whose positions are not RoPE: ALiBi, T5 buckets, learned and sinusoidal
tables (``refpos golden model CONFIG``; RoPE layers: :mod:`refpos.golden.cases.rope`).

One case set per distinct kind of layer of :func:`refpos.model_positions` (layers with the same record share
it), with the record's parameters, the stack and the layer indices in the case's parameters:

* ``alibi/<model>/<stack>``: the exact slopes (``alibi_slopes(n)`` for the official recurrence), the exact bias
  at the probe positions (``alibi_bias(n, T, T, "key_index")`` where the family's form is the key index),
  and ``bias_as_computed``: the bias as the family's code rounds it (Falcon: bfloat16);
* ``deberta/<model>/<stack>``: the log bucket of query − key over the probe positions
  (``deberta_log_buckets``) and the relative-table row each pair reads;
* ``t5/<model>/<stack>``: the bucket of every (query, key) pair of the probe positions
  (``t5_bucket(k − q, bidirectional, num_buckets, max_distance)``) and the bias of a seeded table;
* ``learned/<model>/<stack>``: the rows the probe positions read (``p + offset``; the last row of the table
  among them) and those rows of a seeded table of width 4 (``learned_lookup``);
* ``sinusoid/<model>/<stack>``: the family's sinusoid at the probe positions (``sinusoidal`` of the rows
  ``p + offset``), certified against mpmath.

The vision and audio kinds' layers (a grid, a window's bias table, a convolution over frames, …) get one case per
distinct record and contract call from :mod:`refpos.golden.cases.model_kind_cases`
(``<kind>/<model>/<stack>-<layer>/…``).

Layers without positions, without attention, refused or unknown have no case: the cases' parameters and the
manifest's ``source`` list them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.deberta import deberta_log_buckets
from refpos.encodings.sinusoidal import sinusoidal_frequencies
from refpos.golden.cases.common import In, call, probe_positions, rng_for, slug
from refpos.golden.cases.model_kind_cases import kind_model_cases
from refpos.golden.cases.tables import mp_bucket, mp_sinusoid, mp_slopes
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_integer, tolerance_rope, tolerance_value
from refpos.golden.files.manifest import Case, Output
from refpos.models.kinds.absolute import AbsoluteLayer
from refpos.models.kinds.alibi import AlibiLayer
from refpos.models.kinds.deberta import DebertaLayer
from refpos.models.kinds.t5 import T5Layer
from refpos.models.positions import ModelPositions
from refpos.models.records import LayerRecord

#: probe positions of a kind without a declared length (a sinusoid computed at any position, ALiBi, T5)
OPEN_LENGTH = 131072
#: width of the seeded table a learned case reads (the trained table is the model's; the rows are the test)
LEARNED_WIDTH = 4


def _groups(positions: ModelPositions) -> list[tuple[LayerRecord, list[int]]]:
    """One record per distinct (stack, parameters) of the kinds with cases, with the layers that share it."""
    groups: dict[tuple[str, str], tuple[LayerRecord, list[int]]] = {}
    for layer in positions:
        if not isinstance(layer, (AlibiLayer, T5Layer, AbsoluteLayer, DebertaLayer)):
            continue
        params = {k: v for k, v in layer.params().items() if k not in ("owns_table", "table_layer")}
        key = (layer.stack, repr(sorted(params.items())))
        groups.setdefault(key, (layer, []))[1].append(layer.index)
    return list(groups.values())


def encoding_model_cases(positions: ModelPositions, name: str, *, probes: np.ndarray | None = None) -> list[Case]:
    """The cases of every non-RoPE kind of layer of ``positions`` (``probes``: positions instead of the
    probe set), the vision and audio kinds' by :func:`refpos.golden.cases.model_kind_cases.kind_model_cases`."""
    cases: list[Case] = []
    for layer, indices in _groups(positions):
        key = f"{slug(name)}/{layer.stack}"
        shared = {"model": name, "stack": layer.stack, "layers": indices, "record": layer.params(),
                  "reads": {use: list(source) for use, source in layer.reads},
                  "schedule": positions.summary().splitlines(), "source": positions.family.source
                  if positions.family is not None else None}
        if isinstance(layer, AlibiLayer):
            cases.append(_alibi_case(layer, f"alibi/{key}", name, shared, probes))
        elif isinstance(layer, T5Layer):
            cases.append(_t5_case(layer, f"t5/{key}", name, shared, probes))
        elif isinstance(layer, DebertaLayer):
            cases.append(_deberta_case(layer, f"deberta/{key}", name, shared, probes))
        elif layer.kind == "learned":
            cases.append(_learned_case(layer, f"learned/{key}", name, shared, probes))
        else:
            cases.append(_sinusoid_case(layer, f"sinusoid/{key}", name, shared, probes))
    return cases + kind_model_cases(positions, name)


def _probes(case_id: str, limit: int, probes: np.ndarray | None) -> np.ndarray:
    """Sorted probe positions below ``limit`` (at most :data:`N_PROBES`), or the given ones."""
    if probes is not None:
        return np.asarray(probes, dtype=np.int64)
    return np.unique(probe_positions(limit, None, case_id))


def _alibi_case(layer: AlibiLayer, cid: str, name: str, shared: dict[str, Any], probes: np.ndarray | None) -> Case:
    pos = _probes(cid, OPEN_LENGTH, probes)
    n = len(layer.slopes)
    slopes = np.asarray(layer.slopes, dtype=np.float64)
    exact = layer.bias_at(pos, pos, rounded=False)  # (H, T, T)
    keys = pos - pos[-1] if layer.form == "key_index_end" else pos  # what each key's slope multiplies
    as_computed = layer.bias_at(pos, pos)
    scale = float(np.abs(exact).max()) or 1.0
    recurrence = shared["record"]["form"] == "key_index"
    outputs = {
        "bias": Output(exact, tolerance_value(exact, scale=scale),
                       lambda: (np.array([[[m * int(j) for j in keys] for _ in pos] for m in _exact_slopes(layer)],
                                         dtype=object), 0.0)),
        "slopes": Output(slopes, tolerance_value(slopes, scale=float(slopes.max()))),
        "bias_as_computed": Output(as_computed, tolerance_value(as_computed, scale=scale))}
    description = (f"{name}: ALiBi of its {shared['stack']} layers, {n} heads, {layer.form} form, bias "
                   f"{'before' if layer.before_scale else 'after'} the 1/√d scale, at {pos.size} probe positions "
                   f"(bias_as_computed: slopes and products rounded to {layer.dtype} as its code does)")
    parameters = {**shared, "positions_are": f"queries = keys = the probe positions, each key's position its "
                                             f"{layer.source('key')[0]} (what the family's code multiplies a "
                                             "slope by)"}
    if recurrence and np.array_equal(pos, np.arange(pos.size)):
        parameters["call"] = call("alibi_bias", ["bias"], n, pos.size, pos.size, "key_index")
    return Case(cid, "alibi", "alibi_bias" if "call" in parameters else None, description, parameters,
                {"positions": pos}, outputs)


def _exact_slopes(layer: AlibiLayer) -> list[Any]:
    """The slopes in mpmath: the official recurrence where the family uses it, else the float64 values."""
    exact = mp_slopes(len(layer.slopes))
    if all(abs(float(e) - s) <= 1e-15 * s for e, s in zip(exact, layer.slopes, strict=True)):
        return exact
    return [cert.mp.mpf(s) for s in layer.slopes]


def _t5_case(layer: T5Layer, cid: str, name: str, shared: dict[str, Any], probes: np.ndarray | None) -> Case:
    pos = _probes(cid, OPEN_LENGTH, probes)
    rel = pos[None, :] - pos[:, None]  # (T, T): key − query
    buckets = layer.buckets_at(pos, pos).astype(np.int64)
    table = rng_for(cid).standard_normal((layer.num_buckets, layer.n_heads))
    bias = np.asarray(layer.bias_at(table, pos, pos))
    outputs = {"buckets": Output(buckets, tolerance_integer(), lambda: (
        np.array([[mp_bucket(int(r), layer.bidirectional, layer.num_buckets, layer.max_distance) for r in row]
                  for row in rel], dtype=object), 0.0)),
        "bias": Output(bias, tolerance_value(bias, scale=float(np.abs(table).max())))}
    direction = "bidirectional" if layer.bidirectional else "causal"
    parameters = {**shared, "call": call("t5_bucket", ["buckets"], In("rel"), layer.bidirectional,
                                         layer.num_buckets, layer.max_distance)}
    return Case(cid, "t5", "t5_bucket",
                f"{name}: T5 buckets of its {shared['stack']} layers ({direction}, {layer.num_buckets} buckets, "
                f"max_distance {layer.max_distance}) over the probe positions; the bias of a seeded table",
                parameters, {"rel": rel, "positions": pos, "table": table}, outputs, primary="buckets")


def _deberta_case(layer: DebertaLayer, cid: str, name: str, shared: dict[str, Any],
                  probes: np.ndarray | None) -> Case:
    pos = _probes(cid, OPEN_LENGTH, probes)
    rel = pos[:, None] - pos[None, :]  # (T, T): DeBERTa's query − key
    index = layer.relative_index_at(pos, pos).astype(np.int64)
    outputs = {"index": Output(index, tolerance_integer())}
    parameters = dict(shared)
    if layer.position_buckets > 0:
        buckets = np.asarray(deberta_log_buckets(rel, layer.position_buckets, layer.params()["relative_range"]))
        outputs["buckets"] = Output(buckets.astype(np.int64), tolerance_integer())
        parameters["call"] = call("deberta_log_buckets", ["buckets"], In("rel"), layer.position_buckets,
                                  layer.params()["relative_range"])
    return Case(cid, "deberta", "deberta_log_buckets" if "call" in parameters else None,
                f"{name}: DeBERTa ({layer.version}) relative positions of its {shared['stack']} layers over the probe "
                f"positions: the log bucket of query − key (position_buckets {layer.position_buckets}) and the row "
                f"of the relative table each pair reads (attention span {layer.params()['attention_span']})",
                parameters, {"rel": rel, "positions": pos}, outputs,
                primary="buckets" if "buckets" in outputs else "index")


def _learned_case(layer: AbsoluteLayer, cid: str, name: str, shared: dict[str, Any],
                  probes: np.ndarray | None) -> Case:
    usable = (layer.table_size or OPEN_LENGTH) - layer.offset  # positions 0 … usable − 1
    pos = _probes(cid, usable, probes)
    if probes is None and pos[-1] != usable - 1:
        pos = np.unique(np.append(pos[1:], usable - 1))  # the last row of the table is always probed
    rows = layer.rows_at(pos)
    table = rng_for(cid).standard_normal((layer.table_size or int(rows.max()) + 1, LEARNED_WIDTH))
    lookup = table[rows]
    return Case(cid, "learned", "learned_lookup",
                f"{name}: the learned table of its {shared['stack']} layers ({layer.table_size} rows) read at "
                f"row p + {layer.offset} for the probe positions p (the last row among them); the rows of a "
                f"seeded table of width {LEARNED_WIDTH}",
                {**shared, "call": call("learned_lookup", ["lookup"], In("table"), In("rows"))},
                {"positions": pos, "rows": rows, "table": table},
                {"lookup": Output(lookup, tolerance_value(lookup, scale=float(np.abs(table).max()))),
                 "row_of_position": Output(rows, tolerance_integer())})


def _sinusoid_case(layer: AbsoluteLayer, cid: str, name: str, shared: dict[str, Any],
                   probes: np.ndarray | None) -> Case:
    usable = (layer.table_size or OPEN_LENGTH) - layer.offset
    pos = _probes(cid, usable, probes)
    rows = layer.rows_at(pos)
    table = layer.sinusoid(pos)
    freqs = np.asarray(sinusoidal_frequencies(layer.dim, base=layer.base, spacing=layer.spacing, xp=np))
    return Case(cid, "sinusoid", "sinusoidal",
                f"{name}: the sinusoid of its {shared['stack']} layers (width {layer.dim}, {layer.layout}, "
                f"{layer.spacing} spacing) at row p + {layer.offset} for the probe positions p",
                {**shared, "call": call("sinusoidal", ["table"], In("rows"), layer.dim, layer.base, layer.layout,
                                        layer.spacing)},
                {"positions": pos, "rows": rows},
                {"table": Output(table, tolerance_rope(rows, freqs, np.ones(rows.size)),
                                 lambda: (mp_sinusoid(rows, layer.dim, layer.base, layer.layout, layer.spacing),
                                          1.0))})


__all__ = ["LEARNED_WIDTH", "OPEN_LENGTH", "encoding_model_cases"]
