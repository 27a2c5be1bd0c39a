"""Golden RoPE cases: per real model config, at boundaries, and the tiny layout vectors of docs/rope.md#in-numbers.

Per model (``model_cases``; also ``refpos golden model CONFIG.json``), for each RoPE of the config (one,
or one per layer type), three cases share the config and the resolved parameters:

* ``rope/<model>/frequencies`` — ``rope_frequencies(rope, seq_len)``: ``inv_freq`` and the attention
  factor ``A``; the manifest also records the resolved parameters, their provenance, unused config
  keys and DeepSeek's softmax multiplier.
* ``rope/<model>/cos-sin`` — ``rope_cos_sin(positions, rope, seq_len)`` at the probe positions, stored
  per pair ``(T, m)`` (``A·cos φ``, ``A·sin φ``); the layout's table repeats each column.
* ``rope/<model>/apply`` — ``apply_rope(x, positions, rope, seq_len)`` of a seeded ``x (T, D)``.

When the layers of a config differ (:func:`refpos.models.hf_layers`: layers without RoPE, a query scaled by
position), one more case per distinct layer kind, ``rope/<model>/layers/<layer type>-<kind>``: the query
that layer kind hands to attention, ``query_scale(p)·rotated(x)`` (or ``query_scale(p)·x`` without RoPE),
with the layer indices, the schedule line and the not-modelled report in its parameters.

Probe positions (docs/conventions.md#probe-positions): 0, 1, 2, 3, 7, 8, 255–257, 2047–2049, orig − 1, orig, orig + 1,
2·orig, 8191, 8192, 32767, 32768, 65536 + {0, 1, 511, 512}, 131071 and max − 1 below the declared
length, then a seeded block of consecutive positions filling 32 rows. ``seq_len`` is HF's
``max(position) + 1`` and is passed explicitly.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import numpy as np

import refpos
from refpos.golden import certify as cert
from refpos.golden.cases import N_PROBES, In, Param, as_xp, call, probe_positions, slug, to_np
from refpos.golden.entries import tolerance_frequencies, tolerance_rope, tolerance_value
from refpos.golden.manifest import Case, Output
from refpos.golden.model_cases import encoding_model_cases
from refpos.golden.rope_builders import apply_case, cos_sin_case
from refpos.pairs import split_pairs
from refpos.rope.scaling import softmax_multiplier

#: declared length used when a config has none (Gemma-4 defaults)
FALLBACK_MAX_POSITION = 131072


def model_configs() -> dict[str, Any]:
    """The real model configs: ``refpos/data/model_configs.json`` (each config.json with what HF 5.24.0
    resolves) and ``refpos/data/family_configs.json`` (the model families whose code fixes positions)."""
    data = resources.files("refpos").joinpath("data")
    configs = json.loads(data.joinpath("model_configs.json").read_text(encoding="utf8"))
    return {**configs, **json.loads(data.joinpath("family_configs.json").read_text(encoding="utf8"))}


#: refpos extensions of the adapter-contract dict, left out of the golden dicts at their default values
_EXTENSION_DEFAULTS = {"dynamic_rule": "hf", "softmax_mscale": False, "ntk_rule": "aware"}


def portable_params(rope: Any) -> dict[str, Any]:
    """The adapter-contract dict of ``rope`` without refpos-only keys at their defaults (portable to any adapter)."""
    return {k: v for k, v in rope.to_params().items() if _EXTENSION_DEFAULTS.get(k, object()) != v}


def declared_length(config: dict[str, Any], rope: Any) -> int:
    for value in (rope.max_position_embeddings, config.get("max_position_embeddings"), config.get("n_positions")):
        if isinstance(value, int) and value > 0:
            return value
    return FALLBACK_MAX_POSITION


def shared_x(head_dim: int, rows: int = N_PROBES) -> tuple[str, np.ndarray]:
    """The seeded input ``x (rows, D)`` shared by every model with head size ``D``."""
    return f"x_{rows}x{head_dim}", np.random.default_rng([5, head_dim]).standard_normal((rows, head_dim))


def _pairs(table: np.ndarray, layout: str) -> np.ndarray:
    """Per-pair columns ``(T, m)`` of a layout's cos/sin table ``(T, 2m)`` (the ``u`` channel of each pair)."""
    return split_pairs(table, layout, side="written")[0]


