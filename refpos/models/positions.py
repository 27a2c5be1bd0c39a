r"""``model_positions``: every layer of every stack of a transformers config, whatever its encoding.

.. code-block:: text

    config.json ──language_config──> the language model's config (inside thinker_config, text_config, …)
        ──family_of(model_type)──> the family row (or the conventions the caller states, or unknown)
        ──per stack (decoder; encoder and decoder)──> encoding (the row's, or its switch key's)
        ──> one record per layer (refpos.models.records): RoPE, M-RoPE, ALiBi, T5, learned, sinusoidal,
            DeBERTa, none, no attention, refused, unknown

RoPE and attention without positions go through the layer schedule (:func:`refpos.models.hf_layers`'s rules:
which layers rotate, query scales, layers without attention); the other encodings read their stack's
geometry and the family's facts (:mod:`refpos.models.stacks`).

**Complete or say so.** ``not_modelled`` lists every key that changes positions or attention and that the
resolution did not honour, with what it does; a layer whose *positions* such a key would change (any key but
the masks and scales of :data:`refpos.models.position_keys.ATTENTION_ONLY`) is :class:`Refused`, never
resolved as if the key were absent. A ``model_type`` the family table does not know resolves only what its
config states (:class:`Unknown` records, ``unknown`` naming what is missing) unless the caller states the
missing conventions: ``assume={"family": "llama"}`` (resolve as that family) or the columns themselves,
``assume={"encoding": "rope", "layout": "half"}``.

Examples
--------
>>> bloom = {"model_type": "bloom", "n_layer": 2, "n_head": 3, "hidden_size": 48}
>>> positions = model_positions(bloom)
>>> positions.summary()
'decoder layers 0-1: alibi ×2'
>>> layer = positions.layers[0]
>>> layer.stack, layer.index, layer.kind, [round(m, 6) for m in layer.slopes]
('decoder', 0, 'alibi', [0.0625, 0.003906, 0.25])
>>> bart = {"model_type": "bart", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
...         "decoder_attention_heads": 2, "d_model": 8, "max_position_embeddings": 16}
>>> [(r.stack, r.kind, r.offset, r.table_size) for r in model_positions(bart)]
[('encoder', 'learned', 2, 18), ('decoder', 'learned', 2, 18)]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from refpos.models.facts import STACKS, StackFacts
from refpos.models.families import STATED, Family, family_of
from refpos.models.hf_files import language_view
from refpos.models.indexer import with_indexers
from refpos.models.kinds import KINDS, Stack
from refpos.models.kinds.record import GEOMETRY_KEYS
from refpos.models.kinds.rope import NO_COUNT, RopeLayer
from refpos.models.layers import SCHEDULE
from refpos.models.parts import Part, is_network, part_reads, parts_of
from refpos.models.position_keys import ATTENTION_ONLY, is_active, position_keys
from refpos.models.records import LayerRecord, Refused, Unknown
from refpos.models.releases import release_of, row_for
from refpos.models.schedule import LayerCountMissing, layer_count, summary_line
from refpos.models.view import ConfigView

#: the conventions a caller may state for a family the table does not know (``assume=``)
ASSUMABLE = ("family", "encoding", "layout", "stacks", "rope_layers")
#: config keys an unknown family's records report as stated (with every position key it has)
STATED_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "rotary_dim", "head_dim",
               "max_position_embeddings", "n_positions", "max_source_positions", "max_target_positions",
               "relative_attention_num_buckets", "relative_attention_max_distance")


@dataclass(frozen=True)
class ModelPositions:
    """Every layer of every stack of a config: its records, and what the resolution does not model."""

    model_type: str | None
    family: Family | None
    layers: tuple[LayerRecord, ...]
    #: the wrapper path of the language model's config (``"thinker_config.text_config."``; empty at the top)
    nesting: str = ""
    not_modelled: Mapping[str, str] = field(default_factory=dict)
    #: what an unknown family's config does not state, with what to pass
    unknown: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: conventions the caller stated (``assume=``)
    assumed: Mapping[str, str] = field(default_factory=dict)
    #: False when the config gives no layer count: one RoPE record per layer type stands for its layers
    scheduled: bool = True
    #: the networks besides the language model, each ``(stack name, config path, model type)``
    parts: tuple[tuple[str, str, str | None], ...] = ()

    def __iter__(self) -> Iterator[LayerRecord]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def stacks(self) -> tuple[str, ...]:
        """The stacks in order (``("decoder",)``, ``("encoder", "decoder")``)."""
        return tuple(dict.fromkeys(layer.stack for layer in self.layers))

    def stack(self, name: str) -> tuple[LayerRecord, ...]:
        """The records of one stack, by index."""
        if name not in self.stacks:
            raise ValueError(f"stack must be one of {list(self.stacks)}, got {name!r}")
        return tuple(layer for layer in self.layers if layer.stack == name)

    def layer(self, stack: str, index: int) -> LayerRecord:
        """The record of layer ``index`` of ``stack``."""
        layers = self.stack(stack)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(layers):
            raise ValueError(f"index must be an int in [0, {len(layers)}) for the {stack} stack, got {index!r}")
        return layers[index]

    @property
    def complete(self) -> bool:
        """True when nothing is refused, unknown or not modelled."""
        return not self.not_modelled and not self.unknown and not any(
            layer.kind in ("refused", "unknown") for layer in self.layers)

    def kinds(self) -> dict[tuple[str, str | None, str], list[int]]:
        """Layer indices per distinct (stack, layer type, label), in order of first appearance."""
        out: dict[tuple[str, str | None, str], list[int]] = {}
        for layer in self.layers:
            out.setdefault((layer.stack, layer.layer_type, layer.label), []).append(layer.index)
        return out

    def summary(self) -> str:
        """One line per stack: ``decoder layers 0-47: rope ×36, none ×12 (every 4th)``; a stack's input embedding
        (``audio.input``) is one line ``audio input: conv_position``."""
        return "\n".join(f"{name.removesuffix('.input')} input: {self.stack(name)[0].label}" if name.endswith(".input")
                         else f"{name} " + summary_line([(r.index, r.label) for r in self.stack(name)])
                         for name in self.stacks)

    def describe(self) -> dict[str, Any]:
        """JSON-ready: the model type, its family row's source, every layer, and the reports."""
        return {"model_type": self.model_type, "source": None if self.family is None else self.family.source,
                "nesting": self.nesting, "summary": self.summary().splitlines(),
                "layers": [layer.describe() for layer in self.layers], "not_modelled": dict(self.not_modelled),
                "unknown": dict(self.unknown), "complete": self.complete, "notes": list(self.notes),
                "assumed": dict(self.assumed),
                "parts": [{"stack": name, "path": path, "model_type": model_type}
                          for name, path, model_type in self.parts]}


