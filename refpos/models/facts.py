"""The family table's facts per stack: which encoding kind each stack has, and what the model's code fixes about it.

A row of the family table (:mod:`refpos.models.families`) names its ``encoding`` and its ``stacks``; every
encoding kind with facts (:data:`refpos.models.kinds.registry.FACT_KINDS`) may hold them in a sub-table named as
the kind (``alibi = {form = "key_index", dtype = "float32"}``, ``rope = {theta = 10000.0, theta_fixed = true}``),
read and checked by the kind's record (:meth:`refpos.models.kinds.EncodingKind.read_facts`); each kind's module
documents its facts (:mod:`refpos.models.kinds.alibi`, :mod:`~refpos.models.kinds.t5`,
:mod:`~refpos.models.kinds.absolute`, :mod:`~refpos.models.kinds.deberta`, :mod:`~refpos.models.kinds.rope`, …).
This module reads the columns that say which kind a stack has:

``encoding``
    A kind of :data:`refpos.models.kinds.registry.TABLE_KINDS` (``"rope"``, the default; ``"alibi"``, ``"t5"``,
    ``"learned"``, ``"sinusoidal"``, ``"deberta"``, ``"none"``: attention without positions, ``"no_attention"``:
    every layer without attention, …).
``stacks``
    ``"decoder"`` (the default: a decoder-only model), ``"encoder"``, ``"encoder-decoder"``, ``"vision"`` or
    ``"audio"`` (an encoder of images or sound: a tower of a composite, or a model of its own),
    ``"encoder-predictor"`` (V-JEPA 2), ``"spatial-temporal"`` (VideoPrism's vision tower: a stack over each
    frame's patches, then a stack over each patch's frames), or ``"none"`` (a composite config that holds only its
    networks' configs).
``switch``
    A config key that chooses the encoding: ``{key = "alibi", values = {true = "alibi", false = "rope"},
    absent = "false"}`` (Falcon). ``key`` may be dotted (``attn_config.alibi``); each value is written as
    JSON text (``true``, ``"nope"`` is written ``nope``; ``"*"``: any other value the key holds); a value the
    row does not list refuses the stack, naming the key. ``absent``: the value the config class assumes without
    the key.
``encoder`` / ``decoder`` / ``predictor`` / ``spatial`` / ``temporal``
    A sub-table that overrides ``encoding`` and its facts for one stack (Whisper: a sinusoid for the encoder,
    a learned table for the decoder), or says what that stack does that refpos does not model (``unmodelled``:
    RT-DETR's deformable decoder), which refuses its layers alone.
``parts``
    Section path → the model type a composite's config class builds there whatever the section says
    (``{vision_config = "qwen3_vl_vision"}``: Qwen3-VL's hub config writes ``model_type: qwen3_vl`` in its
    vision section, and transformers builds ``Qwen3VLVisionConfig`` from it); :mod:`refpos.models.parts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from refpos.models.kinds import registry

#: a row's ``stacks`` -> the stacks its layers fall into: a language model (decoder, encoder, or both), a vision or
#: audio encoder, V-JEPA 2's encoder and predictor, VideoPrism's spatial and temporal stacks, or ``none`` (a composite
#: whose networks are all its parts)
STACKS = {"decoder": ("decoder",), "encoder": ("encoder",), "encoder-decoder": ("encoder", "decoder"),
          "vision": ("vision",), "audio": ("audio",), "encoder-predictor": ("encoder", "predictor"),
          "spatial-temporal": ("spatial", "temporal"), "none": ()}
#: the stacks a row may give a sub-table of their own (an encoding, facts, an input, or what it does unmodelled)
OWN_STACKS = ("encoder", "decoder", "predictor", "spatial", "temporal")


def _check(where: str, ok: bool, what: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"{where}: {what} holds a value outside its rule set ({value!r})")


@dataclass(frozen=True)
class Switch:
    """A config key choosing the encoding: value (JSON text) → encoding; ``absent``: the class default (``""``:
    the class has none, and a config without the key is refused)."""

    key: str
    values: tuple[tuple[str, str], ...]
    absent: str

    def check(self, where: str) -> None:
        _check(where, all(enc in registry.TABLE_KINDS for _, enc in self.values), "switch.values", dict(self.values))
        _check(where, self.absent in (*dict(self.values), ""), "switch.absent (one of its values)", self.absent)


@dataclass(frozen=True)
class StackFacts:
    """What one stack's attention does with positions: its encoding kind, and the facts of every kind the row
    states (``facts``: ``(kind, its facts)`` pairs, in the registry's order)."""

    encoding: str = "rope"
    facts: tuple[tuple[str, Any], ...] = ()
    #: what this stack does with positions that refpos does not model (its layers are refused, naming it)
    unmodelled: str | None = None

    def check(self, where: str) -> None:
        _check(where, self.encoding in registry.TABLE_KINDS, "encoding", self.encoding)
        _check(where, self.unmodelled is None or (isinstance(self.unmodelled, str) and bool(self.unmodelled)),
               "unmodelled", self.unmodelled)

    def facts_of(self, kind: str) -> Any:
        """The facts of ``kind`` (its defaults when the row gives none; ``None`` for a kind without facts)."""
        given = dict(self.facts).get(kind)
        return given if given is not None else registry.KINDS[kind].default_facts()


def read_stack(where: str, table: Mapping[str, Any], inherited: StackFacts | None = None) -> StackFacts:
    """A :class:`StackFacts` from a TOML table holding ``encoding`` and facts sub-tables (other keys ignored);
    ``inherited``: the row's own, which a stack's sub-table overrides kind by kind."""
    encoding = inherited.encoding if inherited is not None else "rope"
    if "encoding" in table:
        if not isinstance(table["encoding"], str):
            raise ValueError(f"{where}: encoding has the wrong type ({table['encoding']!r})")
        encoding = table["encoding"]
    facts = dict(inherited.facts) if inherited is not None else {}
    for name in registry.FACT_KINDS:
        if name in table:
            facts[name] = registry.KINDS[name].read_facts(where, table[name])
    unmodelled = table.get("unmodelled") if inherited is not None else None  # a stack's own sub-table only
    stack = StackFacts(encoding, tuple((name, facts[name]) for name in registry.FACT_KINDS if name in facts),
                       unmodelled)
    stack.check(where)
    active = stack.facts_of(encoding)
    if active is not None and encoding not in facts:  # the kind's defaults stand in: they must hold for it
        active.check(where)
    return stack


def read_switch(where: str, table: Any) -> Switch:
    """A :class:`Switch` from its TOML table ``{key, values, absent}`` (``absent`` left out: no class default)."""
    if not isinstance(table, dict) or not {"key", "values"} <= set(table) <= {"key", "values", "absent"} \
            or not isinstance(table["values"], dict) or not isinstance(table["key"], str):
        raise ValueError(f"{where}: switch takes key = \"…\", values = {{value = encoding, …}}, absent = \"…\"; "
                         f"got {table!r}")
    switch = Switch(table["key"], tuple((str(k), v) for k, v in table["values"].items()), str(table.get("absent", "")))
    switch.check(where)
    return switch


__all__ = ["OWN_STACKS", "STACKS", "StackFacts", "Switch", "read_stack", "read_switch"]