def rope_case_set(rope: Any, *, key: str, description: str, parameters: dict[str, Any],
                  positions: np.ndarray, seq_len: int | None) -> list[Case]:
    """frequencies, cos-sin and apply cases of one resolved RoPE (``key`` is the case id prefix)."""
    params = portable_params(rope)
    inv_freq, attention_factor = (to_np(a) for a in refpos.rope_frequencies(rope, seq_len=seq_len))
    attention_factor = np.float64(attention_factor)
    shared = {"model": parameters.get("model"), "layer_type": parameters.get("layer_type"), "rope": params,
              "seq_len": seq_len, "resolved_in": f"{key}/frequencies"}
    cases = [Case(f"{key}/frequencies", "rope", "rope_frequencies",
                  f"{description}: inverse frequencies and attention factor at seq_len {seq_len}",
                  {**parameters, "rope": params, "seq_len": seq_len,
                   "call": call("rope_frequencies", ["inv_freq", "attention_factor"], Param("rope"), Param("seq_len"))},
                  {},
                  {"inv_freq": Output(inv_freq, tolerance_frequencies(inv_freq),
                                      lambda: (cert.mp_inv_freq(params, seq_len), 0.0)),
                   "attention_factor": Output(attention_factor, tolerance_value(attention_factor),
                                              lambda: (cert.mp_attention_factor(params, seq_len), 0.0))})]
    cos, sin = (to_np(a) for a in refpos.rope_cos_sin(as_xp(positions), rope, seq_len=seq_len))
    cos, sin = _pairs(cos, rope.layout), _pairs(sin, rope.layout)

    memo: dict[str, tuple[list, list]] = {}

    def exact_tables() -> tuple[list, list]:  # evaluated once, shared by cos, sin and y
        if "tables" not in memo:
            w = cert.mp_inv_freq(params, seq_len)
            memo["tables"] = cert.mp_cos_sin(positions, w, cert.mp_attention_factor(params, seq_len))
        return memo["tables"]

    cases.append(cos_sin_case(f"{key}/cos-sin", f"{description}: A·cos and A·sin per pair at {positions.size} "
                              "probe positions", shared, positions, positions, (cos, sin), inv_freq,
                              attention_factor, exact_tables))
    name, x = shared_x(rope.head_dim, positions.size)
    cases.append(apply_case(f"{key}/apply", f"{description}: rotated x (T, D) at the probe positions", shared,
                            positions, positions, rope, params, seq_len, inv_freq, attention_factor, name, x,
                            exact_tables))
    return cases


def model_cases(config: dict[str, Any], name: str, *, positions: np.ndarray | None = None,
                seq_len: int | None = None, resolved_by_hf: dict[str, Any] | None = None,
                max_position: int | None = None, assume: dict[str, str] | None = None) -> list[Case]:
    """The per-model case set of a config.json: its RoPE (one set per layer type for per-layer configs), its
    layer kinds, and every layer kind of another encoding (:mod:`refpos.golden.model_cases`).

    ``max_position``: the probes go up to it instead of the config's declared length (e.g. 1048576 for a
    long-context extension); they are 32 rows whatever it is, so memory stays bounded. ``assume``: the
    conventions of a family the table does not know (:func:`refpos.model_positions`).
    """
    resolved = refpos.model_positions(config, assume=assume)
    cases = []
    for layer_type, rope in distinct_ropes(config, resolved).items():
        limit = declared_length(config, rope) if max_position is None else max_position
        key = "rope/" + slug(name) + ("" if layer_type is None else "/" + layer_type)
        pos = probe_positions(limit, rope.original_max_position_embeddings, key) if positions is None \
            else np.asarray(positions, dtype=np.int64)
        length = int(pos.max()) + 1 if seq_len is None and pos.size else seq_len
        parameters = {
            "model": name, "layer_type": layer_type, "config": config,
            "provenance": dict(rope.provenance), "unused_keys": list(rope.unused_keys), "notes": list(rope.notes),
            "softmax_multiplier": float(softmax_multiplier(rope)),
            "declared_length": limit,
        }
        if resolved_by_hf is not None:
            parameters["resolved_by_hf_5_24"] = resolved_by_hf
        cases += rope_case_set(rope, key=key, description=f"{name}" + (f" ({layer_type})" if layer_type else ""),
                               parameters=parameters, positions=pos, seq_len=length)
        if rope.mrope_section is not None and positions is None:  # multimodal probe layouts (3, T)
            from refpos.golden.mrope_cases import mrope_case_sets

            cases += mrope_case_sets(rope, config, key=key, description=name, parameters=parameters,
                                     params=portable_params(rope), shared_x=shared_x)
    return (cases + layer_kind_cases(config, name, positions, seq_len, max_position, resolved=resolved)
            + encoding_model_cases(resolved, name, probes=positions))


