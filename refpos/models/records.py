r"""One typed record per layer: what that layer's attention does with positions.

:func:`refpos.model_positions` returns one record per layer of every stack (the decoder; the encoder and the
decoder of an encoder–decoder model). Each record names its ``stack``, its ``index`` in that stack and its
``layer_type``, says its ``kind``, gives its parameters as JSON (:meth:`LayerRecord.params`) and builds the
:class:`refpos.Encoding` that :func:`refpos.self_attention` runs for it (:meth:`LayerRecord.encoding`; the
kinds with trained weights take them as arguments).

==================  =====================================================================================
kind                record (ALiBi, T5 and DeBERTa: :mod:`refpos.models.records_relative`)
==================  =====================================================================================
``rope``, ``mrope`` :class:`RopeLayer`: a :class:`~refpos.RopeConfig` (M-RoPE when it has sections) and a
                    query scale
``alibi``           :class:`AlibiLayer`: the family's slopes, bias form, order and rounding
``t5``              :class:`T5Layer`: direction, bucket count, max distance, which layer owns the table
``learned``         :class:`AbsoluteLayer`: a learned table of ``table_size`` rows read at ``p + offset``
``sinusoidal``      :class:`AbsoluteLayer`: a sinusoid of the stack's width, layout, spacing, offset
``deberta``         :class:`DebertaLayer`: DeBERTa-v2 relative positions
``none``            :class:`NoPositions`: attention without positions (NoPE), perhaps with a query scale
``no_attention``    :class:`NoAttention`: a Mamba, convolution, recurrent or linear-attention layer
``refused``         :class:`Refused`: the layer does something refpos does not model (named)
``unknown``         :class:`Unknown`: the family is not in the table; what its config states, nothing else
==================  =====================================================================================

Learned and sinusoidal positions are added to the stack's input, before its first layer: every layer of
such a stack carries the same record, with ``at = "input"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from refpos.backend import to_numpy
from refpos.encoding import Encoding, NoPE, QueryScaled
from refpos.encodings.learned import LearnedAbsolute
from refpos.encodings.sinusoidal import Sinusoidal, sinusoidal
from refpos.models.query_scales import QueryScale
from refpos.rope.config import RopeConfig
from refpos.rope.encoding import Rope
from refpos.rope.vision import VisionRope
from refpos.rope.vision3d import VisionRope3D
from refpos.validation import as_positions

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


def _scaled(encoding: Encoding, scale: QueryScale | None) -> Encoding:
    return encoding if scale is None else QueryScaled(encoding, scale)


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

    def encoding(self, **weights: Any) -> Encoding:
        return _scaled(Rope(self.rope), self.query_scale)


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
        return _scaled(NoPE(), self.query_scale)


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


@dataclass(frozen=True)
class VisionRopeLayer(LayerRecord):
    """A vision tower's layer: its 2-D (:class:`~refpos.rope.vision.VisionRope`) or 3-D
    (:class:`~refpos.rope.vision3d.VisionRope3D`) RoPE, applied at each patch's (h, w) or (t, h, w)."""

    rope: VisionRope | VisionRope3D
    kind: ClassVar[str] = "vision_rope"

    @property
    def label(self) -> str:
        return f"vision_rope({self.rope.kind})"

    def params(self) -> dict[str, Any]:
        return {"form": self.rope.kind, "head_dim": self.rope.head_dim, "theta": self.rope.theta,
                "axes": 3 if isinstance(self.rope, VisionRope3D) else 2}

    def _why_not(self) -> str:
        return ("a vision tower rotates patches by their (h, w) or (t, h, w) positions: refpos.rope.vision and "
                "refpos.rope.vision3d apply it, not the 1-D attention pipeline")


# ------------------------------------------------------------------------------- learned and sinusoidal
@dataclass(frozen=True)
class AbsoluteLayer(LayerRecord):
    """A learned table or a sinusoid added to the stack's input: position ``p`` reads row ``p + offset``
    (``table_size`` rows: a larger position is an error); a sinusoid of ``dim`` channels."""

    encoding_name: str = "learned"
    dim: int = 2
    offset: int = 0
    table_size: int | None = None
    layout: str = "concat"
    spacing: str = "paper"
    base: float = 10000.0
    at: str = "input"

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.encoding_name

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "dim": self.dim, "offset": self.offset, "table_size": self.table_size}
        if self.encoding_name == "sinusoidal":
            out.update(layout=self.layout, spacing=self.spacing, base=self.base)
        return out

    def rows(self, positions: Any) -> np.ndarray:
        """The table rows positions read, ``p + offset``; a row outside the table is a ``ValueError`` (so is a
        position int64 does not hold: a uint64 ``2**64 − 1`` is not the ``−1`` a cast would make of it)."""
        p = np.asarray(to_numpy(as_positions(positions, xp=np, allow_negative=True)))
        rows = p + self.offset
        if rows.size and (rows.min() < 0 or (self.table_size is not None and rows.max() >= self.table_size)):
            raise ValueError(f"positions + offset {self.offset} must lie in [0, {self.table_size}) (the table's "
                             f"rows), got {int(rows.min())} … {int(rows.max())}")
        return rows

    def sinusoid(self, positions: Any) -> np.ndarray:
        """The sinusoid ``(..., dim)`` at ``positions`` (row ``p + offset`` of the family's table)."""
        self.rows(positions)
        return np.asarray(sinusoidal(np.asarray(to_numpy(positions), dtype=np.int64), self.dim, base=self.base,
                                     layout=self.layout, spacing=self.spacing, offset=self.offset, xp=np))

    def encoding(self, **weights: Any) -> Encoding:
        if self.encoding_name == "sinusoidal":
            return Sinusoidal(base=self.base, layout=self.layout, spacing=self.spacing, offset=self.offset)
        if "table" not in weights:
            raise ValueError(f"{self.stack} layer {self.index} (learned): pass table=, the trained position table "
                             f"({self.table_size}, {self.dim})")
        return LearnedAbsolute(weights["table"], offset=self.offset)


__all__ = ["AbsoluteLayer", "LayerRecord", "NoAttention", "NoPositions", "Refused", "RopeLayer", "Unknown",
           "VisionRopeLayer", "round_to"]
