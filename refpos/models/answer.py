"""What :func:`refpos.model_positions` answers: :class:`ModelPositions`, every layer record of every stack of a config,
and what the resolution does not model, with its summary and JSON form."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from refpos.models.family_row import Family
from refpos.models.records import LayerRecord
from refpos.models.schedule import summary_line
from refpos.models.sources import INPUTS


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
    assumed: Mapping[str, Any] = field(default_factory=dict)
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
        (``audio.input``) is one line ``audio input: conv_position``, what a stage after its layers adds
        (``vision.output``) one line ``vision output: sincos2d(granite_docling) ×2``, a stack's cross-attention
        (``decoder.cross``, :mod:`refpos.models.cross`) one line ``decoder cross-attention layers 0-5: none ×6``."""
        def line(name: str) -> str:
            records = self.stack(name)
            if name.endswith(".input"):
                return f"{name.removesuffix('.input')} input: {', '.join(r.label for r in records)}"
            if name.endswith(".cross"):
                pairs = [(r.index, r.label) for r in records]
                return f"{name.removesuffix('.cross')} cross-attention " + summary_line(pairs)
            if name.endswith(".output"):
                return f"{name.removesuffix('.output')} output: {records[0].label} ×{len(records)}"
            return f"{name} " + summary_line([(r.index, r.label) for r in records])
        return "\n".join(line(name) for name in self.stacks)

    def needs(self) -> dict[str, dict[str, str]]:
        """Per stack, the inputs its positions are computed from (keys of :data:`refpos.models.sources.INPUTS`,
        with what each is): every input its records read (``record.reads``: a DETR sine reads the pixel mask, SAM's
        prompt features the points, a RoPE the position ids else the slot); a stack whose layers read nothing
        (attention without positions, no attention) needs none and is left out."""
        out: dict[str, dict[str, str]] = {}
        for layer in self.layers:
            for _, source in layer.reads:
                for name in source:
                    out.setdefault(layer.stack, {})[name] = INPUTS[name]
        return out

    def describe(self) -> dict[str, Any]:
        """JSON-ready: the model type, its family row's source, every layer, what each stack needs, and the
        reports."""
        return {"model_type": self.model_type, "source": None if self.family is None else self.family.source,
                "nesting": self.nesting, "summary": self.summary().splitlines(), "needs": self.needs(),
                "layers": [layer.describe() for layer in self.layers], "not_modelled": dict(self.not_modelled),
                "unknown": dict(self.unknown), "complete": self.complete, "notes": list(self.notes),
                "assumed": dict(self.assumed),
                "parts": [{"stack": name, "path": path, "model_type": model_type}
                          for name, path, model_type in self.parts]}


__all__ = ["ModelPositions"]