def distinct_ropes(config: dict[str, Any], resolved: Any) -> dict[str | None, Any]:
    """The RoPE of each layer type of a resolution (key ``None`` when one RoPE serves every layer); a config
    without a layer count resolves its RoPE per layer type without a schedule."""
    ropes = {layer.layer_type: layer.rope for layer in resolved if layer.kind in ("rope", "mrope")}
    if not ropes:
        return {}
    per_type = refpos.models.hf_layer_types(config)
    if not per_type:
        return {None: next(iter(ropes.values()))}
    return {layer_type: ropes[layer_type] for layer_type in per_type if layer_type in ropes}


def model_report(config: dict[str, Any], assume: dict[str, str] | None = None) -> dict[str, str]:
    """What the cases of ``config`` do not model: key → what it does, and each refused layer with its reason
    (empty: complete)."""
    resolved = refpos.model_positions(config, assume=assume)
    report = {**resolved.not_modelled, **resolved.unknown}
    for layer in resolved:
        if layer.kind == "refused":
            report.setdefault(f"{layer.stack} layer {layer.index}", f"refused: {layer.reason}")
    return report


def layer_kind_cases(config: dict[str, Any], name: str, positions: np.ndarray | None,
                     seq_len: int | None, max_position: int | None = None, *, resolved: Any = None) -> list[Case]:
    """One case per distinct layer kind when the RoPE layers of ``config`` differ (see the module docstring);
    ``max_position`` as in :func:`model_cases`."""
    resolved = refpos.model_positions(config) if resolved is None else resolved
    if not resolved.scheduled:
        return []  # the config does not say how many layers it has: one RoPE per layer type, as above
    layers = [layer for layer in resolved if layer.kind in ("rope", "mrope", "none", "no_attention")]
    kinds: dict[tuple[str | None, str], list[int]] = {}
    for layer in layers:
        kinds.setdefault((layer.layer_type, _old_label(layer)), []).append(layer.index)
    ropes = [layer.rope for layer in layers if layer.kind in ("rope", "mrope")]
    if not ropes or (len(kinds) == 1 and next(iter(kinds))[1] == "rope"):
        return []  # no layer rotates, or every layer rotates alike: the cases above hold it
    schedule = _decoder_summary(resolved)
    ref = ropes[0]
    cases = []
    for (layer_type, kind), indices in kinds.items():
        layer = next(r for r in layers if r.index == indices[0])
        if not layer.attention:
            continue  # no attention, no query: the schedule in the other cases' parameters names these layers
        key = f"rope/{slug(name)}/layers/{layer_type or 'all'}-{kind}"
        limit = declared_length(config, ref) if max_position is None else max_position
        pos = probe_positions(limit, ref.original_max_position_embeddings, key) \
            if positions is None else np.asarray(positions, dtype=np.int64)
        length = int(pos.max()) + 1 if seq_len is None and pos.size else seq_len
        x_name, x = shared_x(ref.head_dim, pos.size)
        scale = np.ones(pos.shape) if layer.query_scale is None else layer.query_scale(pos)  # (T,)
        rope = getattr(layer, "rope", None)
        if rope is None:
            y, inv_freq, factor = x * scale[:, None], np.zeros(1), 1.0
        else:
            y = to_np(refpos.apply_rope(as_xp(x), as_xp(pos), rope, seq_len=length)) * scale[:, None]
            inv, factor = refpos.rope_frequencies(rope, seq_len=length)
            inv_freq = to_np(inv)
        magnitude = np.maximum(float(factor) * np.sqrt(2) * np.abs(x).max(-1), np.abs(x).max(-1)) * scale
        parameters = {"model": name, "layer_type": layer_type, "kind": kind, "layers": indices,
                      "schedule": schedule, "not_modelled": dict(resolved.not_modelled),
                      "query_scale": None if layer.query_scale is None else layer.query_scale.as_dict(),
                      "seq_len": length, "rope": None if rope is None else portable_params(rope)}
        cases.append(Case(key, "rope", None,
                          f"{name}: the query of its {kind} layers ({len(indices)} of {len(layers)}) at the "
                          "probe positions", parameters, {"x": x, "positions": pos},
                          {"y": Output(y, tolerance_rope(pos, inv_freq, magnitude))}, shared_inputs={"x": x_name}))
    return cases


