"""The family table: what a model's code fixes about positions that its config.json does not state.

A config.json says ``rope_theta`` and ``rope_scaling``; it does not say whether the model rotates
half-split or interleaved pairs, which layers rotate at all, or whether the query is scaled by position.
Those are fixed by the model's code. The table is data, ``refpos/models/data/families.toml``: one row per
transformers ``model_type`` whose attention has a positional encoding refpos knows, or none at all, each row
citing the file (under ``transformers/models/``, transformers 5.24) and the function it was read from. This
module reads it, checks every value against its rule set and serves the rows. The columns of the encoding,
the stacks and the facts of the encodings other than RoPE (``encoding``, ``stacks``, ``switch``, ``alibi``,
``t5``, ``learned``, ``sinusoidal``, ``encoder``, ``decoder``) and the RoPE facts beyond the config
(``rope``: hard-coded bases, defaults of the rotated span and head sizes, renamed rope types) are
:mod:`refpos.models.facts`'; the RoPE columns (``layout`` is required where a stack can have RoPE):

``layout``
    ``"half"`` (``rotate_half`` with ``x[..., :d/2]``, ``cat(freqs, freqs)``), ``"interleaved"`` (``rotate_half``
    on ``x[..., ::2]`` with ``repeat_interleave`` tables, ``rotate_every_two``, or complex pairs
    ``view_as_complex`` as in Llama 4 and DeepSeek-V2), ``"deinterleaved"`` (``apply_rotary_pos_emb_interleave``:
    interleaved input regrouped half-split), or ``"rope_interleave"`` (the config key ``rope_interleave``,
    default true, chooses between the last two, as DeepSeek-V3's attention does).
``rope_layers``
    Which layers rotate: ``"all"``; ``"no_rope_layers"`` (a 0/1 list, 1 = rotate; absent: every layer but each
    ``no_rope_layer_interval``-th, default 4); ``"sliding"`` (only ``sliding_attention`` layers, and only
    when ``sliding_window`` is set); ``"sliding_or_no_window"`` (sliding layers, or every layer when
    ``sliding_window`` is null); ``"sliding_type"`` (the ``sliding_attention`` layers, whatever the window).
    :mod:`refpos.models.schedule` evaluates them.
``layer_pattern``
    How the model's config class fills an absent ``layer_types`` (a :class:`LayerPattern`): every ``n``-th
    layer ``full_attention`` (``n`` read from ``key``, default ``every``; with ``offset = r`` the layers with
    ``i % n == r``, default ``n - 1`` (none when ``r >= n``), ``r`` read from ``offset_key`` when set, from
    layer ``start`` on), the
    layers a config key lists (``indices``, dotted for a nested key, ``one_based`` when the list counts from
    1; ``absent``: the type of every layer when that key is missing; ``listed``: the type of the listed
    layers, default ``full_attention``), or one character per layer in a string
    key (``chars = {M = "mamba", …}`` with ``key``); the others are ``other`` (default ``sliding_attention``).
``types_key``
    The config key holding the layer types when it is not ``layer_types`` (Nemotron-H: ``layers_block_type``).
``count``
    ``"layer_types"``: the number of layers is the length of the layer types (the layer-count key is ignored, as
    the config class does).
``width_factor``
    The attention's input is this many times the hidden width (Zamba2's shared attention runs on
    ``[hidden; embeddings]``: 2), so its head size is ``width_factor · hidden_size / num_attention_heads``.
``no_attention``
    Layer types without attention, and so without positions (Mamba, linear attention, convolutions), with
    the kind the schedule names them by: Qwen3-Next's ``linear_attention`` layers are ``"linear"``.
``query_scale``
    A position-dependent multiplier of the query, the name of a rule of :mod:`refpos.models.query_scales`:
    ``"llama4_temperature"`` (Llama 4's NoPE layers) or ``"llama_4_scaling_beta"`` (every layer, Ministral-3).
``placement``
    Where the code puts the rotated channels when the config does not say (otherwise: first, or last for
    ``qk_rope_head_dim`` MLA configs).
``rope_dict``
    Rope-dict keys the model's own rotary module reads beyond transformers' shared rules:
    ``"ntk_alpha"`` (``"dynamic"`` with ``alpha`` is a fixed NTK base), ``"longrope_mscale"``
    (``short_mscale`` / ``long_mscale``).
``multi_axis``
    The text RoPE takes several position axes (M-RoPE); :mod:`refpos.models.mrope_hf` resolves the families it
    models and reports the others' multi-axis keys as not modelled.
``unmodelled``
    Something the code does with positions that refpos does not model; reported as not modelled, and
    :func:`refpos.model_positions` refuses the layers.
``note``
    Something the code does that leaves positions as resolved (a mixer beside the attention, keys shared
    between layers); shown in the resolution's notes.
``release``
    The transformers release the row's ``source`` was read from (default ``"5.24"``).
``versions``
    Where a later release changed the family's position code: release range (``"<5.25"``) → the columns of that
    range, with its own ``source`` and ``release``; the row itself holds for every other release
    (:mod:`refpos.models.releases` chooses by the config's ``transformers_version``).

The layouts were read from each file's rotate / apply functions; the other columns from the attention
``forward``, the position-embedding modules and the config classes of the families that differ. For a
``model_type`` missing from the table, :func:`refpos.models.from_hf_config` resolves the layout ``"half"`` and RoPE
on every layer *assumed* (the resolution says so, not modelled, and :func:`warn_assumed` issues an
:class:`UnknownFamilyWarning`); :func:`refpos.model_positions` resolves only what the config states and
reports the rest as unknown.

Examples
--------
>>> family_of("cohere").layout, family_of("kimi_k2").model_type
('interleaved', 'deepseek_v3')
>>> dict(family_of("qwen3_next").no_attention)
{'linear_attention': 'linear'}
>>> family_of("bart").stacks, family_of("bart").stack("encoder").facts_of("learned").offset
('encoder-decoder', 2)
"""

