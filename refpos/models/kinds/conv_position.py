r"""The convolutional-position kind: a grouped convolution over the frames, added to a speech encoder's input
(wav2vec 2.0, HuBERT, WavLM, SEW, Data2Vec-audio), as a family's code builds it — its form and the keys of its
kernel, groups, stride and layers (:class:`ConvPositionFacts`), the record (:class:`ConvPositionLayer`) and the
builder.

The formulas are :mod:`refpos.encodings.conv_position` (docs/conv-position.md#the-math). The embedding is computed
from the frames themselves, once, before the first layer: it sits at a stack's input site (``audio.input``), and
its trained kernel is a weight the record takes.

Examples
--------
>>> from refpos.models import model_positions
>>> w2v = {"model_type": "wav2vec2", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 32,
...        "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16}
>>> print(model_positions(w2v).summary())
audio input: conv_position(weight_norm)
audio layers 0-1: none ×2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.encodings.conv_position_mistakes import CONV_FORMS
from refpos.models.kinds.record import EncodingKind, Stack, check_fact
from refpos.models.records import LayerRecord


@dataclass(frozen=True)
class ConvPositionFacts:
    """How a family's code builds its convolutional positions (module docstring).

    ``form``: one of :data:`refpos.encodings.conv_position_mistakes.CONV_FORMS` (weight-normalised per tap,
    wav2vec 2.0; a plain kernel, OmniASR; batch norm before a plain kernel; stacked convolutions with layer norm,
    Data2Vec-audio) (``batch_norm_key``: HuBERT's bool key switching weight norm to batch
    norm); ``kernel``, ``groups``: the keys of the kernel width and the group count; ``stride``: SEW's key of the
    time squeeze (absent: 1); ``layers``: Data2Vec-audio's key of the stacked convolutions' count;
    ``activation``: the key of the activation's name.
    """

    form: str = "weight_norm"
    kernel: str = "num_conv_pos_embeddings"
    groups: str = "num_conv_pos_embedding_groups"
    stride: str | None = None
    layers: str | None = None
    activation: str = "feat_extract_activation"
    batch_norm_key: str | None = None

    def check(self, where: str) -> None:
        check_fact(where, self.form in CONV_FORMS, "conv_position.form", self.form)
        check_fact(where, (self.layers is not None) == (self.form == "stacked"), "conv_position.layers (stacked)",
                   self.layers)


@dataclass(frozen=True)
class ConvPositionLayer(LayerRecord):
    """A stack's convolutional positions: kernel ``K``, ``groups``, ``stride``, ``layers`` stacked convolutions,
    the activation and the form; the trained kernel is a weight (``weight``, ``bias``) of the checkpoint."""

    form: str = "weight_norm"
    kernel: int = 128
    groups: int = 16
    stride: int = 1
    layers: int = 1
    activation: str = "gelu"
    kind: ClassVar[str] = "conv_position"

    @property
    def label(self) -> str:
        return f"conv_position({self.form})"

    def params(self) -> dict[str, Any]:
        return {"form": self.form, "kernel": self.kernel, "groups": self.groups, "stride": self.stride,
                "layers": self.layers, "activation": self.activation, "at": "input"}

    def _why_not(self) -> str:
        return ("the embedding is computed from the frames, not from positions: refpos.encodings.conv_position "
                "computes it from the frames and the checkpoint's kernel")


def build(stack: Stack) -> list[LayerRecord]:
    """One :class:`ConvPositionLayer`: the stack's input embedding."""
    facts: ConvPositionFacts = stack.facts
    view = stack.view
    form = facts.form
    if facts.batch_norm_key is not None and view.bool(facts.batch_norm_key, False):
        form = "batch_norm"
    kernel = view.int(facts.kernel, minimum=1) if form != "stacked" else view.int("conv_pos_kernel_size", minimum=1)
    return [ConvPositionLayer(
        stack.name, 0, None, form=form, kernel=kernel, groups=view.int(facts.groups, minimum=1),
        stride=1 if facts.stride is None else view.int(facts.stride, 1, minimum=1),
        layers=1 if facts.layers is None else view.int(facts.layers, minimum=1),
        activation=str(view.value(facts.activation, "gelu")), reads=(("rows", ("frames",)),))]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    groups = draw(st.sampled_from([1, 2, 4]))
    return {"channels": groups * draw(st.integers(1, 4)), "groups": groups, "kernel": draw(st.integers(1, 9))}


CONV_POSITION = EncodingKind(
    name="conv_position", summary="a grouped convolution over the frames, added to them before the first layer "
    "(wav2vec 2.0, HuBERT)", record=ConvPositionLayer, build=build, hook="input", reads=("frames",),
    doc="docs/conv-position.md#the-math", facts=ConvPositionFacts, contract=("conv_positions",),
    spec="spec_tests/test_conv_position.py", draw=_draw, modalities=("audio",),
    example={"config": {"num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16}, "facts": {}},
    absent={"check": "named by refpos.encodings.conv_position_mistakes.identify_conv_position; the command's target "
                     "comes with the check registry",
            "golden": "the cases are refpos.golden.conv_position_cases (not yet in the committed goldens)"})

__all__ = ["CONV_POSITION", "ConvPositionFacts", "ConvPositionLayer", "build"]
