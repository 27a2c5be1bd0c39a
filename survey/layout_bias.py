r"""A document model's relative layout bias in the survey (:mod:`refpos.models.kinds.layout_bias`): the bucket tables
the run recorded, and the comparison of the bias every layer was handed with refpos's.

**Observing** (:func:`bias_weights`, for the model types of :data:`TYPES` alone): the weights of the modules whose
name says they hold a relative-position bias table (``rel_pos_bias``, ``rel_pos_x_bias``, ``rel_pos_y_bias``), as
float64 copies of the float32 ``Linear`` weights ``(heads, buckets)``, kept with the probe.

**Checking** (:func:`check_layout_bias`, per layer refpos says adds the bias):

1. the tables the record names are the model's, of the record's shape (``(buckets, heads)`` once transposed: a
   bucket count is the table's rows);
2. the bucket functions the model called (the recorded returns of its ``relative_position_bucket``, each evaluated
   at every relative position of :data:`survey.probe.SWEEP`) are, as a multiset, refpos's: the 1-D function and,
   where spatial, the x and y function, :func:`refpos.encodings.t5.t5_bucket` at the record's counts and largest
   distances (a largest distance off by one shows only past the distances a few tokens reach);
3. the ``position_bias`` the layer's attention was handed, in run A and every case that ran, against
   :meth:`~refpos.models.kinds.layout_bias.LayoutBiasLayer.bias_at` of the recorded tables at the places the
   record reads and the boxes the survey fed (:func:`survey.boxes.boxes_for`, made again from the box tables'
   rows), within :func:`refpos.encodings.layout_bias_mistakes.layout_bias_bound` (transformers' float32 sum and
   division).

**Mutants** (:func:`layout_bias_mutants`): each mistake of
:data:`refpos.encodings.layout_bias_mistakes.MISTAKES` a record can state (the corners, the counts, the largest
distances, the spatial part), the sign of the distances flipped, the bias not divided by √d, and the places read
from the position ids instead of the tokens' indices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from survey.claims import LayerClaim, LayerResult, Resolution

#: the model types whose bias tables the probe keeps
TYPES = ("layoutlmv3",)
#: the module names of a relative bias table
TABLES = ("rel_pos_bias", "rel_pos_x_bias", "rel_pos_y_bias")


def bias_weights(model: Any, config: Any) -> dict[str, np.ndarray]:
    """``{parameter name: weight}`` of every ``Linear`` module named as one of :data:`TABLES`, for a model of
    :data:`TYPES` (else ``{}``)."""
    if getattr(config, "model_type", None) not in TYPES:
        return {}
    out = {}
    for path, module in model.named_modules():
        if path.rsplit(".", 1)[-1] in TABLES and getattr(module, "weight", None) is not None:
            out[f"{path}.weight"] = module.weight.detach().double().numpy().copy()
    return out


def _result(claim: LayerClaim, status: str, error: float | None = None, cause: str = "") -> LayerResult:
    return LayerResult(claim.stack, claim.index, claim.kind, status, error, cause)


def _tables(record: Any, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray] | str:
    """Table -> ``(buckets, heads)`` from the probe's weights, or why not."""
    out = {}
    for table, module in record.modules().items():
        found = [w for name, w in weights.items() if name.split(".")[-2] == module]
        if len(found) != 1:
            return f"transformers holds {len(found)} tables named {module}"
        out[table] = found[0].T
    return out


def _bucket_functions(record: Any) -> list[tuple[int, ...]]:
    from refpos.encodings.t5 import t5_bucket
    from survey.probe import SWEEP

    pairs = [(record.num_buckets, record.max_distance)]
    pairs += [(record.num_2d_buckets, record.max_2d_distance)] * (2 if record.spatial else 0)
    return sorted(tuple(np.asarray(t5_bucket(SWEEP, num_buckets=n, max_distance=m)).tolist()) for n, m in pairs)


