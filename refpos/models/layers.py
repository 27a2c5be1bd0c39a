r"""Per-layer positions of a transformers config: which layers rotate, with which RoPE, and how the query
is scaled by position.

:func:`hf_layers` lists every decoder layer of a config; :func:`hf_layer` gives one. Each
:class:`HFLayer` has ``.rope`` (a :class:`~refpos.RopeConfig`, or ``None`` for a layer without RoPE) and
``.query_scale(positions)`` (the per-position multiplier of the query; 1.0 where the model has none).
The schedule follows the family table (:mod:`refpos.models.families`):

* ``rope_layers = "no_rope_layers"`` (Llama 4, SmolLM3): ``no_rope_layers[i] == 1`` rotates; absent, layer
  ``i`` rotates unless ``(i + 1) % no_rope_layer_interval == 0`` (interval default 4);
* ``"sliding"`` (Cohere2 / Command-A, AFMoE): only ``sliding_attention`` layers rotate, and none when
  ``sliding_window`` is null;
* ``"sliding_or_no_window"`` (EXAONE-4): ``sliding_attention`` layers rotate, or every layer when
  ``sliding_window`` is null;
* per-layer-type rope dicts (Gemma 3, Gemma 4, …): layer ``i`` takes the RoPE of ``layer_types[i]`` (a
  null entry: no RoPE).

* layers without attention (the family's ``no_attention`` layer types: Mamba, linear attention,
  convolutions in Qwen3-Next, Bamba, LFM2, MiniMax, ...): no attention, so no positions; ``.rope`` is
  ``None``, ``.attention`` is false and the schedule names their kind (``linear ×36, rope ×12``).

``layer_types`` is read from the config; when it is absent, the family's ``layer_pattern`` fills it as
the model's config class does. A family that needs the types to know which layers rotate and has no
pattern is an error naming ``layer_types``; a family whose types only say which layers have no attention
resolves every layer with RoPE and reports that gap as not modelled.

Query scales (the multiplier of ``q`` after its rotation, at position ``p``):

.. math::
    \text{llama4\_temperature (NoPE layers, when attn\_temperature\_tuning):}\quad
        1 + a \ln\bigl(1 + \lfloor (p + 1) / f \rfloor\bigr), \quad a = \text{attn\_scale}\ (0.1),\;
        f = \text{floor\_scale}\ (8192)

    \text{llama\_4\_scaling\_beta (every layer):}\quad 1 + \beta \ln\bigl(1 + \lfloor p / L_0 \rfloor\bigr),
        \quad L_0 = \text{rope\_parameters.original\_max\_position\_embeddings}

(transformers' ``Llama4TextAttention.forward`` and ``get_llama_4_attn_scale`` in ``ministral3``; Llama 4
counts ``p`` as the index in the cache, which equals the position for ordinary decoding.)

Examples
--------
>>> cfg = {"model_type": "llama4_text", "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128,
...        "num_hidden_layers": 8, "rope_theta": 5e5, "max_position_embeddings": 8192}
>>> schedule = hf_layers(cfg)
>>> schedule.summary()
'layers 0-7: rope ×6 (0, 1, 2, 4, 5, 6), none+scale ×2 (every 4th)'
>>> [float(s) for s in schedule[3].query_scale([0, 8190, 8191, 16383])]
[1.0, 1.0, 1.0693147180559945, 1.109861228866811]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refpos.models.families import Family, family_of
from refpos.models.hf import hf_layer_types, load_hf_config, resolve_rope, text_config_of
from refpos.rope.config import RopeConfig
from refpos.validation import check_bool, check_float, check_int, check_size

_LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
#: the most layers a schedule holds (models have at most a few hundred)
MAX_LAYERS = 2**16
#: keys the layer schedule and query scales read (they leave the not-modelled report once resolved)
_SCHEDULE_KEYS = ("layer_types", "no_rope_layers", "no_rope_layer_interval", "sliding_window_pattern",
                  "global_attn_every_n_layers", "attn_temperature_tuning", "floor_scale", "attn_scale")


@dataclass(frozen=True)
class HFLayer:
    """What decoder layer ``index`` does with positions."""

    index: int
    layer_type: str | None
    rope: RopeConfig | None
    #: (rule, first parameter, second parameter) of the query scale, or None
    scale: tuple[str, float, float] | None = None
    #: the kind of a layer without attention (``"linear"``, ``"mamba"``, ``"conv"``, ...), or None
    mixer: str | None = None

    @property
    def attention(self) -> bool:
        """False for a layer without attention (and so without positions)."""
        return self.mixer is None

    @property
    def kind(self) -> str:
        """``"rope"`` or ``"none"`` (attention without RoPE), with ``+scale`` when the query is scaled by
        position; a layer without attention: its mixer (``"linear"``, ``"mamba"``, ...)."""
        if self.mixer is not None:
            return self.mixer
        return ("rope" if self.rope is not None else "none") + ("+scale" if self.scale else "")

    def query_scale(self, positions: Any) -> np.ndarray:
        """Per-position multiplier of the query (float64, the shape of ``positions``); 1.0 without a rule."""
        p = np.asarray(positions)
        if p.dtype.kind not in "iu":
            raise TypeError(f"positions must be integers, got dtype {p.dtype}")
        if p.size and p.min() < 0:
            raise ValueError(f"positions must be >= 0, got {int(p.min())}")
        p = p.astype(np.float64)
        if self.scale is None:
            return np.ones_like(p)
        rule, first, second = self.scale
        if rule == "llama4_temperature":  # first = attn_scale a, second = floor_scale f
            return 1.0 + first * np.log1p(np.floor((p + 1.0) / second))
        return 1.0 + first * np.log1p(np.floor(p / second))  # llama_4_scaling_beta: β, L_0


@dataclass(frozen=True)
class LayerSchedule:
    """Every decoder layer of a config, and what the resolution does not model."""

    layers: tuple[HFLayer, ...]
    family: Family | None
    not_modelled: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[HFLayer]:
        return iter(self.layers)

    def __getitem__(self, index: int) -> HFLayer:
        return self.layers[index]

    @property
    def complete(self) -> bool:
        """True when nothing the config asks for is left unmodelled."""
        return not self.not_modelled

    def kinds(self) -> dict[tuple[str | None, str], list[int]]:
        """Layer indices per distinct (layer type, kind), in order of first appearance."""
        out: dict[tuple[str | None, str], list[int]] = {}
        for layer in self.layers:
            out.setdefault((layer.layer_type, layer.kind), []).append(layer.index)
        return out

    def summary(self) -> str:
        """One line, e.g. ``layers 0-47: rope ×36, none ×12 (every 4th)``."""
        counts: dict[str, list[int]] = {}
        for layer in self.layers:
            counts.setdefault(layer.kind, []).append(layer.index)
        parts = []
        for kind, indices in counts.items():
            part = f"{kind} ×{len(indices)}"
            if len(counts) > 1 and len(indices) > 1:
                step = indices[1] - indices[0]
                if all(b - a == step for a, b in itertools.pairwise(indices)) \
                        and indices[0] == step - 1 and step > 1:
                    part += f" (every {_ordinal(step)})"
                elif len(indices) <= 6:
                    part += " (" + ", ".join(map(str, indices)) + ")"
            parts.append(part)
        return f"layers 0-{len(self.layers) - 1}: " + ", ".join(parts)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


class LayerCountMissing(ValueError):
    """The config does not say how many layers it has: no schedule can be built (a ``ValueError``, so bad
    input stays one kind of error; callers that can do without a schedule catch this class)."""


def _layer_count(cfg: Mapping[str, Any]) -> int:
    for key in _LAYER_COUNT_KEYS:
        if cfg.get(key) is not None:  # the schedule holds a record and list entries per layer (~200 bytes)
            return check_size(key, cfg[key], maximum=MAX_LAYERS, bytes_each=200, what="layer schedule")
    raise LayerCountMissing("num_hidden_layers: the config does not say how many layers it has "
                     f"(none of {list(_LAYER_COUNT_KEYS)})")


def _layer_types(cfg: Mapping[str, Any], family: Family | None, n: int) -> list[str] | None:
    """The config's ``layer_types``, or the family's pattern filling it; None when neither says."""
    value = cfg.get("layer_types")
    if value is not None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError("layer_types must be a list of str")
        if len(value) != n:
            raise ValueError(f"layer_types has {len(value)} entries for {n} layers")
        return list(value)
    pattern = None if family is None else family.layer_pattern
    if pattern is None:
        return None
    if pattern.indices is not None:  # the config lists the full-attention layers (Bamba, LFM2)
        listed = cfg.get(pattern.indices)
        if listed is None:
            return None if pattern.absent is None else [pattern.absent] * n
        if not isinstance(listed, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n
                                               for i in listed):
            raise ValueError(f"{pattern.indices} must be a list of layer indices in [0, {n}), got {listed!r}")
        return ["full_attention" if i in listed else pattern.other for i in range(n)]
    key = pattern.key
    every = pattern.every if key is None or cfg.get(key) is None else check_int(key, cfg[key], minimum=1)
    return ["full_attention" if (i + 1) % every == 0 else pattern.other for i in range(n)]


def _rotates(cfg: Mapping[str, Any], family: Family | None, types: list[str | None], n: int) -> list[bool]:
    rule = "all" if family is None else family.rope_layers
    if rule == "no_rope_layers":
        flags = cfg.get("no_rope_layers")
        if flags:
            if not isinstance(flags, list) or len(flags) != n or any(f not in (0, 1) for f in flags):
                raise ValueError(f"no_rope_layers must be a list of {n} entries 0 or 1 (1 = RoPE), got {flags!r}")
            return [bool(f) for f in flags]
        interval = check_int("no_rope_layer_interval", cfg.get("no_rope_layer_interval", 4), minimum=1)
        return [(i + 1) % interval != 0 for i in range(n)]
    window = cfg.get("sliding_window") is not None
    if rule == "sliding":
        return [window and t == "sliding_attention" for t in types]
    if rule == "sliding_or_no_window":
        return [not window or t == "sliding_attention" for t in types]
    return [True] * n


def _tuning_on(value: Any) -> bool:
    """Llama 4's ``attn_temperature_tuning``: a bool; Llama-4-Scout's base config ships ``4``, which transformers
    4.51 read by its truth value (5.24's config class refuses a non-bool), and so does refpos."""
    if isinstance(value, bool) or (isinstance(value, int) and value >= 0):
        return bool(value)
    raise TypeError(f"attn_temperature_tuning must be a bool (or a non-negative int, read as true unless 0), "
                    f"got {value!r}")


def _scale(cfg: Mapping[str, Any], family: Family | None, rotates: bool,
           rope_dict: Mapping[str, Any]) -> tuple[str, float, float] | None:
    rule = None if family is None else family.query_scale
    if rule == "llama4_temperature" and not rotates and _tuning_on(cfg.get("attn_temperature_tuning", True)):
        return (rule, check_float("attn_scale", cfg.get("attn_scale", 0.1)),
                check_float("floor_scale", cfg.get("floor_scale", 8192), positive=True))
    if rule == "llama_4_scaling_beta" and rope_dict.get("llama_4_scaling_beta") is not None:
        beta = check_float("llama_4_scaling_beta", rope_dict["llama_4_scaling_beta"])
        l0 = rope_dict.get("original_max_position_embeddings")
        if l0 is None:
            raise ValueError("llama_4_scaling_beta needs original_max_position_embeddings in the rope dict")
        return (rule, beta, float(check_int("original_max_position_embeddings", l0, minimum=1)))
    return None


def hf_layers(config_or_path: Any, *, strict: bool = False) -> LayerSchedule:
    """Every decoder layer of a transformers config: its RoPE (or None) and its query scale.

    Parameters
    ----------
    config_or_path : mapping or path
        As :func:`refpos.from_hf_config`.
    strict : bool
        Raise ``ValueError`` when something the config asks for is not modelled.

    Returns
    -------
    LayerSchedule (a sequence of :class:`HFLayer`) with ``not_modelled`` (key → what it does), ``notes``
    and ``summary()``.
    """
    check_bool("strict", strict)
    full = load_hf_config(config_or_path)
    cfg, prefix = text_config_of(full)
    model_type = cfg.get("model_type")
    family = family_of(model_type if isinstance(model_type, str) else None)
    n = _layer_count(cfg)
    per_type = hf_layer_types(full)
    needs_types = bool(per_type) or (family is not None and family.rope_layers in ("sliding", "sliding_or_no_window"))
    found_types = _layer_types(cfg, family, n)
    problems: dict[str, None] = {}
    not_modelled: dict[str, str] = {}
    if found_types is None and needs_types:
        raise ValueError("layer_types: absent, and refpos does not know how this model_type fills it; "
                         "give layer_types in the config")
    unplaced = None  # a family with layers without attention, and no layer_types saying which they are
    if found_types is None and family is not None and family.no_attention:
        kinds = "/".join(sorted({kind for _, kind in family.no_attention}))
        unplaced = (f"{family.model_type}: its {kinds} layers have no attention (no positions), but the config has "
                    "no layer_types to say which: every layer is resolved as attention with RoPE")
    types: list[str | None] = list(found_types) if found_types is not None else [None] * n
    mixers = [None if family is None else family.no_attention_kind(t) for t in types]
    rotates = [r and m is None for r, m in zip(_rotates(cfg, family, types, n), mixers, strict=True)]
    ropes: dict[str | None, RopeConfig | None] = {}
    notes: list[str] = []
    for layer_type in dict.fromkeys(t if per_type else None for t, m in zip(types, mixers, strict=True) if m is None):
        try:
            rope, found = resolve_rope(full, layer_type, per_layer=True)
        except ValueError as exc:
            if "has no RoPE (null)" not in str(exc):
                raise
            ropes[layer_type] = None
            continue
        ropes[layer_type] = rope
        problems.update(dict.fromkeys(found))
        not_modelled.update(rope.not_modelled)
        notes += [note for note in rope.notes if note not in notes]
    for key in _SCHEDULE_KEYS:
        not_modelled.pop(prefix + key, None)
        problems.pop(prefix + key, None)
    if unplaced is not None:
        gaps = [not_modelled[prefix + "model_type"]] if prefix + "model_type" in not_modelled else []
        not_modelled[prefix + "model_type"] = "; ".join([*gaps, unplaced])
        problems[prefix + "model_type"] = None
    rope_dict = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if family is not None and family.query_scale == "llama_4_scaling_beta":
        for key in ("rope_parameters.llama_4_scaling_beta", "rope_scaling.llama_4_scaling_beta"):
            not_modelled.pop(prefix + key, None)
            problems.pop(prefix + key, None)
    rope_dict = rope_dict if isinstance(rope_dict, Mapping) else {}
    layers = tuple(
        HFLayer(i, types[i], ropes[types[i] if per_type else None] if rotates[i] else None,
                None if mixers[i] else _scale(cfg, family, rotates[i], rope_dict), mixers[i])
        for i in range(n))
    if strict and problems:
        raise ValueError(f"strict: not modelled or unused: {list(problems)} (strict=False resolves and reports them)")
    return LayerSchedule(layers, family, not_modelled, tuple(notes))


def hf_layer(config_or_path: Any, index: int) -> HFLayer:
    """What decoder layer ``index`` of a transformers config does with positions (see :func:`hf_layers`)."""
    schedule = hf_layers(config_or_path)
    index = check_int("index", index, minimum=0)
    if index >= len(schedule):
        raise ValueError(f"index must be < {len(schedule)} (the number of layers), got {index}")
    return schedule[index]
