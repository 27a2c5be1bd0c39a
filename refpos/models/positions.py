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

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from refpos.models.answer import ModelPositions
from refpos.models.cross import cross_records
from refpos.models.facts import STACKS
from refpos.models.families import Family, family_of
from refpos.models.hf_files import language_view
from refpos.models.indexer import with_indexers
from refpos.models.kinds import KINDS, Stack
from refpos.models.kinds.record import GEOMETRY_KEYS
from refpos.models.kinds.rope import NO_COUNT, RopeLayer
from refpos.models.layers import SCHEDULE
from refpos.models.parts import Part, is_network, language_reads, part_reads, parts_of, stage_unmodelled
from refpos.models.position_keys import (
    ATTENTION_ONLY,
    BY_NAME,
    INERT_GROUPS,
    is_positional,
    position_keys,
    unread_positional,
)
from refpos.models.records import LayerRecord, NoPositions, Refused, Unknown
from refpos.models.releases import release_of, row_for
from refpos.models.schedule import LAYER_COUNT_KEYS, LayerCountMissing, layer_count
from refpos.models.stated import ASSUMABLE, stated_row
from refpos.models.view import ConfigView

#: config keys an unknown family's records report as stated (with every position key it has)
STATED_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "rotary_dim", "head_dim",
               "max_position_embeddings", "n_positions", "max_source_positions", "max_target_positions",
               "relative_attention_num_buckets", "relative_attention_max_distance")


# --------------------------------------------------------------------------------------------- resolve
def model_positions(config_or_path: Any, *, assume: Mapping[str, Any] | None = None,
                    strict: bool = False, transformers_version: str | None = None) -> ModelPositions:
    """What every layer of every stack of a transformers config does with positions.

    Parameters
    ----------
    config_or_path : mapping or path
        A config.json as a dict, its path, or its model directory.
    assume : mapping, optional
        The family row of a ``model_type`` the family table does not know, stated by the caller (keys
        :data:`ASSUMABLE`: the columns of a ``families.toml`` row, fact tables nested or dotted, and ``family`` to
        borrow a row; :func:`refpos.models.stated.stated_row` reads it as the table's rows are read):
        ``{"family": "llama"}``, ``{"encoding": "rope", "layout": "half", "rope.theta_key": "base"}``. Ignored,
        with a note, for a known family.
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
        positions = _known(lm, family, written, language_reads(lm))
    for wrapper in dict.fromkeys((parent, None if lm is top else top.raw.get("model_type"))):
        positions = _wrapper_unmodelled(positions, wrapper)
    for part in parts:
        positions = _with_part(positions, part, release)
    positions = replace(positions, not_modelled={**stage_unmodelled(top), **positions.not_modelled})
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
             assume: Mapping[str, Any]) -> tuple[Family | None, list[str]]:
    """An unknown family's row as stated by the caller (:func:`refpos.models.stated.stated_row`); a known: its own."""
    if family is not None:
        return family, [f"assume={dict(assume)} ignored: the family table knows {family.model_type!r}"]
    row = stated_row(written or "unknown", assume)
    return row, [f"conventions stated by the caller, not read from the model's code: {dict(assume)}"]


def _unknown(lm: ConfigView, written: str | None) -> ModelPositions:
    named = "no model_type" if written is None else f"model_type {written!r}"
    count = next((lm.raw[key] for key in LAYER_COUNT_KEYS if lm.raw.get(key) is not None), None)
    try:
        # a count per stack (LXMERT's {"language": 9, "cross_encoder": 5, "vision": 5}) follows no one schedule:
        # the family is unknown all the same, one record for the model, as for a count not stated
        n = 1 if isinstance(count, Mapping) else layer_count(lm.raw)
    except LayerCountMissing:
        n = 1
    stated = {lm.name(key): lm.raw[key] for key in lm.raw if lm.raw.get(key) is not None
              and (key in STATED_KEYS or key in position_keys() or is_positional(key))}
    missing = ("encoding", "layout", "which layers carry positions")
    layers = tuple(Unknown("model", i, None, stated=stated, unknown=missing) for i in range(n))  # encoder or decoder?
    return ModelPositions(written, None, layers, lm.path, unknown={lm.name("model_type"): unknown_why(named, stated)})


