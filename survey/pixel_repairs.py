"""A vision or audio model type's repairs on the pixel side (:mod:`survey.pixels`): fields its config class leaves
at a value its own forward cannot run with, on any input, stated as the forward needs them.

The token-id side's repairs live in :mod:`survey.tiny_repairs`; these apply only where :func:`survey.pixels.build_pixels`
builds a model type fed pixel values, audio or features, after the tiny geometry's shrink (:func:`repair`), each
entry of :data:`PIXEL_REPAIRS` keyed by the model type it repairs, with its reason. refpos is asked about the
repaired config: both sides read the same fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: the frames of the clip a video model whose pads are learned per frame is fed (:data:`PIXEL_REPAIRS`' TVP)
CLIP_FRAMES = 2


@dataclass(frozen=True)
class Repair:
    """Why a model type's config is repaired, ``fields(values)``: the fields stated over its shrunk dict ``values``
    (``{}`` where it already states them), and the fields its class derives from them (left out of the dict, so
    that the class derives them anew)."""

    why: str
    fields: Callable[[dict[str, Any]], dict[str, Any]]
    derived: tuple[str, ...] = ()


def _one_projector_level(values: dict[str, Any]) -> dict[str, Any]:
    if values.get("projector_scale_factors"):
        return {}
    return {"projector_scale_factors": [1.0]}


#: the repairs, by model type
PIXEL_REPAIRS: dict[str, Repair] = {
    "lw_detr": Repair("LW-DETR's class defaults to no projector level (projector_scale_factors=()), and its "
                      "projector concatenates an empty list of feature maps: one level at the backbone's own "
                      "stride (scale 1.0, a value its validator accepts)", _one_projector_level,
                      ("num_feature_levels", "projector_in_channels")),
    "tvp": Repair("TVP's visual prompter learns a pad per frame of num_frames (48) and adds it to a clip of exactly "
                  "that many frames, each of max_img_size (448) pixels: stated as the survey's clip of 2 frames "
                  "(a forward of 48 such frames is beyond the survey's budget)",
                  lambda values: {} if values.get("num_frames") == CLIP_FRAMES else {"num_frames": CLIP_FRAMES}),
}


def repair(config: Any) -> Any:
    """``config`` with its model type's :data:`PIXEL_REPAIRS` applied (a new config of its class, built from its
    dict so that fields derived from the repaired ones follow), or ``config`` itself where none applies."""
    entry = PIXEL_REPAIRS.get(getattr(config, "model_type", None))
    if entry is None:
        return config
    values = config.to_dict()
    fields = entry.fields(values)
    if not fields:
        return config
    kept = {key: value for key, value in values.items() if key not in entry.derived}
    return type(config).from_dict({**kept, **fields})
