r"""The Fourier-feature kind: SAM's random Gaussian features of prompt points and of the image grid (its prompt
encoder and mask decoder) — which variant a family's code computes, where it adds it and with what width
(:class:`FourierFacts`), the record (:class:`FourierLayer`) and the builder.

The formulas are :mod:`refpos.encodings.fourier` (docs/fourier.md#the-math); the variants are
:data:`refpos.encodings.fourier.FOURIER_VARIANTS`. SAM's prompt encoder encodes each point and box corner once, at
its input (``at = "input"``); its mask decoder adds the features of the image grid's centres to the image keys
of every attention layer, and the prompt tokens to its queries (``at = "query_key"``, one record per layer).
The Gaussian matrix ``G`` ``(2, m)`` is a weight of the checkpoint; ``m`` is half the features' width.

Examples
--------
>>> from refpos.models import model_positions
>>> decoder = {"model_type": "sam_mask_decoder", "num_hidden_layers": 2, "num_attention_heads": 8,
...            "hidden_size": 256}
>>> print(model_positions(decoder).summary())
decoder layers 0-1: fourier(sam_image_grid) ×2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.backend import Array
from refpos.encodings.fourier import (
    FOURIER_VARIANTS,
    fourier_features,
    grid_centre_coordinates,
    pixel_centre_coordinates,
)
from refpos.models.kinds.record import GEOMETRY_KEYS, EncodingKind, Stack, check_fact, layer_count
from refpos.models.records import LayerRecord

#: the variants a family row may name: SAM's (Perceiver's depends on its task's preprocessor, not on the config)
SAM_VARIANTS = ("sam_prompts", "sam_image_grid")
#: where a family adds the features: once at the input (the prompt encoder), or to every layer's query and keys
FOURIER_SITES = ("input", "query_key")


@dataclass(frozen=True)
class FourierFacts:
    """``variant``: one of :data:`SAM_VARIANTS`; ``at``: one of :data:`FOURIER_SITES`; ``width``: the key of the
    features' width ``2m`` (absent: the stack's width)."""

    variant: str = "sam_image_grid"
    at: str = "query_key"
    width: str | None = None

    def check(self, where: str) -> None:
        check_fact(where, self.variant in SAM_VARIANTS and self.variant in FOURIER_VARIANTS, "fourier.variant",
                   self.variant)
        check_fact(where, self.at in FOURIER_SITES, "fourier.at", self.at)


@dataclass(frozen=True)
class FourierLayer(LayerRecord):
    """SAM's Fourier features at a stack's input or one layer: the variant, where it is added, and ``m`` (the
    Gaussian matrix is ``(2, m)``, the features ``2m`` wide)."""

    variant: str = "sam_image_grid"
    at: str = "query_key"
    m: int = 128
    kind: ClassVar[str] = "fourier"

    @property
    def label(self) -> str:
        return f"fourier({self.variant})"

    def params(self) -> dict[str, Any]:
        return {"variant": self.variant, "at": self.at, "m": self.m, "gaussian_shape": [2, self.m]}

    def reference(self, gaussian: Array, *, points: Array | None = None, image_size: tuple[int, int] | None = None,
                  grid: tuple[int, int] | None = None) -> Array:
        """The features: of prompt ``points`` in pixels of an ``image_size`` input (``sam_prompts``), or of the
        centres of the embedding ``grid`` (``sam_image_grid``), with the checkpoint's ``gaussian`` ``(2, m)``."""
        if self.variant == "sam_prompts":
            if points is None or image_size is None:
                raise ValueError("points, image_size: the prompt features need the points and the input size")
            return fourier_features(pixel_centre_coordinates(points, image_size), gaussian)
        if grid is None:
            raise ValueError("grid: the image features need the embedding grid (height, width)")
        return fourier_features(grid_centre_coordinates(*grid), gaussian)

    def _why_not(self) -> str:
        return "Fourier features of 2-D coordinates, not 1-D positions: FourierLayer.reference computes them"


def build(stack: Stack) -> list[LayerRecord]:
    """One record at the input, else one per layer."""
    facts: FourierFacts = stack.facts
    keys = (facts.width,) if facts.width is not None else GEOMETRY_KEYS[stack.role]["width"]
    width = stack.view.count(keys, "features' width")
    if width % 2:
        raise ValueError(f"{stack.view.name(keys[0])}: the features' width must be even "
                         f"(sines and cosines of m frequencies), got {width}")
    # the prompt encoder's features are of the points given; the mask decoder's, of the image grid's centres on the
    # image keys
    reads = (("rows", ("points",)),) if facts.variant == "sam_prompts" else (("key", ("image_grid",)),)
    if facts.at == "input":
        return [FourierLayer(stack.name, 0, None, variant=facts.variant, at=facts.at, m=width // 2, reads=reads)]
    return [FourierLayer(stack.name, i, None, variant=facts.variant, at=facts.at, m=width // 2, reads=reads)
            for i in range(layer_count(stack.view, stack.role))]


def _draw(draw: Any, st: Any) -> dict[str, Any]:
    return {"variant": draw(st.sampled_from(SAM_VARIANTS)), "m": draw(st.integers(1, 64))}


FOURIER = EncodingKind(
    name="fourier", summary="sines and cosines of 2-D coordinates times a fixed Gaussian matrix (SAM's prompts and "
    "image grid)", record=FourierLayer, build=build, hook="input", reads=("points", "image_grid"),
    doc="docs/fourier.md#the-math", facts=FourierFacts, contract=("fourier_features",),
    spec="spec_tests/test_fourier.py", draw=_draw, modalities=("vision",),
    example={"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16}, "facts": {}},
    check="fourier", golden="fourier",
    inert=("lengths", "rotary"))

__all__ = ["FOURIER", "FOURIER_SITES", "SAM_VARIANTS", "FourierFacts", "FourierLayer", "build"]
