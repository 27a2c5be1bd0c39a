"""A vision or audio model type's repairs on the pixel side (:mod:`survey.pixels`): fields its config class leaves
at a value its own forward cannot run with, on any input, stated as the forward needs them.

The token-id side's repairs live in :mod:`survey.tiny_repairs`; these apply only where
:func:`survey.pixels.build_pixels` builds a model type fed pixel values, audio or features, after the tiny
geometry's shrink (:func:`repair`), each entry of :data:`PIXEL_REPAIRS` keyed by the model type it repairs, with its
reason. refpos is asked about the repaired config: both sides read the same fields. """

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from survey.pixel_inputs import PLAIN_IMAGE

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


def _latent_side(values: dict[str, Any]) -> dict[str, Any]:
    side = PLAIN_IMAGE[0] // 2 ** (len(values["channel_multiplier"]) - 1)
    return {} if values.get("num_patches") == side else {"num_patches": max(1, side)}


def _neck_to_encoder(values: dict[str, Any]) -> dict[str, Any]:
    sam, width = values["sam_config"], values["encoder_config"]["hidden_size"]
    channels = list(sam.get("downsample_channels") or [])
    if not channels or channels[-1] == width:
        return {}
    return {"sam_config": {**sam, "downsample_channels": [*channels[:-1], width]}}


def _class_default(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``fields`` stating ``key`` as the model type's config class states it by default."""
    def fields(values: dict[str, Any]) -> dict[str, Any]:
        from transformers import CONFIG_MAPPING

        default = getattr(CONFIG_MAPPING[values["model_type"]](), key)
        return {} if values.get(key) == default else {key: list(default)}
    return fields


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
    "janus_vqgan": Repair("Janus's VQ-VAE decodes exactly num_patches² image tokens (32², a 512-pixel image): "
                          "stated as the latent side of the survey's 64-pixel image, 64 over the encoder's "
                          "downsampling 2^(len(channel_multiplier) - 1)", _latent_side),
    "deepseek_ocr2_vision": Repair("DeepSeek-OCR-2's SAM neck ends in downsample_channels[-1] channels, which its "
                                   "encoder reads as rows of encoder_config.hidden_size (896 both in the defaults): "
                                   "the last stated as the shrunk encoder's width", _neck_to_encoder),
    "pp_ocrv5_mobile_det": Repair("PP-OCRv5's mobile detector convolves each of its backbone's four output maps "
                                  "to a width of layer_list_out_channels, which the tiny geometry cuts to one entry "
                                  "as a list of layers: the class's four", _class_default("layer_list_out_channels")),
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