def _old_label(layer: Any) -> str:
    """The kind a schedule names a layer by (``rope``, ``none+scale``, ``mamba``)."""
    return layer.label.replace("mrope", "rope")


def _decoder_summary(resolved: Any) -> str:
    """The decoder schedule line, as :meth:`refpos.LayerSchedule.summary` writes it."""
    line = next(line for line in resolved.summary().splitlines() if line.startswith(resolved.stacks[-1]))
    return line.split(" ", 1)[1].replace("mrope", "rope")


def all_model_cases() -> list[Case]:
    cases = []
    for name, entry in model_configs().items():
        cases += model_cases(entry["config"], name, resolved_by_hf=entry.get("resolved_by_hf_5_24"))
    return cases


# ------------------------------------------------------------------------------------ boundaries
#: the dynamic-NTK example (docs/extrapolation.md#dynamic-ntk): Llama-2 geometry with a dynamic factor 2
DYNAMIC_CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                  "max_position_embeddings": 4096, "rope_theta": 10000.0,
                  "rope_scaling": {"type": "dynamic", "factor": 2.0}}
DYNAMIC_HISTORY = (10, 8192, 6000, 4096, 4095, 5000, 9000, 100)


def _frequency_case(rope: Any, case_id: str, description: str, seq_len: int | None,
                    parameters: dict[str, Any]) -> Case:
    params = portable_params(rope)
    inv_freq, attention_factor = (to_np(a) for a in refpos.rope_frequencies(rope, seq_len=seq_len))
    attention_factor = np.float64(attention_factor)
    return Case(case_id, "rope", "rope_frequencies", description,
                {**parameters, "rope": params, "seq_len": seq_len,
                 "call": call("rope_frequencies", ["inv_freq", "attention_factor"], Param("rope"), Param("seq_len"))},
                {},
                {"inv_freq": Output(inv_freq, tolerance_frequencies(inv_freq),
                                    lambda: (cert.mp_inv_freq(params, seq_len), 0.0)),
                 "attention_factor": Output(attention_factor, tolerance_value(attention_factor),
                                            lambda: (cert.mp_attention_factor(params, seq_len), 0.0))})