def unknown_why(named: str, stated: Mapping[str, Any]) -> str:
    """Why a family the table does not know is refused, with the positional keys its config states (each a
    column to state, or a key the stated row must name) and what to pass, the row's columns first."""
    keys = ", ".join(f"{key}={value!r}" for key, value in stated.items()) or "none"
    return (f"{named} is not in refpos's family table: its encoding, pair layout and which layers carry positions "
            f"are unknown (its config's positional keys: {keys}); state its row from the model's code: "
            "assume={'encoding': 'rope', 'layout': 'half', 'rope': {'theta_key': ...}} (--assume encoding=rope "
            "--assume layout=half, or --assume-file row.toml), or borrow a family's row: assume={'family': "
            "<a known model_type>} (--assume family=llama)")


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
    ignored = [key for key in family.ignores if key in lm.raw]
    for key in ignored:  # named for positions, not read for them by the family's code (the row's source says so)
        lm.mark(key)
    if ignored:
        notes.append(f"{family.model_type}: {', '.join(ignored)} read without effect: its code does not use "
                     f"{'it' if len(ignored) == 1 else 'them'} for positions")
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
            try:
                shape = KINDS["none"].build(Stack(lm, name, role, family, schedule=SCHEDULE))  # type: ignore[misc]
            except ValueError:  # a stack counting its layers in stages (Swin's depths): one record stands for it
                shape = [NoPositions(name, i, None) for i in range(_stack_count(lm, role))]
            layers += [layer if not layer.attention else Refused(name, layer.index, layer.layer_type, reason=why)
                       for layer in shape]
            not_modelled[lm.name(family.switch.key)] = why
            continue
        stack = Stack(lm, name, role, family, facts.facts_of(encoding), SCHEDULE, reads=dict(reads or {}))
        if facts.unmodelled is not None:  # this stack alone does what refpos does not model: its layers refused
            why = f"{family.model_type} {name}: {facts.unmodelled}"
            layers += _input_site(lm, family, name, role, not_modelled) + [
                Refused(name, i, None, reason=why) for i in range(_stack_count(lm, role))]
            continue
        try:
            stack_layers = _build(stack, encoding)
        except (TypeError, ValueError):  # a config the row says refpos does not model may lack or reshape keys
            if not family.unmodelled:
                raise
            why = f"{family.model_type}: {family.unmodelled}"
            stack_layers = [Refused(name, i, None, reason=why) for i in range(_count(lm, family))]
            stack.not_modelled.clear()
            stack.not_modelled[lm.name("model_type")] = why
        layers += _input_site(lm, family, name, role, not_modelled) + stack_layers + cross_records(
            lm, family, name, stack_layers) + _output_site(lm, family, name, role, not_modelled)
        not_modelled.update({key: why for key, why in stack.not_modelled.items() if key not in honoured})
        notes += [note for note in stack.notes if note not in notes]
    _mark_inert(lm, layers)
    _named_encoding(lm, layers)
    read = lm.read  # a key one step reported unread by name that another step read is honoured
    not_modelled = {key: why for key, why in not_modelled.items() if why != BY_NAME or key not in read}
    for key, what in {**unread_positional(lm), **family.architecture_gaps(lm.raw)}.items():  # (the one rule)
        not_modelled.setdefault(key, what)
    if not any(isinstance(layer, RopeLayer) for layer in layers):  # a RoPE schedule reports its own gaps
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


def _input_site(lm: ConfigView, family: Family, name: str, role: str,
                not_modelled: dict[str, str]) -> list[LayerRecord]:
    """What stack ``name`` adds to its input before its first layer (its own ``input``, else the row's: a convolution
    over the frames, a resampled grid, one per stage where each adds its own (PVT); then the row's ``input_beside``),
    as a stack ``<name>.input``; none when the row has no input embedding or its
    ``input_when`` key turns it off. What its builders do not model goes to ``not_modelled``."""
    if (site := family.input_of(name)) is None or not family.input_on(lm.raw, lm.mark):
        return []
    records = [record for one in [site, *family.beside_on(lm.raw, lm.mark)]
               for record in _site(lm, family, f"{name}.input", role, one, not_modelled, once=True)]
    return [replace(record, index=i) for i, record in enumerate(records)]


def _output_site(lm: ConfigView, family: Family, name: str, role: str,
                 not_modelled: dict[str, str]) -> list[LayerRecord]:
    """What a stage after stack ``name``'s last layer adds to the tokens it makes (the row's ``output``:
    Granite-Docling's connector), as a stack of its own, ``<name>.output``: one record per path of the stage."""
    return [] if family.output is None else _site(lm, family, f"{name}.output", role, family.output, not_modelled)