# --------------------------------------------------------------------------------------------- resolve
def model_positions(config_or_path: Any, *, assume: Mapping[str, str] | None = None,
                    strict: bool = False, transformers_version: str | None = None) -> ModelPositions:
    """What every layer of every stack of a transformers config does with positions.

    Parameters
    ----------
    config_or_path : mapping or path
        A config.json as a dict, its path, or its model directory.
    assume : mapping, optional
        Conventions for a ``model_type`` the family table does not know (keys :data:`ASSUMABLE`):
        ``{"family": "llama"}``, or ``{"encoding": "rope", "layout": "half"}``. Ignored, with a note, for a
        known family.
    strict : bool
        Raise ``ValueError`` when the resolution is not complete.
    transformers_version : str, optional
        The transformers release whose code the model runs (``"5.24.0"``), over the config's own
        ``transformers_version`` key: a family whose position code changed between releases has a row per range
        (:mod:`refpos.models.releases`); when neither says and the rows disagree, its layers are refused, naming
        ``transformers_version``.

    Returns
    -------
    ModelPositions: ``layers`` (one record per layer, encoder stack first; each kind's record is its kind's
    (:data:`refpos.models.kinds.KINDS`)), ``not_modelled``, ``unknown``, ``notes``, ``summary()``, ``describe()``.

    See Also
    --------
    refpos.models.kinds.KINDS : the encoding kinds, each with its builder and layer record.
    refpos.models.families.family_of : the family-table row of a model type.
    """
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool, got {type(strict).__name__}")
    if assume is not None and not isinstance(assume, Mapping):
        raise TypeError(f"assume must be a mapping of conventions, got {type(assume).__name__}")
    top = ConfigView.load(config_or_path)
    lm = language_view(top)
    prefix, parent = lm.path, lm.wrapper_model_type
    written = lm.raw.get("model_type", parent)
    if written is not None and not isinstance(written, str):
        raise TypeError(f"{prefix}model_type must be a string, a transformers model type such as 'llama', got "
                        f"{type(written).__name__} {written!r}")
    lm.mark("model_type")
    family, notes, assumed = family_of(written), [], dict(assume or {})
    release = release_of(top.raw, transformers_version)
    if top.has("transformers_version"):
        top.mark("transformers_version")
    family, unknown_release = row_for(family, release)
    if assume is not None:
        family, notes = _assumed(family, written, assume)
    parts = parts_of(top)
    if lm is top and parts and not is_network(top) and family is None:  # a composite of its parts alone
        positions = ModelPositions(written, None, (), prefix)
    elif family is None:
        positions = _unknown(lm, written)
    else:
        positions = _known(lm, family, written)
    positions = _wrapper_unmodelled(positions, parent)
    for part in parts:
        positions = _with_part(positions, part, release)
    if unknown_release is not None:
        why = {"transformers_version": unknown_release}
        positions = replace(positions, layers=tuple(_refuse_unmodelled(list(positions.layers), why, "")),
                            not_modelled={**positions.not_modelled, **why})
    positions = replace(positions, notes=(*notes, *positions.notes), assumed=assumed)
    if strict and not positions.complete:
        problems = {**positions.unknown, **positions.not_modelled}
        problems.update({f"{layer.stack} layer {layer.index}": getattr(layer, "reason", "")
                         for layer in positions.layers if layer.kind == "refused"})
        key, why = next(iter(problems.items()))
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(f"strict: not modelled, refused or unknown: {key}: {why}{more}")
    return positions


