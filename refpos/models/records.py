r"""One typed record per layer: what that layer's attention does with positions — the base, and the records that are
outcomes rather than encodings.

:func:`refpos.model_positions` returns one record per layer of every stack (the decoder; the encoder and the
decoder of an encoder–decoder model; each tower of a composite). Each record names its ``stack``, its ``index`` in
that stack and its ``layer_type``, says its ``kind``, gives its parameters as JSON (:meth:`LayerRecord.params`)
and builds the :class:`refpos.Encoding` that :func:`refpos.self_attention` runs for it
(:meth:`LayerRecord.encoding`; the kinds with trained weights take them as arguments).

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
    """Where a layer is: its stack, its index there and its layer type; subclasses say what it does."""

    stack: str
    index: int
    layer_type: str | None
    kind: ClassVar[str] = ""

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
        """``{"stack", "index", "layer_type", "kind", **params}``: one JSON object per layer."""
        return {"stack": self.stack, "index": self.index, "layer_type": self.layer_type, "kind": self.kind,
                **self.params()}

    def encoding(self, **weights: Any) -> Encoding:
        """The :class:`refpos.Encoding` that runs this layer in :func:`refpos.self_attention`."""
        raise ValueError(f"{self.stack} layer {self.index} ({self.kind}): {self._why_not()}")

    def _why_not(self) -> str:
        return "nothing for the attention pipeline to run"


def scaled(encoding: Encoding, scale: QueryScale | None) -> Encoding:
    """``encoding`` with the layer's query scale applied (itself when the layer has none)."""
    return encoding if scale is None else QueryScaled(encoding, scale)


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

    def encoding(self, **weights: Any) -> Encoding:
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


__all__ = ["LayerRecord", "NoAttention", "NoPositions", "Refused", "Unknown", "round_to", "scaled"]
