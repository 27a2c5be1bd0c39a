r"""What an encoding kind is: one :class:`EncodingKind` record, and the stack it builds layers for.

An *encoding kind* is one way a layer's attention learns positions: a rotation (RoPE), an additive bias
(ALiBi, T5 buckets, a Swin window table), a table added to the input (learned, sinusoidal, a resampled 2-D
grid), none at all. Everything that varies from one kind to the next is a field of its record, so that every
consumer is derived from the registry (:mod:`refpos.models.kinds.registry`) instead of naming the kind:

==============  ==================================================================================================
piece           what the record holds
==============  ==================================================================================================
``facts``       the dataclass of what a model's code fixes about the kind (a sub-table of a family-table row,
                named as the kind: ``[family.bloom.alibi]``); read and checked by :func:`read_facts`
``build``       the builder: a :class:`Stack` (the config view of one stack, its family row and facts) →
                one layer record per layer
``record``      the :class:`~refpos.models.records.LayerRecord` subclass it builds (``record.kind`` is the name)
``hook``        where it acts in attention (:data:`HOOKS`): the :class:`refpos.Encoding` hook its records'
                ``encoding()`` fills
``reads``       which inputs its layers read (:data:`INPUTS`: position ids, the token's slot, the attention mask, the
                image grid, …)
``check``       the ``refpos check`` target that compares a candidate with it (a record of the check registry,
                :data:`refpos.check.targets.TARGETS`, that lists this kind)
``golden``      the golden cases' id prefix (``golden/cases/<prefix>/…``: a family of the golden registry,
                :data:`refpos.golden.registry.FAMILIES`, that covers this kind)
``contract``    the adapter-contract functions the spec suite calls for it (``spec_tests/README.md``)
``spec``        the spec-suite module of its properties (``spec_tests/test_<…>.py``)
``draw``        a Hypothesis draw of valid parameters of its formula (``(draw, st) -> dict``; refpos itself does
                not import Hypothesis)
``doc``         its docs section (``docs/<page>.md#<anchor>``)
``example``     a config (and the family-table facts) whose stack builds records of this kind: the registry's
                meta-test builds it
==============  ==================================================================================================

A piece a kind cannot have says why in ``absent`` (``{"check": "a layer without attention has nothing to
compare"}``); the meta-test (``refpos/tests/test_kinds_registry.py``) asks every record for every piece and
accepts only a present piece or a stated reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from refpos.models.position_keys import INERT_GROUPS
from refpos.models.records import LayerRecord
from refpos.models.sources import INPUTS
from refpos.models.view import ConfigView
from refpos.validation import check_int

#: a family-table row (:class:`refpos.models.families.Family`; the table reads the kinds' facts, so this module
#: names the type without importing it)
Family = Any

#: where a kind acts in attention (the :class:`refpos.Encoding` hooks, and ``"none"`` for no positions at all)
HOOKS = ("input", "rotate", "bias", "qk_terms", "temperature", "none")
#: the pieces every record is asked for (the meta-test's list)
PIECES = ("facts", "build", "record", "check", "golden", "contract", "spec", "draw", "doc", "example")
#: stack roles: the one stack of a model, or one stack of an encoder–decoder model
ROLES = ("single", "encoder", "decoder")

#: role → config keys of a stack's layer count, head count and width, the first present wins (transformers'
#: config classes name them differently: GPT-2's ``n_layer`` / ``n_head`` / ``n_embd``, BART's
#: ``encoder_layers`` / ``encoder_attention_heads`` / ``d_model``, T5's ``num_layers`` / ``num_heads``; a
#: Whisper-style audio encoder alone, the single stack of its model: ``encoder_layers``; a BART-style decoder alone,
#: TrOCR's: ``decoder_layers``; Kosmos-2's text model: ``layers``; ProphetNet's ``num_encoder_layers`` /
#: ``num_encoder_attention_heads``)
GEOMETRY_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "single": {"layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "depth", "encoder_layers",
                          "decoder_layers", "layers", "num_blocks"),
               "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads",
                         "encoder_attention_heads", "decoder_attention_heads"),
               "width": ("hidden_size", "n_embd", "n_embed", "d_model", "dim", "emb_dim", "embed_dim")},
    "encoder": {"layers": ("encoder_layers", "num_encoder_layers", "num_layers", "num_hidden_layers"),
                "heads": ("encoder_attention_heads", "num_encoder_attention_heads", "num_heads",
                          "num_attention_heads"),
                "width": ("d_model", "hidden_size")},
    "decoder": {"layers": ("decoder_layers", "num_decoder_layers", "num_layers", "num_hidden_layers"),
                "heads": ("decoder_attention_heads", "num_decoder_attention_heads", "num_heads",
                          "num_attention_heads"),
                "width": ("d_model", "hidden_size")},
    "predictor": {"layers": ("pred_num_hidden_layers",), "heads": ("pred_num_attention_heads",),
                  "width": ("pred_hidden_size",)},
    "spatial": {"layers": ("num_spatial_layers",), "heads": ("num_attention_heads",), "width": ("hidden_size",)},
    "temporal": {"layers": ("num_temporal_layers",), "heads": ("num_attention_heads",), "width": ("hidden_size",)},
}


#: the geometry of the examples of the kinds' records (two layers, two heads of 8 channels)
EXAMPLE_GEOMETRY = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16}


@dataclass(frozen=True)
class Geometry:
    """A stack's layer count, head count and width."""

    layers: int
    heads: int
    width: int

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


