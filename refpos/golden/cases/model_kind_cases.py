"""The cases ``refpos golden model`` writes for a config's vision and audio layers, and the arguments
``refpos check <kind> --config`` takes from its layer: both from the layer record's contract call
(:data:`refpos.golden.cases.model_kinds.MODEL_KINDS`).

:func:`kind_model_cases` makes one case per distinct layer record and call, ids
``<kind>/<model>/<stack>-<layer>/<label>``: the output is the record's ``reference`` (the kind's formula module, as
its check computes it) and ``refpos check CASE_ID`` diagnoses it with the kind's catalogue. Its
tolerance is the value rule at the output's magnitude, float32's atol raised to the kind's bound (a float32 port's)
and float64's to that bound at u = 2⁻⁵³. :func:`layer_arguments` merges a call file's arguments with the record's
and refuses a contradiction by name, with both values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from refpos.golden.cases.common import In, call, rng_for, slug
from refpos.golden.cases.model_kinds import MODEL_KINDS, PARAMETERS
from refpos.golden.exact.entries import round_up, tolerance_value
from refpos.golden.files.manifest import Case, Output
from refpos.models.records import LayerRecord


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it: tuples as lists, NumPy scalars as Python numbers."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.item() if isinstance(value, np.generic) else value


def _normal(name: str, value: Any) -> Any:
    """A value as compared with the record's: a grid's way with every field (the defaults filled in)."""
    from refpos.encodings.grid_variants import WAY_FIELDS

    if name == "way" and isinstance(value, Mapping):
        return {**WAY_FIELDS, **_plain(dict(value))}
    return _plain(value)


def contradictions(layer: LayerRecord, function: str, arguments: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(parameter, given, the record's)`` of every argument of ``function(**arguments)`` that contradicts the
    layer record: a value it fixes, the shape of an array whose rows it fixes, or the function itself."""
    record = MODEL_KINDS[layer.kind]
    plan = record.plan(layer)
    if isinstance(plan, str):
        raise ValueError(f"{layer.stack} layer {layer.index} ({layer.label}) has no contract call: {plan}")
    wanted, fixed = plan
    if function != wanted:
        return [("function", function, wanted)]
    out = []
    for name, value in fixed.items():
        given, own = _normal(name, arguments.get(name)), _normal(name, value)
        if name not in arguments or given == own:
            continue
        if isinstance(given, dict) and isinstance(own, dict):  # a way: the first field that differs, by name
            out += [(f"{name}.{k}", given.get(k), own.get(k)) for k in sorted(set(given) | set(own))
                    if given.get(k) != own.get(k)][:1]
        else:
            out.append((name, given, own))
    for name, shape in record.shapes(layer).items():
        given = getattr(arguments.get(name), "shape", None)
        if given is not None and (len(given) != len(shape) or any(s not in (-1, g) for s, g in zip(
                shape, given, strict=False))):
            out.append((f"{name} shape", list(given), ["any" if s == -1 else s for s in shape]))
    return out


def layer_arguments(layer: LayerRecord, function: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with what the layer record fixes added where they leave it out; a ``ValueError`` naming the
    first parameter that contradicts the record, with both values.

    See Also
    --------
    contradictions : every contradiction.
    refpos.cli.check_config.layer_of : the layer ``refpos check <kind> --config`` picks.
    """
    wrong = contradictions(layer, function, arguments)
    if wrong:
        name, given, own = wrong[0]
        raise ValueError(f"{name}: the call gives {given!r}, the config's {layer.stack} layer {layer.index} "
                         f"({layer.label}) has {own!r}")
    plan = MODEL_KINDS[layer.kind].plan(layer)
    return {**plan[1], **arguments}  # type: ignore[index]


def bound_tolerance(reference: np.ndarray, bound: Any) -> dict[str, Any]:
    """The value rule at the output's magnitude, float32's atol raised to the kind's bound (a float32 port's, per
    entry: its largest) and float64's to that bound at u = 2⁻⁵³ (the bounds are first order in u)."""
    entry = tolerance_value(reference, scale=float(np.abs(reference).max(initial=0.0)))
    largest = float(np.max(bound, initial=0.0))
    entry["float32"]["atol"] = round_up(max(entry["float32"]["atol"], largest))
    entry["float64"]["atol"] = round_up(max(entry["float64"]["atol"], largest * 2.0 ** -29))
    return entry