from __future__ import annotations

import json
import re
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from typing import Any

from refpos.models import query_scales
from refpos.models.facts import STACKS, StackFacts, Switch, read_stack, read_switch
from refpos.models.kinds.registry import FACT_KINDS, KINDS, TABLE_KINDS
from refpos.models.kinds.rope import RopeFacts
from refpos.models.layer_pattern import LayerPattern
from refpos.models.releases import VERSION, check_range
from refpos.models.sources import INPUTS
from refpos.pairs import PARTIAL_PLACEMENTS

LAYOUT_RULES = ("half", "interleaved", "deinterleaved", "rope_interleave")
LAYER_RULES = ("all", "no_rope_layers", "sliding", "sliding_or_no_window", "sliding_type")
ROPE_DICT_RULES = ("ntk_alpha", "longrope_mscale")
PLACEMENTS = PARTIAL_PLACEMENTS
#: ``<dir>/modeling_<name>.py: <function>[, <function or Class.method>]``
#: the source of a row built from conventions a caller states (``refpos.model_positions(assume=…)``)
STATED = "stated by the caller"
#: where the table lives, as error messages name it
TABLE_PATH = "refpos/models/data/families.toml"
#: a section path of the ``parts`` column (``vision_config``, ``thinker_config.vision_config``)
PART_PATH = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*")
SOURCE_FORM = re.compile(r"[a-z0-9_]+/modeling_[a-z0-9_]+\.py: \w+(\.\w+)?(, \w+(\.\w+)?)*")


class UnknownFamilyWarning(UserWarning):
    """A ``model_type`` the family table does not know: its pair layout and layer schedule are assumed."""