class Schedule(Protocol):
    """The layer schedule a family's stack runs (:mod:`refpos.models.layers`), given to the builders that need it
    (RoPE, and attention without positions) by the resolver, which sits above the family table."""

    def layers(self, view: ConfigView, family: Family, *, rope_on: bool) -> tuple[Any, list[str]]:
        """The :class:`refpos.models.layers.LayerSchedule` of ``view`` and what ``strict`` refuses in it."""

    def count(self, view: ConfigView, family: Family) -> int | None:
        """The stack's layer count as the family's config class gives it (``None``: the config does not say)."""

    def layer_types(self, view: ConfigView) -> tuple[str, ...]:
        """The layer types of a per-layer-type rope dict (empty for one RoPE)."""

    def rope(self, view: ConfigView, layer_type: str | None, family: Family) -> Any:
        """The :class:`refpos.RopeConfig` of one layer type, resolved alone (no schedule)."""


@dataclass(frozen=True)
class Stack:
    """What a kind's builder is given: one stack of one part of a config.

    ``view`` is the part's config section (its keys are read through it, so what no builder read is known);
    ``reads``: what a composite's row says this part's positions are read from (use → source), overriding its
    kind's (π0.5's action expert turns by the running count of the prefix's mask);
    ``name`` the stack's name as records carry it (``"decoder"``, ``"encoder"``, ``"vision"``, …); ``role`` which
    geometry keys it reads (:data:`GEOMETRY_KEYS`); ``family`` the part's family-table row; ``facts`` the
    kind's facts from that row (its defaults when the row gives none); ``schedule`` the layer schedule
    (:class:`Schedule`). A builder reports what it met and did not model in ``not_modelled`` (key → what it
    does) and what the reader should know in ``notes``.
    """

    view: ConfigView
    name: str
    role: str
    family: Family | None
    facts: Any = None
    schedule: Schedule | None = None
    not_modelled: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: a site added once before the stack's layers (its input): one layer deep, whatever the stack's layer count
    once: bool = False

    def geometry(self) -> Geometry:
        """The stack's layer count (1 for a site added ``once``), head count and width (the first present key of
        each list)."""
        keys = GEOMETRY_KEYS[self.role]
        layers = 1 if self.once else self.view.count(keys["layers"], "layer count")
        return Geometry(layers, self.view.count(keys["heads"], "head count"), self.view.count(keys["width"],
                                                                                              "hidden width"))


def check_fact(where: str, ok: bool, what: str, value: Any) -> None:
    """A ``ValueError`` naming the family row (``where``) and the fact when ``ok`` is false."""
    if not ok:
        raise ValueError(f"{where}: {what} holds a value outside its rule set ({value!r})")


def no_facts(where: str, table: Any) -> None:
    """A kind without facts takes no sub-table."""
    raise ValueError(f"{where}: this encoding has no facts to state, got {table!r}")