def _assumed(family: Family | None, written: str | None,
             assume: Mapping[str, str]) -> tuple[Family | None, list[str]]:
    """The row stated conventions make for an unknown family; a known family keeps its own row."""
    wrong = sorted(set(map(str, assume)) - set(ASSUMABLE))
    if wrong or not all(isinstance(v, str) for v in assume.values()):
        raise ValueError(f"assume takes {list(ASSUMABLE)} with str values, got {dict(assume)!r}")
    if family is not None:
        return family, [f"assume={dict(assume)} ignored: the family table knows {family.model_type!r}"]
    if "family" in assume:
        base = family_of(assume["family"])
        if base is None:
            raise ValueError(f"assume family={assume['family']!r} is not a model_type of the family table")
        stated = {k: v for k, v in assume.items() if k != "family"}
    else:
        base, stated = Family(written or "unknown", STATED, "half"), dict(assume)
    values: dict[str, Any] = {name: stated[name] for name in ("layout", "stacks", "rope_layers") if name in stated}
    if "encoding" in stated:
        values["positions"] = StackFacts(stated["encoding"], base.positions.facts)
        values.update(encoder=None, decoder=None, switch=None)
    values.setdefault("layout", base.layout if base.layout is not None else "half")
    try:
        row = replace(base, model_type=written or base.model_type, source=STATED, **values)
        row.positions.check("assume")
    except ValueError as exc:
        raise ValueError(f"assume: {exc}") from None
    return row, [f"conventions stated by the caller, not read from the model's code: {dict(assume)}"]


def _unknown(lm: ConfigView, written: str | None) -> ModelPositions:
    named = "no model_type" if written is None else f"model_type {written!r}"
    try:
        n = layer_count(lm.raw)
    except LayerCountMissing:
        n = 1
    stated = {lm.name(key): lm.raw[key] for key in (*STATED_KEYS, *position_keys()) if lm.raw.get(key) is not None}
    missing = ("encoding", "layout", "which layers carry positions")
    layers = tuple(Unknown("model", i, None, stated=stated, unknown=missing) for i in range(n))  # encoder or decoder?
    what = (f"{named} is not in refpos's family table: its encoding, pair layout and which layers carry positions "
            "are unknown; state them: assume={'family': <a known model_type>} or {'encoding': 'rope', "
            "'layout': 'half'} (refpos golden model / check: --assume family=llama)")
    return ModelPositions(written, None, layers, lm.path, unknown={lm.name("model_type"): what})


