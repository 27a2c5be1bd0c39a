r"""One typed record per layer: what that layer's attention does with positions — the base, and the records that are
outcomes rather than encodings.

:func:`refpos.model_positions` returns one record per layer of every stack (the decoder; the encoder and the
decoder of an encoder–decoder model; each tower of a composite). Each record names its ``stack``, its ``index`` in
that stack and its ``layer_type``, says its ``kind``, gives its parameters as JSON (:meth:`LayerRecord.params`)
and builds the :class:`refpos.Encoding` that :func:`refpos.self_attention` runs for it
(:meth:`LayerRecord.encoding`; the kinds with trained weights take them as arguments). Each record says which
inputs of the model's forward its positions come from (``reads``, set by its kind's builder from the family's
code: :mod:`refpos.models.sources`), and its methods take those inputs by name.

Each encoding kind's record sits with its kind (:mod:`refpos.models.kinds`: ``RopeLayer`` in
:mod:`~refpos.models.kinds.rope`, ``AlibiLayer`` in :mod:`~refpos.models.kinds.alibi`, …; the registry
:data:`refpos.models.kinds.KINDS` lists them). This module holds the base :class:`LayerRecord`, the records of the
layers without positions (:class:`NoPositions`, :class:`NoAttention`: their kinds are
:mod:`refpos.models.kinds.none`) and the two outcomes that are not kinds: :class:`Refused` (the layer does
something refpos does not model, named) and :class:`Unknown` (the family is not in the table: what its config
states, nothing else).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from refpos.encoding import Encoding, NoPE, QueryScaled
from refpos.models.query_scales import QueryScale
from refpos.models.sources import Given, Source, check_reads

Array = Any


def round_to(a: Any, dtype: str) -> np.ndarray:
    """``a`` (float64) rounded to ``dtype`` as a model's code stores it, returned in float64.

    ``float32``: round to nearest float32. ``bfloat16``: to float32 first, then keep the top 16 bits with
    round-to-nearest-even (the rounding torch applies, float32 arithmetic then a bfloat16 result).
    """
    a = np.asarray(a, dtype=np.float64)
    if dtype == "float64":
        return a
    single = a.astype(np.float32)
    if dtype == "float32":
        return single.astype(np.float64)
    bits = single.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32).astype(np.float64)


@dataclass(frozen=True)
class LayerRecord:
    """Where a layer is: its stack, its index there and its layer type; subclasses say what it does.

    ``reads``: what its positions serve → the inputs of the model's forward they are read from, in order of
    precedence (:mod:`refpos.models.sources`: ``(("rotation", ("position_ids", "cache_position")),)`` for RoPE,
    ``(("key", ("mask_cumsum",)),)`` for Falcon's ALiBi); set by the kind's builder from the family's code.
    """

    stack: str
    index: int
    layer_type: str | None
    reads: tuple[tuple[str, Source], ...] = field(default=(), kw_only=True)
    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        check_reads(f"{self.stack} layer {self.index}", dict(self.reads))

    def source(self, use: str) -> Source:
        """The inputs the layer reads for ``use`` (``"rotation"``, ``"scale"``, ``"query"``, ``"key"``,
        ``"rows"``); a ``ValueError`` when its positions serve no such use."""
        found = dict(self.reads).get(use)
        if found is None:
            raise ValueError(f"{self.stack} layer {self.index} ({self.kind}) reads no positions for {use!r}; it "
                             f"reads {dict(self.reads) or 'none'}")
        return found

    def read(self, use: str, side: str, given: Given, *, padding_idx: int | None = None) -> Any:
        """The positions ``use`` reads from the call's inputs ``given`` (``side``: ``"query"`` or ``"key"``)."""
        return given.read(self.source(use), side, who=f"{self.stack} layer {self.index} ({self.kind}, {use})",
                          padding_idx=padding_idx)

    @property
    def attention(self) -> bool:
        """False for a layer without attention (and so without positions)."""
        return True

    @property
    def label(self) -> str:
        """The kind as schedules print it (``rope+scale``, ``mamba``, ...)."""
        return self.kind

    def params(self) -> dict[str, Any]:
        """The record's parameters, JSON-ready."""
        return {}

    def describe(self) -> dict[str, Any]:
        """``{"stack", "index", "layer_type", "kind", "reads", **params}``: one JSON object per layer."""
        return {"stack": self.stack, "index": self.index, "layer_type": self.layer_type, "kind": self.kind,
                "reads": {use: list(source) for use, source in self.reads}, **self.params()}

    def encoding(self, **weights: Any) -> Encoding:
        """The :class:`refpos.Encoding` that runs this layer in :func:`refpos.self_attention`, reading what the
        layer reads (its ``reads`` set on the encoding: the pipeline takes each hook's positions from them)."""
        built = self._encoding(**weights)
        built.reads = dict(self.reads)
        return built

    def _encoding(self, **weights: Any) -> Encoding:
        raise ValueError(f"{self.stack} layer {self.index} ({self.kind}): {self._why_not()}")

    def _why_not(self) -> str:
        return "nothing for the attention pipeline to run"


def scaled(encoding: Encoding, scale: QueryScale | None) -> Encoding:
    """``encoding`` with the layer's query scale applied (itself when the layer has none)."""
    return encoding if scale is None else QueryScaled(encoding, scale)


def scale_reads(scale: QueryScale | None) -> tuple[tuple[str, Source], ...]:
    """The ``reads`` entry of a layer's query scale: the input its rule reads (none without a scale)."""
    return () if scale is None else (("scale", scale.reads),)


def query_scale_of(layer: Any, given: Given) -> np.ndarray:
    """The query scale of ``layer`` (a record with ``query_scale``) at the call's tokens ``given``: ones without a
    rule, else the rule at the positions its ``scale`` source reads."""
    if layer.query_scale is None:
        return np.ones(given.shape, dtype=np.float64)
    return layer.query_scale(np.asarray(layer.read("scale", "query", given), dtype=np.int64))


@dataclass(frozen=True)
class NoPositions(LayerRecord):
    """Attention without positions (NoPE), perhaps with a query scale (Llama 4's layers without RoPE)."""

    query_scale: QueryScale | None = None
    kind: ClassVar[str] = "none"

    @property
    def label(self) -> str:
        return "none" + ("+scale" if self.query_scale else "")

    def params(self) -> dict[str, Any]:
        return {"query_scale": None if self.query_scale is None else self.query_scale.as_dict()}

    def scale(self, positions: Any = None, *, cache_position: Any = None, attention_mask: Any = None) -> np.ndarray:
        """The query's scale at the call's tokens (1 without a rule), read from the input its rule reads."""
        return query_scale_of(self, Given.of(positions=positions, cache_position=cache_position,
                                             attention_mask=attention_mask))

    def _encoding(self, **weights: Any) -> Encoding:
        return scaled(NoPE(), self.query_scale)


@dataclass(frozen=True)
class NoAttention(LayerRecord):
    """A layer without attention (``mixer``: ``"mamba"``, ``"conv"``, ``"linear"``, ``"recurrent"``, ...)."""

    mixer: str = "mamba"
    kind: ClassVar[str] = "no_attention"

    @property
    def attention(self) -> bool:
        return False

    @property
    def label(self) -> str:
        return self.mixer

    def params(self) -> dict[str, Any]:
        return {"mixer": self.mixer}

    def _why_not(self) -> str:
        return f"a {self.mixer} layer has no attention, so no positions"


@dataclass(frozen=True)
class Refused(LayerRecord):
    """A layer whose positions refpos does not model: ``reason`` names the key or the code."""

    reason: str = ""
    kind: ClassVar[str] = "refused"

    def params(self) -> dict[str, Any]:
        return {"reason": self.reason}

    def _why_not(self) -> str:
        return f"not modelled: {self.reason}"


@dataclass(frozen=True)
class Unknown(LayerRecord):
    """A layer of a family the table does not know: what its config states, the conventions it does not."""

    stated: Mapping[str, Any] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    kind: ClassVar[str] = "unknown"

    def params(self) -> dict[str, Any]:
        return {"stated": dict(self.stated), "unknown": list(self.unknown)}

    def _why_not(self) -> str:
        return f"its family is not in the table; unknown: {', '.join(self.unknown)}"


__all__ = ["LayerRecord", "NoAttention", "NoPositions", "Refused", "Unknown", "query_scale_of", "round_to",
           "scale_reads", "scaled"]
