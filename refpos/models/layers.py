r"""Per-layer positions of a transformers config: which layers rotate, with which RoPE, and how the query
is scaled by position.

:func:`hf_layers` lists every decoder layer of a config; :func:`hf_layer` gives one. Each
:class:`HFLayer` has ``.rope`` (a :class:`~refpos.RopeConfig`, or ``None`` for a layer without RoPE) and
``.query_scale(...)`` (the multiplier of the query at a call's tokens, read from the input its rule reads:
Llama 4's from the token's slot, ``cache_position=``; 1.0 where the model has none).
The schedule follows the family table (:mod:`refpos.models.families`):

* ``rope_layers = "no_rope_layers"`` (Llama 4, SmolLM3): ``no_rope_layers[i] == 1`` rotates; absent, layer
  ``i`` rotates unless ``(i + 1) % no_rope_layer_interval == 0`` (interval default 4);
* ``"sliding"`` (Cohere2 / Command-A, AFMoE): only ``sliding_attention`` layers rotate, and none when
  ``sliding_window`` is null;
* ``"sliding_or_dense_prefix"`` (Cohere2-MoE): as ``"sliding"``, and every layer whose MLP is dense
  (``mlp_layer_types``) when ``prefix_dense_sliding_window_pattern`` is 1;
* ``"sliding_or_no_window"`` (EXAONE-4): ``sliding_attention`` layers rotate, or every layer when
  ``sliding_window`` is null;
* per-layer-type rope dicts (Gemma 3, Gemma 4, …): layer ``i`` takes the RoPE of ``layer_types[i]`` (a
  null entry: no RoPE).
* ``"theta_list"`` (Granite-SWA): layer ``i`` rotates at base ``layer_rope_theta[i]``, none where it is 0;
  ``"theta_flags"`` (Muse Spark, Muse Glimmer): a non-zero entry rotates at the config's one base, 0 none;
  ``"scaling_list"`` (Molmo2): every layer rotates, those of ``rope_scaling_layers`` with the rope dict's scaling,
  the others with plain RoPE at the same base.

* layers without attention (the family's ``no_attention`` layer types: Mamba, linear attention,
  convolutions in Qwen3-Next, Bamba, LFM2, MiniMax, ...): no attention, so no positions; ``.rope`` is
  ``None``, ``.attention`` is false and the schedule names their kind (``linear ×36, rope ×12``).

``layer_types`` is read from the config; when it is absent, the family's ``layer_pattern`` fills it as
the model's config class does. A family that needs the types to know which layers rotate and has no
pattern is an error naming ``layer_types``; a family whose types only say which layers have no attention
resolves every layer with RoPE and reports that gap as not modelled.

Query scales (the multiplier of ``q`` after its rotation, at position ``p``) are the records of
:mod:`refpos.models.query_scales`: Llama 4's temperature on its layers without RoPE, Ministral-3's
``llama_4_scaling_beta`` on every layer.

Examples
--------
>>> cfg = {"model_type": "llama4_text", "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128,
...        "num_hidden_layers": 8, "rope_theta": 5e5, "max_position_embeddings": 8192}
>>> schedule = hf_layers(cfg)
>>> schedule.summary()
'layers 0-7: rope ×6 (0, 1, 2, 4, 5, 6), none+scale ×2 (every 4th)'
>>> [float(s) for s in schedule[3].query_scale(cache_position=[0, 8190, 8191, 16383])]
[1.0, 1.0, 1.0693147180559945, 1.109861228866811]
>>> schedule[3].query_scale([0, 1, 2, 32767], cache_position=[0, 1, 2, 5]).tolist()  # the slot, not the id
[1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from refpos.models.families import Family, family_of
from refpos.models.hf import check_rope_family, hf_layer_types, resolve_rope
from refpos.models.hf_files import as_language_view
from refpos.models.query_scales import QUERY_SCALES, QueryScale
from refpos.models.schedule import (
    DENSE_PREFIX_KEYS,
    LAYER_THETA_KEY,
    SCALING_LAYERS_KEY,
    LayerCountMissing,
    layer_count,
    layer_thetas,
    layer_types,
    rotating,
    scaled_layers,
    summary_line,
)
from refpos.models.sources import Given
from refpos.models.stages import stage_note, stage_plan
from refpos.models.view import ConfigView
from refpos.rope.config import RopeConfig
from refpos.rope.rules import PLAIN
from refpos.validation import check_bool, check_int

#: keys the layer schedule reads (they leave the not-modelled report once resolved; a family's query-scale keys
#: are its rule's, :mod:`refpos.models.query_scales`)
SCHEDULE_KEYS = ("layer_types", "no_rope_layers", "no_rope_layer_interval", "sliding_window_pattern",
                  "global_attn_every_n_layers")


@dataclass(frozen=True)
class HFLayer:
    """What decoder layer ``index`` does with positions."""

    index: int
    layer_type: str | None
    rope: RopeConfig | None
    #: the query scale of the layer (:mod:`refpos.models.query_scales`), or None
    scale: QueryScale | None = None
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

    def query_scale(self, positions: Any = None, *, cache_position: Any = None,
                    attention_mask: Any = None) -> np.ndarray:
        """The multiplier of the query at a call's tokens (float64, one per token; 1.0 without a rule), read
        from the input the rule reads (:attr:`refpos.models.query_scales.QueryScaleRule.reads`): Llama 4's
        temperature from the token's slot (``cache_position``, or the last tokens of ``attention_mask``), never
        from the position ids; a call that gives only ids to such a layer is refused."""
        given = Given.of(positions=positions, cache_position=cache_position, attention_mask=attention_mask)
        if self.scale is None:
            return np.ones(given.shape, dtype=np.float64)
        read = given.read(self.scale.reads, "query", who=f"layer {self.index} ({self.kind}, scale)")
        return self.scale(np.asarray(read))


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
        return summary_line([(layer.index, layer.kind) for layer in self.layers])


def _scale(cfg: Mapping[str, Any], family: Family | None, rotates: bool,
           rope_dict: Mapping[str, Any]) -> QueryScale | None:
    """The family's query scale at a layer (``rotates``: the layer has RoPE), or None."""
    rule = None if family is None else family.query_scale
    return None if rule is None else QUERY_SCALES[rule].read(cfg, rope_dict, rotates=rotates)