def _site(lm: ConfigView, family: Family, name: str, role: str, site: Any, not_modelled: dict[str, str],
          once: bool = False) -> list:
    """The records of a site before or after a stack's layers (``once``: added once, its stack one layer deep, so a
    kind built per layer gives one record); what its builder does not model to ``not_modelled``."""
    stack = Stack(lm, name, role, family, site.facts_of(site.encoding), SCHEDULE, once=once)
    records = _build(stack, site.encoding)
    not_modelled.update(stack.not_modelled)
    return records


def _build(stack: Stack, encoding: str) -> list[LayerRecord]:
    """The records of one stack: its kind's builder, or every layer refused when no kind models ``encoding``."""
    kind = KINDS.get(encoding)
    if kind is None or kind.build is None:
        why = f"{stack.family.model_type if stack.family else 'the model'}: {encoding} positions are not modelled yet"
        return [Refused(stack.name, i, None, reason=why) for i in range(stack.geometry().layers)]
    return kind.build(stack)


def _wrapper_unmodelled(positions: ModelPositions, parent: Any) -> ModelPositions:
    """A wrapper whose row says what refpos does not model (DiffusionGemma runs its text config as an encoder and a
    decoder stack): every attention layer refused."""
    wrapper = family_of(parent) if isinstance(parent, str) else None
    if wrapper is None or not wrapper.unmodelled:
        return positions
    why = {"model_type": f"{wrapper.model_type}: {wrapper.unmodelled}"}
    return replace(positions, layers=tuple(_refuse_unmodelled(list(positions.layers), why, "")),
                   not_modelled={**positions.not_modelled, **why})


def _stack_count(lm: ConfigView, role: str) -> int:
    """The layer count of one stack (its role's keys), or 1 when the config gives none."""
    try:
        return lm.count(GEOMETRY_KEYS[role]["layers"], "layer count")
    except ValueError:
        return 1


def _count(lm: ConfigView, family: Family) -> int:
    try:
        return layer_count(lm.raw, family)
    except LayerCountMissing:
        return 1


#: what a config's ``position_embedding_type`` value names, as encoding kinds (remote code spells it as it likes)
NAMED_ENCODINGS = {"rope": "rope", "rotary": "rope", "alibi": "alibi", "learned": "learned", "absolute": "learned",
                   "learned_absolute": "learned", "sinusoidal": "sinusoidal", "none": "none", "nope": "none"}


def _named_encoding(lm: ConfigView, layers: list[LayerRecord]) -> None:
    """Record ``position_embedding_type`` as read when its value names the kind every attention layer has (Jais'
    ``alibi`` with an ALiBi row): the key then says what the resolution did."""
    value = lm.raw.get("position_embedding_type")
    kinds = {layer.kind for layer in layers if layer.attention}
    if isinstance(value, str) and kinds and kinds == {NAMED_ENCODINGS.get(value.lower())}:
        lm.mark("position_embedding_type")


def _mark_inert(lm: ConfigView, layers: list[LayerRecord]) -> None:
    """Record as read the keys that no layer of the stacks can be changed by: the groups every built layer's kind
    names inert (:attr:`refpos.models.kinds.EncodingKind.inert`; an ALiBi or NoPE stack neither rotates nor has a
    table a length would size). A refused or unknown layer makes nothing inert."""
    kinds = {layer.kind for layer in layers}
    if not kinds or kinds & {"refused", "unknown"}:
        return
    groups = set.intersection(*(set(KINDS[kind].inert) if kind in KINDS else set() for kind in kinds))
    for group in sorted(groups):
        for key in INERT_GROUPS[group]:
            if key in lm.raw:
                lm.mark(key)


def _refuse_unmodelled(layers: list[LayerRecord], not_modelled: Mapping[str, str], prefix: str) -> list[LayerRecord]:
    """Refuse the attention layers of every stack when a not-modelled key changes positions (not a mask or a
    scale of :data:`ATTENTION_ONLY`): no record resolves as if the key were absent. A stack's input embedding
    (``<stack>.input``) is computed before any attention and stays, as does what a stage after its layers adds
    (``<stack>.output``), computed from no attention's positions."""
    changing = {key: why for key, why in not_modelled.items() if key[len(prefix):] not in ATTENTION_ONLY}
    if not changing:
        return layers
    reason = "; ".join(f"{key}: {why}" for key, why in sorted(changing.items()))
    return [layer if not layer.attention or layer.kind == "refused" or layer.stack.endswith((".input", ".output")) else
            Refused(layer.stack, layer.index, layer.layer_type, reason=reason) for layer in layers]


__all__ = ["ASSUMABLE", "ModelPositions", "model_positions"]