@dataclass(frozen=True)
class Family:
    """One row of the family table (see the module docstring for the columns)."""

    model_type: str
    source: str
    layout: str | None = None
    rope_layers: str = "all"
    layer_pattern: LayerPattern | None = None
    no_attention: tuple[tuple[str, str], ...] = ()
    query_scale: str | None = None
    placement: str | None = None
    rope_dict: frozenset[str] = frozenset()
    multi_axis: bool = False
    unmodelled: str | None = None
    note: str | None = None
    #: the encoding and facts of every stack unless ``encoder`` / ``decoder`` / ``predictor`` override them
    positions: StackFacts = field(default_factory=StackFacts)
    stacks: str = "decoder"
    encoder: StackFacts | None = None
    decoder: StackFacts | None = None
    predictor: StackFacts | None = None
    switch: Switch | None = None
    types_key: str = "layer_types"
    count: str | None = None
    width_factor: int = 1
    #: what every stack adds to its input before its first layer (a kind whose hook is ``input``), if anything
    input: StackFacts | None = None
    #: ``(key, value when absent)``: the bool config key that turns the input embedding on
    input_when: tuple[str, bool] | None = None
    #: section path -> the model type the composite's config class builds there, whatever the section says
    parts: tuple[tuple[str, str], ...] = ()
    #: section path -> the model type it builds there when the section states none (else the section's)
    part_defaults: tuple[tuple[str, str], ...] = ()
    #: section path -> the inputs its positions are read from, overriding its own row's (π0.5's action expert)
    part_reads: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: the transformers release the row's source was read from
    release: str = "5.24"
    #: release range -> the row of that range (its own source and release), where the code changed between releases
    versions: tuple[tuple[str, Family], ...] = ()

    def __post_init__(self) -> None:
        checks = {"layout": self.layout in (None, *LAYOUT_RULES) and (self.layout is not None or not self.has_rope),
                  "rope_layers": self.rope_layers in LAYER_RULES,
                  "query_scale": self.query_scale in (None, *query_scales.QUERY_SCALES),
                  "placement": self.placement in (None, *PLACEMENTS),
                  "rope_dict": self.rope_dict <= set(ROPE_DICT_RULES),
                  "source": self.source == STATED or bool(SOURCE_FORM.fullmatch(self.source)),
                  "stacks": self.stacks in STACKS,
                  "count": self.count in (None, "layer_types"),
                  "encoder": self.encoder is None or "encoder" in STACKS.get(self.stacks, ()),
                  "decoder": self.decoder is None or "decoder" in STACKS.get(self.stacks, ()),
                  "predictor": self.predictor is None or "predictor" in STACKS.get(self.stacks, ()),
                  "input": self.input is None or KINDS[self.input.encoding].hook == "input",
                  "parts": all(PART_PATH.fullmatch(path) for path, _ in self.parts),
                  "part_defaults": all(PART_PATH.fullmatch(path) for path, _ in self.part_defaults),
                  "width_factor": isinstance(self.width_factor, int) and self.width_factor >= 1,
                  "release": isinstance(self.release, str) and bool(VERSION.fullmatch(self.release)),
                  "part_reads": all(PART_PATH.fullmatch(path) for path, _ in self.part_reads)}
        wrong = [name for name, ok in checks.items() if not ok]
        if wrong:
            raise ValueError(f"family {self.model_type!r}: column {wrong[0]} holds a value outside its rule set "
                             f"({getattr(self, wrong[0])!r})")

    @property
    def rope(self) -> RopeFacts:
        """What the family's rotary code fixes beyond the config (the row's ``rope`` sub-table)."""
        return self.positions.facts_of("rope")

    def stack(self, name: str) -> StackFacts:
        """The encoding and facts of stack ``name`` (``"decoder"``, ``"encoder"``, ``"vision"``, …)."""
        override = {"encoder": self.encoder, "decoder": self.decoder, "predictor": self.predictor}.get(name)
        return override if override is not None else self.positions

    @property
    def encodings(self) -> frozenset[str]:
        """Every encoding a stack of this family can have (its switch included)."""
        found = {self.stack(name).encoding for name in STACKS.get(self.stacks, ())}
        return frozenset(found | ({enc for _, enc in self.switch.values} if self.switch else set()))

    def input_on(self, cfg: Mapping[str, Any]) -> bool:
        """Whether the row's input embedding is on in ``cfg`` (its ``input_when`` key, or always)."""
        if self.input is None:
            return False
        if self.input_when is None:
            return True
        key, absent = self.input_when
        value = cfg.get(key)
        return absent if value is None else value is True

    @property
    def has_rope(self) -> bool:
        return "rope" in self.encodings

    @property
    def is_default(self) -> bool:
        """True when the row says nothing beyond refpos's defaults (half layout, RoPE on every layer)."""
        return self == Family(self.model_type, self.source, "half")

    def switched(self, cfg: Mapping[str, Any], encoding: str) -> tuple[str | None, str]:
        """The encoding the row's switch key chooses in ``cfg`` (``encoding`` without a switch; ``None`` for a
        value the row does not list) and the value as JSON text (``"true"``, ``"nope"``)."""
        if self.switch is None:
            return encoding, ""
        value: Any = cfg
        for part in self.switch.key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        text = self.switch.absent if value is None else (value if isinstance(value, str) else json.dumps(value))
        values = dict(self.switch.values)
        return values.get(text, values.get("*") if text != self.switch.absent else None), text

    def no_attention_kind(self, layer_type: str | None) -> str | None:
        """The kind of a layer type without attention (``"linear"``, ``"mamba"``, ...), or ``None``."""
        return dict(self.no_attention).get(layer_type) if layer_type is not None else None