def hf_layers(config_or_path: Any, *, strict: bool = False) -> LayerSchedule:
    """Every decoder layer of a transformers config: its RoPE (or None) and its query scale.

    Parameters
    ----------
    config_or_path : mapping or path
        As :func:`refpos.models.from_hf_config`.
    strict : bool
        Raise ``ValueError`` when something the config asks for is not modelled.

    Returns
    -------
    LayerSchedule (a sequence of :class:`HFLayer`) with ``not_modelled`` (key → what it does), ``notes``
    and ``summary()``.
    """
    check_bool("strict", strict)
    view = as_language_view(config_or_path)
    cfg = view.raw
    model_type = cfg.get("model_type")
    family = family_of(model_type if isinstance(model_type, str) else None)
    encoding = "rope" if family is None else check_rope_family(family, cfg, ("rope", "none", "no_attention"))
    if encoding == "no_attention":
        raise ValueError(f"model_type {family.model_type!r} has no attention layers: there are no positions to "
                         "resolve (refpos.model_positions lists its layers)")
    schedule, problems = layer_schedule(view, family, rope_on=encoding == "rope")
    if strict and problems:
        raise ValueError(f"strict: not modelled or unused: {problems} (strict=False resolves and reports them)")
    return schedule


def layer_schedule(view: ConfigView, family: Family | None, *,
                   rope_on: bool = True) -> tuple[LayerSchedule, list[str]]:
    """The schedule of the language model's config section ``view`` with the given family row, and what
    ``strict`` refuses in it.

    ``rope_on=False``: the family's attention has no positions (Jamba, Kimi-Linear): no RoPE is resolved and no
    layer rotates; layers without attention are found as for any family.
    """
    cfg, prefix = view.raw, view.path
    n = layer_count(cfg, family)
    per_type = hf_layer_types(view)
    needs_types = bool(per_type) or (family is not None and family.rope_layers in (
        "sliding", "sliding_or_no_window", "sliding_or_dense_prefix"))
    found_types = layer_types(cfg, family, n)
    problems: dict[str, None] = {}
    not_modelled: dict[str, str] = {}
    if found_types is None and needs_types and rope_on:
        raise ValueError("layer_types: absent, and refpos does not know how this model_type fills it; "
                         "give layer_types in the config")
    unplaced = None  # a family with layers without attention, and no layer_types saying which they are
    if found_types is None and family is not None and family.no_attention:
        kinds = "/".join(sorted({kind for _, kind in family.no_attention}))
        unplaced = (f"{family.model_type}: its {kinds} layers have no attention (no positions), but the config has "
                    "no layer_types to say which: every layer is resolved as attention with RoPE")
    types: list[str | None] = list(found_types) if found_types is not None else [None] * n
    mixers = [None if family is None else family.no_attention_kind(t) for t in types]
    rotates = [rope_on and r and m is None for r, m in zip(rotating(cfg, family, types, n), mixers, strict=True)]
    ropes: dict[str | None, RopeConfig | None] = {}
    notes: list[str] = [] if family is None or family.stages is None else [stage_note(stage_plan(cfg, family.stages))]
    wanted = [t if per_type else None for t, m in zip(types, mixers, strict=True) if m is None] if rope_on else []
    for layer_type in dict.fromkeys(wanted):
        try:
            rope, found = resolve_rope(view, layer_type, per_layer=True, family=family)
        except ValueError as exc:
            if "has no RoPE (null)" not in str(exc):
                raise
            ropes[layer_type] = None
            continue
        ropes[layer_type] = rope
        problems.update(dict.fromkeys(found))
        not_modelled.update(rope.not_modelled)
        notes += [note for note in rope.notes if note not in notes]
    for key in (*SCHEDULE_KEYS, *_read_by_schedule(family)):
        not_modelled.pop(prefix + key, None)
        problems.pop(prefix + key, None)
    for key in _read_by_schedule(family):  # the keys the family's schedule reads (refpos.models.schedule)
        if key in cfg:
            view.mark(key)
    if unplaced is not None:
        gaps = [not_modelled[prefix + "model_type"]] if prefix + "model_type" in not_modelled else []
        not_modelled[prefix + "model_type"] = "; ".join([*gaps, unplaced])
        problems[prefix + "model_type"] = None
    rope_dict = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if family is not None and family.query_scale is not None:  # the keys of the family's rule are honoured
        rule = QUERY_SCALES[family.query_scale]
        honoured = [*rule.key_names("top"), *(f"{place}.{key}" for place in ("rope_parameters", "rope_scaling")
                                              for key in rule.key_names("rope"))]
        for key in honoured:
            not_modelled.pop(prefix + key, None)
            problems.pop(prefix + key, None)
            if "." not in key and key in cfg:  # a top-level key of the rule (the rope dict's are read with it)
                view.mark(key)
    rope_dict = rope_dict if isinstance(rope_dict, Mapping) else {}
    layer_ropes = [ropes.get(types[i] if per_type else None) if rotates[i] else None for i in range(n)]
    if family is not None and family.rope_layers in ("theta_list", "theta_flags"):
        layer_ropes = _per_layer_bases(cfg, family.rope_layers, layer_ropes, notes)
    if family is not None and family.rope_layers == "scaling_list":
        layer_ropes = [rope if rope is None or scaled else _unscaled(rope)
                       for rope, scaled in zip(layer_ropes, scaled_layers(cfg, n), strict=True)]
    layers = tuple(
        HFLayer(i, types[i], layer_ropes[i],
                None if mixers[i] else _scale(cfg, family, layer_ropes[i] is not None, rope_dict), mixers[i])
        for i in range(n))
    return LayerSchedule(layers, family, not_modelled, tuple(notes)), list(problems)


