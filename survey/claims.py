"""What refpos says a model does with positions, in the survey's own terms (one record per layer).

The adaptor (:mod:`survey.adaptor`) turns refpos's answer for a config into a :class:`Resolution`; the
comparison (:mod:`survey.compare`) checks each :class:`LayerClaim` against what transformers' code did.
Keeping these types here, apart from refpos's, means a change of refpos's API changes the adaptor only.

Kinds of a layer claim (:data:`KINDS`):

``rope``
    the layer rotates its queries and keys: ``rope`` is a :class:`refpos.RopeConfig` (M-RoPE included),
    ``query_scale`` an optional per-position multiplier of the query;
``none``
    the layer attends without positions (NoPE), ``query_scale`` as above;
``no_attention``
    the layer has no attention (Mamba, linear attention, convolution): ``detail`` names its mixer;
``alibi``
    an additive bias ``-slope_h * distance``: ``params["slopes"]`` (one per head);
``t5``
    a bucketed relative bias: ``params`` holds ``bidirectional``, ``num_buckets``, ``max_distance``
    and ``owns_table`` (whether this layer has its own bias table);
``learned`` / ``sinusoidal``
    an absolute encoding added to the stack's input: ``params["offset"]`` (the row read for position 0),
    ``params["rows"]`` (the table size, learned), ``params["table"]`` (a callable positions -> vectors,
    sinusoidal); the layer's own attention has no positions;
``box_tables``
    a document model's box rows added to a stack's input (index −1): ``params["record"]`` (refpos's
    :class:`~refpos.models.kinds.box_tables.BoxTablesLayer`) and ``params["reads"]`` (boxes -> the rows each table
    is read at), checked by :func:`survey.boxes.check_boxes`;
``layout_bias``
    a document model's relative bias over buckets of token and box distances: ``params["record"]`` (refpos's
    :class:`~refpos.models.kinds.layout_bias.LayoutBiasLayer`), ``params["bias"]`` (tables, places, boxes -> the
    bias) and ``params["box_rows"]`` (the rows of the stack's box tables), checked by
    :func:`survey.layout_bias.check_layout_bias`;
``other``
    an encoding refpos resolves but the survey has no comparison for (``detail`` says which): reported as
    not reached.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("rope", "none", "no_attention", "alibi", "t5", "learned", "sinusoidal", "box_tables", "layout_bias", "other")
STACKS = ("decoder", "encoder")


@dataclass(frozen=True)
class LayerClaim:
    """What refpos says layer ``index`` of stack ``stack`` does with positions."""

    stack: str
    index: int
    kind: str
    rope: Any = None
    query_scale: Callable[[Any], Any] | None = None
    detail: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    #: use -> the inputs its positions are read from (:mod:`survey.sources`; position ids where unstated)
    reads: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the RoPE of the layer's indexer (a DSA indexer rotates its own query and key), where refpos gives one
    indexer: Any = None
    #: a constant added to every position read, and a factor of the rotated query and key: 0 and 1 for every
    #: claim refpos makes (the survey's mutants, :mod:`survey.mutants`, change them)
    offset: int = 0
    gain: float = 1.0
    #: ``"self"``, or ``"cross"``: the layer's cross-attention, whose keys are another sequence's (:mod:`survey.cross`)
    site: str = "self"

    def source(self, use: str) -> tuple[str, ...]:
        """The inputs ``use`` reads (:data:`survey.sources.DEFAULT` where the claim states none)."""
        from survey.sources import DEFAULT

        return self.reads.get(use, DEFAULT)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.site not in ("self", "cross"):
            raise ValueError(f"site must be 'self' or 'cross', got {self.site!r}")
        if self.stack not in STACKS:
            raise ValueError(f"stack must be one of {STACKS}, got {self.stack!r}")


@dataclass
class LayerResult:
    """One claim checked: ``status`` is ``"exact"``, ``"mismatch"`` or ``"not reached"``; ``index`` -1 for
    what concerns a whole stack."""

    stack: str
    index: int
    claim: str
    status: str
    error: float | None = None
    cause: str = ""


@dataclass(frozen=True)
class Resolution:
    """refpos's answer for one config: every layer's claim, or a refusal, or an error.

    ``refused`` is refpos declining to give (part of) the answer and naming what it does not model (the
    model type, a key); ``error`` is an exception that is no such refusal (refpos could not read a config
    transformers builds). ``notes`` are what refpos reported as not modelled that does not bear on positions
    (windows, softmax scales): kept in the table, not counted as a refusal.
    """

    layers: tuple[LayerClaim, ...] = ()
    refused: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()

    def stack(self, name: str) -> list[LayerClaim]:
        return [layer for layer in self.layers if layer.stack == name]

    @property
    def kinds(self) -> list[str]:
        """The distinct kinds of the claims, in order."""
        return list(dict.fromkeys(layer.kind for layer in self.layers))


def refused_layers(records: Any) -> list[str]:
    """One line per reason for the layers refpos refused, naming every layer that shares it:
    ``"encoder layer 0 and decoder layers 0-5: <reason>"``, in the order first seen, each reason said once rather
    than once per layer."""
    from refpos.check.shared.stream import ranges

    grouped: dict[str, dict[str, list[int]]] = {}
    for r in records:
        if r.kind == "refused":
            grouped.setdefault(r.reason, {}).setdefault(r.stack, []).append(r.index)
    return [" and ".join(f"{stack} layer{'s' if len(indices) > 1 else ''} {ranges(sorted(indices), dash='-')}"
                         for stack, indices in stacks.items()) + f": {reason}" for reason, stacks in grouped.items()]


def without_repeats(lines: list[str]) -> list[str]:
    """``lines`` in order, without duplicates and without a line whose whole text another line already holds as one
    of its clauses, after a ``": "`` or a ``"; "`` (a key's refusal that repeats a layer's reason)."""
    kept = list(dict.fromkeys(lines))
    return [line for line in kept
            if not any(other != line and (": " + line in other or "; " + line in other) for other in kept)]


def layers_summary(records: Any) -> str:
    """A row's ``layers`` column: each stack, in order, with the count of its records of each kind
    (``"decoder: rope ×8, none ×8"``)."""
    parts = []
    for stack in dict.fromkeys(r.stack for r in records):
        kinds: dict[str, int] = {}
        for r in records:
            if r.stack == stack:
                kinds[r.kind] = kinds.get(r.kind, 0) + 1
        parts.append(f"{stack}: " + ", ".join(f"{k} ×{n}" for k, n in kinds.items()))
    return "; ".join(parts)