#: the columns a ``[family.<model_type>]`` table may hold (the model type is its name; ``positions`` is
#: written as ``encoding`` and the fact tables at the row's top level)
_COLUMNS = (*(f.name for f in fields(Family) if f.name not in ("model_type", "positions")), "encoding",
            *FACT_KINDS)
_STRINGS = ("layout", "source", "rope_layers", "query_scale", "placement", "unmodelled", "note", "stacks",
            "types_key", "count", "release")


def _row(model_type: str, table: Any) -> Family:
    """One ``[family.<model_type>]`` table as a :class:`Family`; a ``ValueError`` naming what is wrong."""
    where = f"{TABLE_PATH} [family.{model_type}]"
    if not isinstance(table, dict):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(table) - set(_COLUMNS))
    missing = [key for key in ("source",) if key not in table]
    if unknown or missing:
        raise ValueError(f"{where}: unknown keys {unknown}, missing {missing}; keys are {list(_COLUMNS)}")
    wrong = [key for key in _STRINGS if key in table and not isinstance(table[key], str)]
    wrong += [key for key, kind in (("multi_axis", bool), ("rope_dict", list), ("layer_pattern", dict),
                                    ("no_attention", dict), ("encoder", dict), ("decoder", dict),
                                    ("predictor", dict), ("width_factor", int), ("parts", dict),
                                    ("part_defaults", dict), ("input", dict), ("part_reads", dict),
                                    ("versions", dict))
              if key in table and not isinstance(table[key], kind)]
    if wrong:
        raise ValueError(f"{where}: {wrong[0]} has the wrong type ({table[wrong[0]]!r})")
    values = {k: v for k, v in table.items() if k not in ("encoding", *FACT_KINDS)}
    if "versions" in values:  # each range: the row's columns with its own over them
        ranges = []
        for text, sub in values["versions"].items():
            check_range(where, text)
            if not isinstance(sub, dict) or "versions" in sub or "release" not in sub or "source" not in sub:
                raise ValueError(f"{where}: versions.{text} must be a table of columns with its own source and "
                                 f"release (no versions of its own), got {sub!r}")
            ranges.append((text, _row(model_type, {**{k: v for k, v in table.items() if k != "versions"}, **sub})))
        values["versions"] = tuple(ranges)
    if "part_reads" in values:
        if not all(isinstance(k, str) and isinstance(v, list) and v and all(isinstance(i, str) for i in v)
                   for k, v in values["part_reads"].items()):
            raise ValueError(f"{where}: part_reads maps section paths to lists of inputs")
        stray = sorted({i for v in values["part_reads"].values() for i in v} - set(INPUTS))
        if stray:
            raise ValueError(f"{where}: part_reads names inputs that are not refpos.models.sources.INPUTS: {stray}")
        values["part_reads"] = tuple((k, tuple(v)) for k, v in values["part_reads"].items())
    values["positions"] = read_stack(where, table)
    for name in ("encoder", "decoder", "predictor"):
        if name in values:
            values[name] = read_stack(f"{where} {name}", values[name], inherited=values["positions"])
    if "input" in values:
        site = dict(values["input"])
        when, absent = site.pop("when", None), site.pop("when_absent", False)
        if "encoding" not in site or (when is not None and not isinstance(when, str)) or not isinstance(absent, bool):
            raise ValueError(f"{where}: input takes encoding = \"<kind>\", its facts, and optionally when = \"<bool "
                             f"key>\", when_absent = true|false; got {values['input']!r}")
        values["input"] = read_stack(f"{where} input", site)
        values["input_when"] = None if when is None else (when, absent)
    if "switch" in values:
        values["switch"] = read_switch(where, values["switch"])
    try:
        if "layer_pattern" in values:
            pattern = dict(values["layer_pattern"])
            if "chars" in pattern:
                pattern["chars"] = tuple(sorted(dict(pattern["chars"]).items()))
            values["layer_pattern"] = LayerPattern(**pattern)
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"{where}: layer_pattern takes every, key, indices, other, absent, listed, offset, "
                         f"start, one_based, chars ({exc})") from None
    if "no_attention" in values:
        pairs = values["no_attention"].items()
        if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in pairs):
            raise ValueError(f"{where}: no_attention maps layer types to kind names (str)")
        values["no_attention"] = tuple(sorted(pairs))
    if "rope_dict" in values:
        values["rope_dict"] = frozenset(values["rope_dict"])
    for name in ("parts", "part_defaults"):
        if name in values:
            if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in values[name].items()):
                raise ValueError(f"{where}: {name} maps section paths to model types (str)")
            values[name] = tuple(values[name].items())
    return Family(model_type, **values)