def _per_layer_bases(cfg: Mapping[str, Any], rule: str, ropes: list[RopeConfig | None],
                     notes: list[str]) -> list[RopeConfig | None]:
    """Each rotating layer's base from ``layer_rope_theta`` (``"theta_list"``: the entry is the base, one rotary
    module per distinct base as GraniteSWAModel builds them); ``"theta_flags"`` reads the entry as on/off only."""
    thetas = layer_thetas(cfg, len(ropes))
    if thetas is None:
        return ropes
    if rule == "theta_flags":
        bases = {rope.theta for rope in ropes if rope is not None}
        if any(theta not in bases for theta in thetas if theta):
            notes.append(f"{LAYER_THETA_KEY}: a non-zero entry only switches RoPE on; every rotating layer uses the "
                         f"config's base {', '.join(f'{b:g}' for b in sorted(bases))}")
        return ropes
    return [None if rope is None else replace(rope, theta=theta, provenance={**rope.provenance, "theta": "config"})
            for rope, theta in zip(ropes, thetas, strict=True)]


def _unscaled(rope: RopeConfig) -> RopeConfig:
    """Plain RoPE at ``rope``'s base over the whole head (Molmo2RotaryEmbedding with ``scaled=False``: rope type
    default, compute_default_rope_parameters), for a layer outside ``rope_scaling_layers``."""
    if rope.rope_type == PLAIN:
        return rope
    kept = ("theta", "head_dim", "layout", "placement", "max_position_embeddings")
    provenance = {name: rope.provenance.get(name, "default") for name in kept} | {"rope_type": "derived"}
    return RopeConfig(rope_type=PLAIN, **{name: getattr(rope, name) for name in kept}, provenance=provenance,
                      notes=(*rope.notes, f"not in {SCALING_LAYERS_KEY}: plain RoPE at the same base"))