def _known(lm: ConfigView, family: Family, written: str | None,
           reads: Mapping[str, tuple[str, ...]] | None = None) -> ModelPositions:
    """Every stack of a family the table knows: each stack's kind builds its layers (:data:`KINDS`); ``reads``:
    what a composite's row says this part's positions are read from."""
    names = STACKS[family.stacks]
    layers: list[LayerRecord] = []
    not_modelled: dict[str, str] = {}
    notes: list[str] = []
    #: keys the resolution honours beyond the kinds' own: the switch, and the layer types of a schedule
    honoured = {lm.name(key) for key in ("layer_types", family.types_key)}
    if family.switch is not None:
        honoured.add(lm.name(family.switch.key))
    for name in names:
        role = "single" if len(names) == 1 else name
        facts = family.stack(name)
        encoding, value = family.switched(lm.raw, facts.encoding)
        if family.switch is not None:
            lm.mark(family.switch.key)
        if encoding is None:  # a value of the switch the row does not model: its attention layers are refused
            assert family.switch is not None
            why = (f"{family.switch.key}={value}: {family.model_type}'s positions for this value are not modelled "
                   f"(modelled: {', '.join(f'{v} ({e})' for v, e in family.switch.values)})")
            shape = KINDS["none"].build(Stack(lm, name, role, family, schedule=SCHEDULE))  # type: ignore[misc]
            layers += [layer if not layer.attention else Refused(name, layer.index, layer.layer_type, reason=why)
                       for layer in shape]
            not_modelled[lm.name(family.switch.key)] = why
            continue
        stack = Stack(lm, name, role, family, facts.facts_of(encoding), SCHEDULE, reads=dict(reads or {}))
        try:
            stack_layers = _build(stack, encoding)
        except ValueError:  # a config the row says refpos does not model may lack what a modelled one states
            if not family.unmodelled:
                raise
            why = f"{family.model_type}: {family.unmodelled}"
            stack_layers = [Refused(name, i, None, reason=why) for i in range(_count(lm, family))]
            stack.not_modelled.clear()
            stack.not_modelled[lm.name("model_type")] = why
        layers += _input_site(lm, family, name, role) + stack_layers
        not_modelled.update({key: why for key, why in stack.not_modelled.items() if key not in honoured})
        notes += [note for note in stack.notes if note not in notes]
    if not any(isinstance(layer, RopeLayer) for layer in layers):  # a RoPE schedule reports its own keys
        for key, (_, what) in position_keys().items():
            if lm.name(key) not in lm.read and key in lm.raw and is_active(lm.raw, key):
                not_modelled.setdefault(lm.name(key), what)
        if family.unmodelled:
            not_modelled.setdefault(lm.name("model_type"), f"{family.model_type}: {family.unmodelled}")
        if family.note and f"{family.model_type}: {family.note}" not in notes:
            notes.append(f"{family.model_type}: {family.note}")
    layers = with_indexers(_refuse_unmodelled(layers, not_modelled, lm.path), lm.raw)
    return ModelPositions(family.model_type if written is None else written, family, tuple(layers), lm.path,
                          not_modelled, notes=tuple(notes), scheduled=NO_COUNT not in notes)


