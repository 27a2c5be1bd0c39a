r"""The RoPE kinds: what a family's rotary code fixes beyond its config (:class:`RopeFacts`), the layer record
(:class:`RopeLayer`: RoPE, or M-RoPE when it has sections) and the builder, which runs the layer schedule
(:mod:`refpos.models.layers`: which layers rotate, their query scales, the layers without attention).

The formulas are :mod:`refpos.rope` (docs/rope.md#the-math, docs/mrope.md#the-math); the config resolution of
one RoPE is :mod:`refpos.models.hf` (its rules numbered there).

Examples
--------
>>> from refpos.models import model_positions
>>> cfg = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256,
...        "rope_theta": 5e5}
>>> [(r.kind, r.rope.theta, r.rope.head_dim) for r in model_positions(cfg)]
[('rope', 500000.0, 64), ('rope', 500000.0, 64)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from refpos.encoding import Encoding
from refpos.models.kinds.record import EncodingKind, Stack, check_fact, layer_count
from refpos.models.query_scales import QueryScale
from refpos.models.records import LayerRecord, NoAttention, NoPositions, Refused, query_scale_of, scale_reads, scaled
from refpos.models.sources import Given, Source
from refpos.rope.config import RopeConfig
from refpos.rope.encoding import Rope
from refpos.rope.rules import RULES

#: what a row's ``rope.ratio_key`` scales: the base (θ·r), or the positions (p / r, p · r)
RATIO_ACTS = ("base", "divide", "multiply")
#: a config key a row may name (dotted for a nested key)
CONFIG_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
#: the resolved fields a ``rope.restated`` key may restate, and the form of its value: ``<layer type>:<field>``
RESTATED_FIELDS = ("theta", "partial_rotary_factor", "head_dim")
RESTATED = re.compile(rf"(\*|[a-z_]+):({'|'.join(RESTATED_FIELDS)})")


@dataclass(frozen=True)
class RopeFacts:
    """What a family's rotary code fixes that its config does not say (the ``rope`` sub-table of its row).

    ``theta``: a hard-coded base (GPT-J's 10000; with ``theta_fixed`` whatever the config says, else only when
    the config has none); defaults of ``rotary_dim`` (GPT-J 64), of ``partial_rotary_factor`` (GPT-NeoX 0.25, GLM
    0.5) and of the head sizes (Gemma 4: 256, full attention 512: ``head_dim``, ``global_head_dim``);
    ``partial_honoured``: its default init rotates only the partial span (most classes' default init ignores
    it); ``type_aliases``: rope types it renames (Phi-3: ``yarn`` is ``longrope``); ``types``: the rope types it
    accepts (empty: any); Gemma 3's legacy per-layer form: the sliding layers' base in ``local_theta_key``
    (default ``local_theta``). ``theta`` and ``local_theta`` are also the class's ``default_theta`` for a config
    that states no base (``local_theta``: a per-layer-type rope dict's sliding layers; NeoMME states it without a
    legacy key).

    Code that ships outside transformers names its keys as it likes; the row then says which key holds what:
    ``theta_key`` the base (Qwen's ``rotary_emb_base``, Phi-3-small's ``rope_embedding_base``), ``fraction_key``
    the rotated fraction (``rotary_pct``, StableLM-epoch's ``rope_pct``), ``head_dim_key`` the head size the
    rotation is built over (ChatGLM's ``kv_channels``), ``length_key`` the declared length (``seq_length``).
    ``ratio_key`` is a key that scales the rotation, ``ratio_acts`` what it scales (:data:`RATIO_ACTS`:
    ``"base"`` multiplies θ, ``"divide"`` divides the positions, ``"multiply"`` multiplies them) and
    ``ratio_names`` chooses that meaning from the checkpoint's name where one key means different things in the
    code of different releases (``{chatglm2 = "divide", chatglm3 = "base"}``: the first name that
    ``_name_or_path`` holds wins). ``rule_key`` switches a scaling rule on outside the rope dict (Qwen's
    ``use_dynamic_ntk``): ``rule`` the ``rope_type`` it switches on, ``rule_absent`` the value the config class
    assumes without the key. ``restated``: top-level keys a checkpoint states beside the per-layer-type rope dict
    the class reads, each naming the layer type (``*``: every one) and the resolved field it restates
    (:data:`RESTATED_FIELDS`; MiMo-V2-Flash's ``swa_rope_theta`` = ``"sliding_attention:theta"``):
    :mod:`refpos.models.restated_keys` reads them. ``angle_sign``: the direction the family's rotation turns every
    pair, ``-1`` where its ``rotate_half`` is Llama's with both signs flipped (NanoChat: ``cat(x2, -x1)``, so each
    pair turns by ``−p·ω_j``; :attr:`refpos.rope.config.RopeConfig.angle_sign`).
    """

    theta: float | None = None
    theta_fixed: bool = False
    rotary_dim: int | None = None
    partial_rotary_factor: float | None = None
    partial_honoured: bool = False
    head_dim: int | None = None
    global_head_dim: int | None = None
    type_aliases: tuple[tuple[str, str], ...] = ()
    types: tuple[str, ...] = ()
    local_theta_key: str | None = None
    local_theta: float | None = None
    theta_key: str | None = None
    fraction_key: str | None = None
    head_dim_key: str | None = None
    length_key: str | None = None
    ratio_key: str | None = None
    ratio_acts: str | None = None
    ratio_names: tuple[tuple[str, str], ...] = ()
    rule_key: str | None = None
    rule: str | None = None
    rule_absent: bool = False
    restated: tuple[tuple[str, str], ...] = ()
    angle_sign: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.type_aliases, dict):
            object.__setattr__(self, "type_aliases", tuple(sorted(self.type_aliases.items())))
        if isinstance(self.ratio_names, dict):  # in the table's order: the first name found wins
            object.__setattr__(self, "ratio_names", tuple(self.ratio_names.items()))
        if isinstance(self.types, list):
            object.__setattr__(self, "types", tuple(self.types))
        if isinstance(self.restated, dict):
            object.__setattr__(self, "restated", tuple(sorted(self.restated.items())))

    def check(self, where: str) -> None:
        for name in ("theta", "partial_rotary_factor", "local_theta"):
            value = getattr(self, name)
            check_fact(where, value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                                and value > 0), f"rope.{name}", value)
        for name in ("rotary_dim", "head_dim", "global_head_dim"):
            value = getattr(self, name)
            check_fact(where, value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0),
                       f"rope.{name}", value)
        check_fact(where, not self.theta_fixed or self.theta is not None, "rope.theta_fixed (needs theta)",
                   self.theta_fixed)
        check_fact(where, self.local_theta_key is None or self.local_theta is not None, "rope.local_theta",
                   self.local_theta)
        for name in ("theta_key", "fraction_key", "head_dim_key", "length_key", "ratio_key", "rule_key"):
            value = getattr(self, name)
            check_fact(where, value is None or (isinstance(value, str) and bool(CONFIG_KEY.fullmatch(value))),
                       f"rope.{name}", value)
        acts = [self.ratio_acts] if self.ratio_acts is not None else []
        names_ok = all(isinstance(n, str) and n for n, _ in self.ratio_names)
        check_fact(where, names_ok and all(a in RATIO_ACTS for a in [*acts, *(a for _, a in self.ratio_names)]),
                   "rope.ratio_acts / rope.ratio_names", self.ratio_acts if not names_ok else self.ratio_names)
        check_fact(where, (self.ratio_key is None) == (not acts and not self.ratio_names),
                   "rope.ratio_key (with ratio_acts or ratio_names)", self.ratio_key)
        check_fact(where, (self.rule_key is None) == (self.rule is None) and (self.rule is None or self.rule in RULES),
                   "rope.rule (a rope_type, with rule_key)", self.rule)
        check_fact(where, isinstance(self.rule_absent, bool), "rope.rule_absent", self.rule_absent)
        check_fact(where, all(isinstance(k, str) and CONFIG_KEY.fullmatch(k) and isinstance(v, str)
                              and RESTATED.fullmatch(v) for k, v in self.restated), "rope.restated", self.restated)
        check_fact(where, self.angle_sign in (1, -1) and not isinstance(self.angle_sign, bool), "rope.angle_sign",
                   self.angle_sign)


@dataclass(frozen=True)
class RopeLayer(LayerRecord):
    """RoPE (M-RoPE when ``rope.mrope_section`` is set), with the family's query scale if it has one, and the
    RoPE of the layer's DSA indexer where it runs one (:mod:`refpos.models.indexer`)."""

    rope: RopeConfig
    query_scale: QueryScale | None = None
    indexer: RopeConfig | None = None

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "mrope" if self.rope.mrope_section is not None else "rope"

    @property
    def label(self) -> str:
        return self.kind + ("+scale" if self.query_scale else "") + ("+indexer" if self.indexer else "")

    def params(self) -> dict[str, Any]:
        out = {"rope": self.rope.to_params(),
               "query_scale": None if self.query_scale is None else self.query_scale.as_dict()}
        if self.indexer is not None:
            out["indexer"] = self.indexer.to_params()
        return out

    def rotation_positions(self, positions: Any = None, *, cache_position: Any = None,
                           attention_mask: Any = None, length: int | None = None) -> Any:
        """The positions the layer turns its call's tokens by, read as its code reads them (``reads``): the
        position ids, else the slot (most families), or the running count of the mask (π0.5's action expert,
        whose ``T`` = ``length`` tokens come last under ``attention_mask``)."""
        given = Given.of(positions=positions, cache_position=cache_position, attention_mask=attention_mask,
                         length=length)
        return self.read("rotation", "query", given)

    def scale(self, positions: Any = None, *, cache_position: Any = None, attention_mask: Any = None) -> Any:
        """The query's scale at the call's tokens (1 without a rule), read from the input its rule reads
        (Llama 4: the token's slot, never the position id)."""
        return query_scale_of(self, Given.of(positions=positions, cache_position=cache_position,
                                             attention_mask=attention_mask))

    def _encoding(self, **weights: Any) -> Encoding:
        return scaled(Rope(self.rope), self.query_scale)


#: what a RoPE layer turns by: the position ids passed, else the ids the model builds from the token's slot
#: (every family's ``position_ids = cache_position`` / ``arange(T) + past_seen_tokens`` when none are passed)
ROTATION: Source = ("position_ids", "cache_position")


def rotation_reads(stack: Stack) -> tuple[tuple[str, Source], ...]:
    """The ``rotation`` entry of a stack's RoPE layers: :data:`ROTATION`, or what a composite's row says its part
    reads (π0.5's action expert: the running count of the prefix's mask, continued over the actions)."""
    return (("rotation", tuple(stack.reads.get("rotation", ROTATION))),)


#: the note a resolution carries when the config gives no layer count: one record per layer type
NO_COUNT = "the config does not give its layer count: one record per layer type, no layer schedule"


#: the layer type of a family's ``no_attention`` column that names the whole network (a CNN, a codec): one record
NETWORK = "network"


def build_scheduled(stack: Stack, encoding: str) -> list[LayerRecord]:
    """RoPE, no positions, or no attention: the records of the layer schedule (what it does not model and its
    notes go to ``stack``). A config without a layer count gives one RoPE record per layer type (and the note
    :data:`NO_COUNT`)."""
    family, name, schedule_of = stack.family, stack.name, stack.schedule
    if schedule_of is None:
        raise ValueError(f"the {name} stack was given no layer schedule to build {encoding} layers with")
    if encoding == "none" and (stack.role != "single" or schedule_of.count(stack.view, family) is None):
        # attention without positions in every layer of a stack whose count the schedule does not read (an
        # encoder or a decoder; a tower counting its layers under encoder_layers or depth)
        try:
            return [NoPositions(name, i, None) for i in range(layer_count(stack.view, stack.role))]
        except ValueError:
            if stack.role != "single":
                raise  # no count under any key: the schedule below says so for a single stack
    if stack.role != "single" and not (encoding == "rope" and family.count == "each_stack"):
        why = f"{encoding} positions in an encoder–decoder model are not modelled"
        return [Refused(name, i, None, reason=why) for i in range(stack.geometry().layers)]
    # a stack of an each_stack row is the flat config's one transformer: its schedule is a single stack's
    if encoding == "no_attention":
        mixer = next((kind for _, kind in family.no_attention), "mamba")
        if NETWORK in dict(family.no_attention):  # a network without attention at all: one record stands for it
            return [NoAttention(name, 0, None, mixer=mixer)]
        return [NoAttention(name, i, None, mixer=mixer) for i in range(schedule_of.count(stack.view, family) or 1)]
    if encoding == "rope" and schedule_of.count(stack.view, family) is None:
        return _per_type(stack)
    schedule, _ = schedule_of.layers(stack.view, family, rope_on=encoding == "rope")  # no count: it says so
    stack.view.mark("layer_types")
    stack.view.mark(family.types_key)
    records: list[LayerRecord] = []
    for layer in schedule:
        if not layer.attention:
            records.append(NoAttention(name, layer.index, layer.layer_type, mixer=layer.mixer or "mamba"))
        elif layer.rope is not None:
            records.append(RopeLayer(name, layer.index, layer.layer_type, rope=layer.rope, query_scale=layer.scale,
                                     reads=rotation_reads(stack) + scale_reads(layer.scale)))
        else:
            records.append(NoPositions(name, layer.index, layer.layer_type, query_scale=layer.scale,
                                       reads=scale_reads(layer.scale)))
    stack.not_modelled.update(schedule.not_modelled)
    stack.notes.extend(note for note in schedule.notes if note not in stack.notes)
    return records


def _per_type(stack: Stack) -> list[LayerRecord]:
    """A RoPE config without a layer count: one record per layer type (index 0), no schedule."""
    assert stack.schedule is not None
    records: list[LayerRecord] = []
    stack.notes.append(NO_COUNT)
    for layer_type in stack.schedule.layer_types(stack.view) or (None,):
        rope = stack.schedule.rope(stack.view, layer_type, stack.family)
        records.append(RopeLayer(stack.name, 0, layer_type, rope=rope, reads=rotation_reads(stack)))
        stack.not_modelled.update(rope.not_modelled)
        stack.notes.extend(note for note in rope.notes if note not in stack.notes)
    return records


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    pairs = draw(st.integers(1, 64))
    return {"theta": draw(st.floats(2.0, 1e7)), "head_dim": 2 * pairs, "layout": draw(st.sampled_from(
        ["half", "interleaved"]))}


_LLAMA = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 32, "rope_theta": 10000.0}

ROPE = EncodingKind(
    name="rope", summary="the query and key rotated pair by pair, by angles proportional to the position (RoPE)",
    record=RopeLayer, build=lambda stack: build_scheduled(stack, "rope"), hook="rotate",
    reads=("position_ids", "decoder_position_ids", "cache_position", "mask_cumsum", "mask_cumsum_minus_one",
           "slot_plus_one"),
    doc="docs/rope.md#the-math", facts=RopeFacts,
    check="rope", golden="rope",
    contract=("rope_frequencies", "rope_cos_sin", "apply_rope"), spec="spec_tests/test_rope_properties.py",
    draw=_draw, example={"config": dict(_LLAMA), "facts": {}})

MROPE = EncodingKind(
    name="mrope", summary="RoPE whose channel sections turn with the temporal, height and width ids (M-RoPE)",
    record=RopeLayer, build=None, hook="rotate", reads=("position_ids", "cache_position"),
    doc="docs/mrope.md#the-math",
    check="rope", golden="rope", contract=("mrope_position_ids", "apply_rope"), spec="spec_tests/test_mrope.py",
    in_table=False, modalities=("text", "vision"),
    example={"config": {**_LLAMA, "model_type": "qwen2_vl", "rope_scaling": {"rope_type": "default",
                                                                           "mrope_section": [2, 3, 3]}}},
    absent={"facts": "M-RoPE's facts are its family's text rotary module (refpos.models.mrope_hf), chosen by the "
                     "config's model type", "build": "RoPE's builder makes M-RoPE layers when the rope dict has "
                                                     "sections", "draw": "the spec suite draws M-RoPE layouts "
                                                                         "itself (spec_tests/test_mrope.py)"})

__all__ = ["CONFIG_KEY", "MROPE", "NO_COUNT", "RATIO_ACTS", "ROPE", "ROTATION", "RopeFacts", "RopeLayer",
           "build_scheduled", "rotation_reads"]