def _read_by_schedule(family: Family | None) -> tuple[str, ...]:
    """The top-level keys the schedule of ``family`` reads: its ``rope_layers`` rule's and its layer pattern's."""
    if family is None:
        return ()
    keys = ["no_rope_layers", "no_rope_layer_interval"] if family.rope_layers == "no_rope_layers" else []
    keys += [LAYER_THETA_KEY] if family.rope_layers in ("theta_list", "theta_flags") else []
    keys += [SCALING_LAYERS_KEY] if family.rope_layers == "scaling_list" else []
    keys += list(DENSE_PREFIX_KEYS) if family.rope_layers == "sliding_or_dense_prefix" else []
    keys += list(family.stages.keys) if family.stages is not None else []
    pattern = family.layer_pattern
    if pattern is not None:
        keys += [key.split(".")[0] for key in (pattern.key, pattern.offset_key, pattern.indices) if key]
    return tuple(keys)


class FamilySchedule:
    """The layer schedule as the encoding kinds' builders take it (:class:`refpos.models.kinds.record.Schedule`):
    the resolver hands it to them, so that the kinds, which the family table reads, do not import the schedule."""

    def layers(self, view: ConfigView, family: Family, *, rope_on: bool) -> tuple[LayerSchedule, list[str]]:
        return layer_schedule(view, family, rope_on=rope_on)

    def count(self, view: ConfigView, family: Family) -> int | None:
        try:
            return layer_count(view.raw, family)
        except LayerCountMissing:
            return None

    def layer_types(self, view: ConfigView) -> tuple[str, ...]:
        return hf_layer_types(view)

    def rope(self, view: ConfigView, layer_type: str | None, family: Family) -> RopeConfig:
        return resolve_rope(view, layer_type, per_layer=False, family=family)[0]


#: the schedule every resolution hands to the builders
SCHEDULE = FamilySchedule()


def hf_layer(config_or_path: Any, index: int) -> HFLayer:
    """What decoder layer ``index`` of a transformers config does with positions (see :func:`hf_layers`)."""
    schedule = hf_layers(config_or_path)
    index = check_int("index", index, minimum=0)
    if index >= len(schedule):
        raise ValueError(f"index must be < {len(schedule)} (the number of layers), got {index}")
    return schedule[index]