def _with_part(positions: ModelPositions, part: Part, release: str | None) -> ModelPositions:
    """``positions`` with the layers of one more network: resolved by its own family row (for the config's
    release), its stacks named for its place, reading what the composite's row says it reads; a network whose model
    type the table does not know is refused by name, never left out."""
    family, unknown_release = row_for(family_of(part.model_type) if part.model_type else None, release)
    named = "no model_type" if part.model_type is None else f"model_type {part.model_type!r}"
    if family is None:
        why = (f"{part.key} ({named}): not in refpos's family table, so the positions of this network are not "
               "modelled")
        try:
            n = part.view.count(GEOMETRY_KEYS["single"]["layers"], "layer count")
        except ValueError:
            n = 1
        layers: tuple[LayerRecord, ...] = tuple(Refused(part.name, i, None, reason=why) for i in range(n))
        report = {part.view.name("model_type"): why}
        notes: tuple[str, ...] = ()
    else:
        own = _known(part.view, family, part.model_type, part_reads(part))
        single = STACKS[family.stacks][0] if len(STACKS[family.stacks]) == 1 else None

        def renamed(stack: str) -> str:  # a single stack takes the part's name; several are the part's members
            return part.name + stack[len(single):] if single and stack.startswith(single) else f"{part.name}.{stack}"

        layers = tuple(replace(layer, stack=renamed(layer.stack)) for layer in own.layers)
        report, notes = dict(own.not_modelled), own.notes
        if unknown_release is not None:
            report[part.view.name("model_type")] = unknown_release
            layers = tuple(_refuse_unmodelled(list(layers), {"transformers_version": unknown_release}, ""))
    return replace(positions, layers=(*positions.layers, *layers), not_modelled={**positions.not_modelled, **report},
                   notes=(*positions.notes, *(n for n in notes if n not in positions.notes)),
                   parts=(*positions.parts, (part.name, part.key, part.model_type)))


def _input_site(lm: ConfigView, family: Family, name: str, role: str) -> list[LayerRecord]:
    """The one record of what stack ``name`` adds to its input before its first layer (the row's ``input``:
    a convolution over the frames, a resampled grid), as a stack of its own, ``<name>.input``; none when the
    row has no input embedding or its ``input_when`` key turns it off."""
    if family.input is None:
        return []
    if family.input_when is not None:
        lm.mark(family.input_when[0])
    if not family.input_on(lm.raw):
        return []
    encoding = family.input.encoding
    records = _build(Stack(lm, f"{name}.input", role, family, family.input.facts_of(encoding), SCHEDULE), encoding)
    return [replace(records[0], index=0)]


def _build(stack: Stack, encoding: str) -> list[LayerRecord]:
    """The records of one stack: its kind's builder, or every layer refused when no kind models ``encoding``."""
    kind = KINDS.get(encoding)
    if kind is None or kind.build is None:
        why = f"{stack.family.model_type if stack.family else 'the model'}: {encoding} positions are not modelled yet"
        return [Refused(stack.name, i, None, reason=why) for i in range(stack.geometry().layers)]
    return kind.build(stack)


def _wrapper_unmodelled(positions: ModelPositions, parent: Any) -> ModelPositions:
    """A wrapper whose row says what refpos does not model (DiffusionGemma runs its text config as an encoder
    and a decoder stack): the top-level ``model_type`` not modelled, every attention layer refused by name."""
    wrapper = family_of(parent) if isinstance(parent, str) else None
    if wrapper is None or not wrapper.unmodelled:
        return positions
    why = {"model_type": f"{wrapper.model_type}: {wrapper.unmodelled}"}
    return replace(positions, layers=tuple(_refuse_unmodelled(list(positions.layers), why, "")),
                   not_modelled={**positions.not_modelled, **why})


def _count(lm: ConfigView, family: Family) -> int:
    try:
        return layer_count(lm.raw, family)
    except LayerCountMissing:
        return 1


def _refuse_unmodelled(layers: list[LayerRecord], not_modelled: Mapping[str, str], prefix: str) -> list[LayerRecord]:
    """Refuse the attention layers of every stack when a not-modelled key changes positions (not a mask or a
    scale of :data:`ATTENTION_ONLY`): no record resolves as if the key were absent. A stack's input embedding
    (``<stack>.input``) is computed before any attention and stays."""
    changing = {key: why for key, why in not_modelled.items() if key[len(prefix):] not in ATTENTION_ONLY}
    if not changing:
        return layers
    reason = "; ".join(f"{key}: {why}" for key, why in sorted(changing.items()))
    return [layer if not layer.attention or layer.kind == "refused" or layer.stack.endswith(".input") else
            Refused(layer.stack, layer.index, layer.layer_type, reason=reason) for layer in layers]


__all__ = ["ASSUMABLE", "ModelPositions", "model_positions"]