def _case(layer: LayerRecord, cid: str, name: str, label: str, function: str, arguments: dict[str, Any],
          shared: dict[str, Any]) -> Case:
    record = MODEL_KINDS[layer.kind]
    reference, bound = record.reference(layer, arguments)
    reference = np.asarray(reference, dtype=np.float64)
    arrays = {k: np.asarray(v) for k, v in arguments.items() if isinstance(v, np.ndarray)}
    args = []
    for parameter in PARAMETERS[function]:
        key, default = (parameter, None) if isinstance(parameter, str) else parameter
        args.append(In(key) if key in arrays else _plain(arguments.get(key, default)))
    outputs = {"out": Output(reference, bound_tolerance(reference, bound))}
    if layer.kind == "grid" and getattr(layer, "packed", False) and all(
            g % layer.merge == 0 for g in arguments["grid"]):
        # a clip too where its frames repeat the image's rows (Kimi K2.5's frame sinusoid is the model's width, not
        # the seeded table's: images only there); a class row seeded where each image starts with one (Inkling2)
        grids = [(1, *arguments["grid"])] + ([(2, *arguments["grid"])] if layer.clips and not layer.frames else [])
        if layer.class_row:
            arrays["class_row"] = np.random.default_rng(len(cid)).standard_normal(arrays["table"].shape[1])
        tokens = np.asarray(layer.tokens(arrays["table"], grids, arrays.get("class_row")))
        outputs["tokens"] = Output(tokens, bound_tolerance(tokens, bound))
        shared = {**shared, "tokens_of": [list(g) for g in grids]}
    fixed = sorted(record.plan(layer)[1])  # type: ignore[index]
    return Case(cid, layer.kind, function,
                f"{name}: {function} of its {layer.stack} layers {shared['layers']} ({layer.label}), {label}; the "
                f"record fixes {', '.join(fixed) or 'nothing'}, the other arguments seeded or the inputs it reads",
                {**shared, "call": call(function, ["out"], *args), "layer_call": label}, arrays, outputs,
                primary="out")


def _groups(positions: Any) -> list[tuple[LayerRecord, list[int]]]:
    """One record per distinct (stack, kind, parameters) of the kinds of :data:`MODEL_KINDS`."""
    groups: dict[tuple[str, str, str], tuple[LayerRecord, list[int]]] = {}
    for layer in positions:
        if layer.kind not in MODEL_KINDS:
            continue
        params = {k: v for k, v in layer.params().items() if k not in ("table_layer", "stage")}
        groups.setdefault((layer.stack, layer.kind, repr(sorted(params.items()))), (layer, []))[1].append(layer.index)
    return list(groups.values())


def kind_reasons(positions: Any) -> dict[str, str]:
    """``"<stack> layers […] (<label>)"`` -> why that layer record of a kind of :data:`MODEL_KINDS` has no case."""
    out = {}
    for layer, indices in _groups(positions):
        plan = MODEL_KINDS[layer.kind].plan(layer)
        if isinstance(plan, str):
            out[f"{layer.stack} layers {indices} ({layer.label})"] = plan
    return out


def kind_model_cases(positions: Any, name: str) -> list[Case]:
    """The cases of every vision and audio layer record of ``positions`` (:func:`refpos.model_positions`): one per
    distinct record and call of its kind's :class:`ModelKind`, ids ``<kind>/<model>/<stack>-<layer>/<label>``.

    See Also
    --------
    kind_reasons : the records without a case, and why.
    refpos.golden.cases.models.encoding_model_cases : the text kinds' cases of a model.
    """
    cases = []
    for layer, indices in _groups(positions):
        record = MODEL_KINDS[layer.kind]
        plan = record.plan(layer)
        if isinstance(plan, str):
            continue
        function, fixed = plan
        shared = {"model": name, "stack": layer.stack, "layers": indices, "record": _plain(layer.params()),
                  "reads": {use: list(source) for use, source in layer.reads}}
        key = f"{layer.kind}/{slug(name)}/{layer.stack}-{indices[0]}"
        rng = rng_for(key)
        for label, free in record.free(layer, rng):
            cases.append(_case(layer, f"{key}/{label}", name, label, function, {**free, **fixed}, shared))
    return cases



__all__ = ["bound_tolerance", "contradictions", "kind_model_cases", "kind_reasons", "layer_arguments"]