@dataclass(frozen=True)
class EncodingKind:
    """One encoding kind: its pieces (see the module docstring's table).

    Parameters
    ----------
    name : str
        The kind, as layer records carry it (``record.kind``) and family rows name it (``encoding``).
    summary : str
        One line: what the kind does, for the docs table and ``refpos positions``.
    record : type
        The layer record the builder returns.
    build : callable ``Stack -> list of LayerRecord``
        The builder (``None`` for a kind another kind's builder makes: M-RoPE comes from RoPE's).
    hook : str
        One of :data:`HOOKS`.
    reads : tuple of str
        Keys of :data:`INPUTS`.
    doc : str
        ``docs/<page>.md#<anchor>``.
    facts : type or None
        The dataclass of its facts (with a ``check(where)`` method), or ``None``.
    check, golden, spec : str or None
        The ``refpos check`` target, the golden case prefix, the spec-suite module (``spec_tests/…``).
    contract : tuple of str
        The adapter-contract functions of its spec tests.
    draw : callable ``(draw, st) -> dict`` or None
        Valid parameters of the kind's formula, drawn with Hypothesis.
    example : mapping
        ``{"config": {...}, "facts": {...}}``: a config section whose stack builds this kind (``facts``: the
        family-table sub-table, optional).
    in_table : bool
        A family row may name it as its ``encoding`` (False for kinds another builder makes).
    modalities : tuple of str
        ``"text"``, ``"vision"``, ``"audio"``: the inputs of the models that use it.
    absent : mapping
        piece → why the kind has none.
    inert : tuple of str
        Groups of :data:`refpos.models.position_keys.INERT_GROUPS` whose keys a layer of this kind reads without
        effect (an ALiBi layer neither rotates nor has a table a length would size): a resolution whose every layer
        is of such kinds records them as read (:func:`refpos.models.positions.model_positions`).
    """

    name: str
    summary: str
    record: type
    build: Callable[[Stack], list[LayerRecord]] | None
    hook: str
    reads: tuple[str, ...]
    doc: str
    facts: type | None = None
    check: str | None = None
    golden: str | None = None
    contract: tuple[str, ...] = ()
    spec: str | None = None
    draw: Callable[[Any, Any], dict[str, Any]] | None = None
    example: Mapping[str, Any] = field(default_factory=dict)
    in_table: bool = True
    modalities: tuple[str, ...] = ("text",)
    absent: Mapping[str, str] = field(default_factory=dict)
    inert: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.hook not in HOOKS:
            raise ValueError(f"kind {self.name!r}: hook must be one of {HOOKS}, got {self.hook!r}")
        unknown = [r for r in self.reads if r not in INPUTS]
        if unknown:
            raise ValueError(f"kind {self.name!r}: reads names inputs that are not in INPUTS: {unknown}")
        if not set(self.inert) <= set(INERT_GROUPS):
            raise ValueError(f"kind {self.name!r}: inert names groups that are not in INERT_GROUPS: {self.inert}")
        stray = sorted(set(self.absent) - set(PIECES))
        if stray:
            raise ValueError(f"kind {self.name!r}: absent names pieces that do not exist: {stray}")

    def piece(self, name: str) -> Any:
        """The piece ``name`` (:data:`PIECES`), ``None`` when absent."""
        value = getattr(self, name)
        return value if value not in ((), {}) else None

    def read_facts(self, where: str, table: Any) -> Any:
        """The kind's facts from a family row's sub-table (a ``ValueError`` naming ``where`` and the keys)."""
        if self.facts is None:
            no_facts(where, table)
        allowed = {f.name for f in fields(self.facts)}
        if not isinstance(table, Mapping) or set(table) - allowed:
            raise ValueError(f"{where}: {self.name} takes {sorted(allowed)}, got {table!r}")
        facts = self.facts(**table)
        facts.check(where)
        return facts

    def default_facts(self) -> Any:
        """The kind's facts when a row states none (``None`` for a kind without facts)."""
        return None if self.facts is None else self.facts()


def layer_count(view: ConfigView, role: str) -> int:
    """A stack's layer count alone (kinds whose layers need neither heads nor width)."""
    return view.count(GEOMETRY_KEYS[role]["layers"], "layer count")


def stack_width(view: ConfigView, role: str) -> int:
    """A stack's width alone (an input embedding needs neither the layers nor the heads)."""
    return view.count(GEOMETRY_KEYS[role]["width"], "hidden width")


def positive_int(view: ConfigView, key: str, default: Any = None) -> int:
    """A positive integer at ``key`` of ``view`` (``default`` when absent), named by its full path."""
    return check_int(view.name(key), view.value(key, default), minimum=1)


__all__ = ["EXAMPLE_GEOMETRY", "GEOMETRY_KEYS", "HOOKS", "INPUTS", "PIECES", "ROLES", "EncodingKind", "Geometry",
           "Schedule", "Stack", "check_fact",
           "layer_count", "no_facts", "positive_int", "stack_width"]