def boundary_cases() -> list[Case]:
    """LongRoPE switch at original − 1 / original / original + 1, dynamic-NTK growth and history."""
    cases = []
    configs = model_configs()
    for name in ("microsoft/Phi-3-mini-128k-instruct", "microsoft/Phi-3.5-mini-instruct",
                 "microsoft/Phi-4-mini-instruct"):
        rope = refpos.models.from_hf_config(configs[name]["config"])
        orig = rope.original_max_position_embeddings
        for length in (orig - 1, orig, orig + 1):
            branch = "long" if length > orig else "short"
            cases.append(_frequency_case(
                rope, f"rope-boundary/{slug(name)}/longrope-L{length}",
                f"{name}: LongRoPE at seq_len {length} uses the {branch} factors (long iff L > {orig})",
                length, {"model": name, "config": configs[name]["config"], "branch": branch}))
        if name == "microsoft/Phi-3.5-mini-instruct":
            positions = np.array([0, 1, 2, 3, 100, orig - 1], dtype=np.int64)
            _, x = shared_x(rope.head_dim)
            x = x[: positions.size]
            for length in (orig, orig + 1):
                y = to_np(refpos.apply_rope(as_xp(x), as_xp(positions), rope, seq_len=length))
                inv_freq, attention_factor = refpos.rope_frequencies(rope, seq_len=length)
                params = portable_params(rope)
                magnitude = np.maximum(float(attention_factor) * np.abs(x).max(-1) * np.sqrt(2), np.abs(x).max(-1))
                cases.append(Case(
                    f"rope-boundary/{slug(name)}/apply-L{length}", "rope", "apply_rope",
                    f"{name}: the same positions rotated at seq_len {length}: the factor set follows the "
                    "sequence length, not the position", {"model": name, "rope": params, "seq_len": length,
                                                          "call": call("apply_rope", ["y"], In("x"), In("positions"),
                                                                       Param("rope"), Param("seq_len"))},
                    {"x": x, "positions": positions},
                    {"y": Output(y, tolerance_rope(positions, to_np(inv_freq), magnitude),
                                 lambda x=x, params=params, length=length, positions=positions: cert.mp_apply(
                                     x, params, *cert.mp_cos_sin(positions, cert.mp_inv_freq(params, length),
                                                                 cert.mp_attention_factor(params, length))))}))
    rope = refpos.models.from_hf_config(DYNAMIC_CONFIG)
    for length in (None, 4096, 4097, 5000, 6000, 8192, 9000):
        cases.append(_frequency_case(
            rope, f"rope-boundary/dynamic-ntk/L{length}",
            f"dynamic NTK (factor 2, L_max 4096) at seq_len {length}: plain RoPE up to L_max, "
            "then the base grows", length, {"config": DYNAMIC_CONFIG}))
    state = refpos.rope.DynamicNTKState(rope)
    thetas, tables = [], []
    for length in DYNAMIC_HISTORY:
        tables.append(to_np(state.update(length)))
        thetas.append(state.theta_used)
    inv = np.stack(tables)  # (calls, d/2)
    cases.append(Case(
        "rope-boundary/dynamic-ntk/hf-call-history", "rope", "rope_dynamic_ntk_frequencies",
        "transformers' stateful dynamic NTK over the calls "
        f"{list(DYNAMIC_HISTORY)}: growth, no regrow, no reset at exactly L_max, reset below it"
        " (docs/extrapolation.md#dynamic-ntk)",
        {"config": DYNAMIC_CONFIG, "rope": portable_params(rope), "history": list(DYNAMIC_HISTORY),
         "call": call("rope_dynamic_ntk_frequencies", ["inv_freq"], Param("rope"), Param("history"))}, {},
        {"inv_freq": Output(inv, tolerance_frequencies(inv)),
         "theta_used": Output(np.array(thetas), tolerance_value(np.array(thetas)))}))
    return cases


# --------------------------------------------------------------------------------- tiny layouts
#: the tiny vector of docs/rope.md#in-numbers: D = 8, θ = 1e4, p = 3, x = (1, …, 8)/8
TINY_LAYOUTS = {
    "half": {"layout": "half"},
    "interleaved": {"layout": "interleaved"},
    "deinterleaved": {"layout": "deinterleaved"},
    "head-d4-half": {"layout": "half", "rotary_dim": 4, "placement": "first"},
    "tail-d4-half": {"layout": "half", "rotary_dim": 4, "placement": "last"},
    "tail-d4-interleaved": {"layout": "interleaved", "rotary_dim": 4, "placement": "last"},
    "proportional-prf0.5": {"layout": "half", "rope_type": "proportional", "partial_rotary_factor": 0.5},
}


def layout_cases() -> list[Case]:
    x = (np.arange(1, 9, dtype=np.float64) / 8)[None, :]  # (T=1, D=8)
    positions = np.array([3], dtype=np.int64)
    cases = []
    for name, extra in TINY_LAYOUTS.items():
        params = {"rope_type": "default", "rope_theta": 10000.0, "head_dim": 8, **extra}
        rope = refpos.rope_config_from_params(params)
        params = portable_params(rope)
        y = to_np(refpos.apply_rope(as_xp(x), as_xp(positions), rope))
        inv_freq, _ = refpos.rope_frequencies(rope)

        def exact(params: dict = params) -> tuple[np.ndarray, np.ndarray]:
            c, s = cert.mp_cos_sin(positions, cert.mp_inv_freq(params), 1)
            return cert.mp_apply(x, params, c, s)

        cases.append(Case(f"rope-layout/{name}", "rope", "apply_rope",
                          f"the tiny vector of docs/rope.md#in-numbers: D = 8, θ = 1e4, p = 3, x = (1..8)/8, {name}",
                          {"rope": params, "seq_len": None,
                           "call": call("apply_rope", ["y"], In("x"), In("positions"), Param("rope"),
                                        Param("seq_len"))},
                          {"x": x, "positions": positions},
                          {"y": Output(y, tolerance_rope(positions, to_np(inv_freq), np.array([2.0])), exact)}))
    return cases