def load(text: str | None = None) -> tuple[tuple[Family, ...], dict[str, str]]:
    """The rows and aliases of ``families.toml`` (or of ``text`` in its format), rows in file order."""
    if text is None:
        text = resources.files("refpos").joinpath("models", "data", "families.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    if set(data) != {"aliases", "family"}:
        raise ValueError(f"{TABLE_PATH}: expected the tables [aliases] and [family.*], got {sorted(data)}")
    rows = tuple(_row(model_type, table) for model_type, table in data["family"].items())
    aliases = data["aliases"]
    known = {row.model_type for row in rows}
    bad = {alias: target for alias, target in aliases.items() if target not in known or alias in known}
    if bad:
        raise ValueError(f"{TABLE_PATH} [aliases]: each alias must name a row and not be one: {bad}")
    unknown_parts = {f"{row.model_type}.{path}": target for row in rows
                     for path, target in (*row.parts, *row.part_defaults)
                     if target not in known and target not in aliases}
    if unknown_parts:
        raise ValueError(f"{TABLE_PATH}: parts must name rows of the table: {unknown_parts}")
    return rows, dict(aliases)


#: one row per model_type (transformers 5.24, files under transformers/models/), in the file's order
FAMILY_ROWS: tuple[Family, ...]
#: model_types that are a known family under another name (the hub config's ``architectures`` names the
#: transformers class): Kimi-K2 ships ``model_type: kimi_k2`` with ``DeepseekV3ForCausalLM``
ALIASES: dict[str, str]
FAMILY_ROWS, ALIASES = load()
FAMILIES: dict[str, Family] = {row.model_type: row for row in FAMILY_ROWS}


def family_of(model_type: str | None) -> Family | None:
    """The row of ``model_type`` (aliases followed), or ``None`` when the table does not know it."""
    if model_type is None:
        return None
    if not isinstance(model_type, str):
        raise TypeError("model_type must be a string, a transformers model type such as 'llama', got "
                        f"{type(model_type).__name__} {model_type!r}")
    return FAMILIES.get(ALIASES.get(model_type, model_type))


def warn_assumed(model_type: str | None, *, stacklevel: int = 2) -> None:
    """Warn (:class:`UnknownFamilyWarning`) that ``model_type`` is not in the table and its layout is assumed;
    ``stacklevel`` as :func:`warnings.warn` counts it from this function's caller."""
    named = "no model_type" if model_type is None else f"model_type {model_type!r}"
    warnings.warn(f"{named} is not in refpos's family table: half-split pairs and RoPE on every layer are "
                  "assumed, not read from the model's code (the resolution reports it as not modelled)",
                  UnknownFamilyWarning, stacklevel=stacklevel + 1)


def table_summary() -> dict[str, int]:
    """Counts of the table: model types, aliases, rows that differ from the default."""
    return {"model_types": len(FAMILY_ROWS), "aliases": len(ALIASES),
            "differ_from_default": sum(not row.is_default for row in FAMILY_ROWS),
            **{f"encoding {enc}": sum(enc in row.encodings for row in FAMILY_ROWS) for enc in TABLE_KINDS}}


__all__ = ["ALIASES", "FAMILIES", "FAMILY_ROWS", "Family", "LayerPattern", "UnknownFamilyWarning", "family_of",
           "load", "table_summary", "warn_assumed"]