def check_layout_bias(claim: LayerClaim, probe: Any, path: str) -> LayerResult:
    """refpos's layout bias against layer ``claim.index`` of list ``path`` (module docstring)."""
    from refpos.encodings.layout_bias_mistakes import layout_bias_bound
    from survey.boxes import boxes_for
    from survey.seen import positions_of, seen_of

    record = claim.params["record"]
    tables = _tables(record, getattr(probe, "weights", {}))
    if isinstance(tables, str):
        return _result(claim, "mismatch", None, tables)
    shapes = {"1d": (record.num_buckets, record.n_heads), "x": (record.num_2d_buckets, record.n_heads),
              "y": (record.num_2d_buckets, record.n_heads)}
    for table, value in tables.items():
        if value.shape != shapes[table]:
            return _result(claim, "mismatch", None, f"{record.modules()[table]}: transformers' table is "
                           f"(buckets, heads) {value.shape}, refpos's {shapes[table]}")
    swept = sorted(tuple(b.swept.reshape(-1).tolist()) for b in probe.a.builders
                   if "bucket" in b.name and b.swept is not None)
    if swept != (functions := _bucket_functions(record)):
        return _result(claim, "mismatch", None, f"bucket functions: transformers calls {len(swept)}, refpos's "
                       f"{len(functions)} differ from them at the swept relative positions")
    rows = claim.params.get("box_rows")
    params = {"num_buckets": record.num_buckets, "max_distance": record.max_distance,
              "num_2d_buckets": record.num_2d_buckets, "max_2d_distance": record.max_2d_distance,
              "x_corner": record.x_corner, "y_corner": record.y_corner, "spatial": record.spatial}
    worst, compared = 0.0, 0
    for seen in seen_of(probe):
        calls = [c for c in seen.run.calls if c.layer == (path, claim.index) and "position_bias" in c.tensors]
        if not calls:
            if seen.case is None:
                return _result(claim, "mismatch", None, "transformers hands this layer no position_bias")
            continue
        places = positions_of(claim, seen, "key", "key")
        bbox = None
        if record.spatial:
            if rows is None:
                return _result(claim, "mismatch", None, "refpos states no box tables to size the boxes fed")
            bbox = np.resize(boxes_for(rows, int(probe.positions.size)), (1, places.size, 4))
        try:
            expected = np.asarray(claim.params["bias"](tables.get("1d"), tables.get("x"), tables.get("y"), places,
                                                       bbox), dtype=np.float64)
        except ValueError as exc:
            return _result(claim, "mismatch", None, f"{seen.name}: refpos's bias: {exc}")
        bound = layout_bias_bound(tables, places, bbox, params, record.head_dim)
        for call in calls:
            observed = call.tensors["position_bias"]
            if observed.shape[-3:] != expected.shape[-3:]:
                return _result(claim, "mismatch", None, f"{seen.name}: position_bias {observed.shape}, refpos "
                               f"{expected.shape}")
            excess = np.abs(observed - expected) / np.maximum(bound, np.finfo(float).tiny)
            compared += 1
            worst = max(worst, float(np.abs(observed - expected).max()))
            if excess.max() > 1.0:
                h, i, j = (int(v) for v in np.unravel_index(excess.argmax(), excess.shape)[-3:])
                return _result(claim, "mismatch", float(np.abs(observed - expected).max()),
                               f"{seen.name}: layout bias: head {h}, query {i}, key {j} lies "
                               f"{float(excess.max()):.3g} bounds from refpos's")
    return _result(claim, "exact", worst)


def layout_bias_mutants(resolution: Resolution, each: Any) -> Iterator[tuple[str, Resolution | None]]:
    """The module docstring's mutants; ``each(resolution, kind, change)`` applies ``change`` to every claim of the
    kind (:func:`survey.mutants._each`)."""
    if not any(c.kind == "layout_bias" for c in resolution.layers):
        return
    from refpos.encodings.layout_bias_mistakes import MISTAKES, mistaken

    def with_record(c: LayerClaim, name: str) -> LayerClaim | None:
        record = c.params["record"]
        base = {"num_buckets": record.num_buckets, "max_distance": record.max_distance,
                "num_2d_buckets": record.num_2d_buckets, "max_2d_distance": record.max_2d_distance,
                "x_corner": record.x_corner, "y_corner": record.y_corner, "spatial": record.spatial}
        wrong = {k: v for k, v in mistaken(name, base).items() if k in base}
        if wrong == base:
            return None
        changed = dataclasses.replace(record, **wrong)
        return dataclasses.replace(c, params={**c.params, "record": changed, "bias": changed.bias_at})

    for name in MISTAKES:
        if name in ("distance_sign_flipped", "unscaled"):
            continue
        yield f"layout bias: {name}", each(resolution, "layout_bias", lambda c, n=name: with_record(c, n))

    def flipped(c: LayerClaim) -> LayerClaim:
        bias = c.params["bias"]
        return dataclasses.replace(c, params={**c.params, "bias": lambda r, x, y, p, b: bias(
            r, x, y, -np.asarray(p), None if b is None else -np.asarray(b))})

    def unscaled(c: LayerClaim) -> LayerClaim:
        bias, scale = c.params["bias"], float(np.sqrt(c.params["record"].head_dim))
        return dataclasses.replace(c, params={**c.params, "bias": lambda *a: np.asarray(bias(*a)) * scale})

    yield "layout bias: distance_sign_flipped", each(resolution, "layout_bias", flipped)
    yield "layout bias: unscaled", each(resolution, "layout_bias", unscaled)
    yield "layout bias: places from the position ids", each(resolution, "layout_bias", lambda c: dataclasses.replace(
        c, reads={**c.reads, "key": ("position_ids",), "query": ("position_ids",)}))


__all__ = ["TABLES", "TYPES", "bias_weights", "check_layout_bias", "layout_bias_mutants"]
