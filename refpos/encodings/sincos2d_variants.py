"""Which fixed 2-D sin–cos variant each transformers model uses: one :class:`SineVariant` record per variant.

A record names the builder of :mod:`refpos.encodings.sincos2d` it calls (``grid``, ``mask`` or ``coordinates``),
the keywords every model of the variant passes (:attr:`SineVariant.parameters`), the keywords a model reads from
its config with the config class's default (:attr:`SineVariant.config_keys`), the inputs it is called with, the
transformers model types that use it and the public source it was read from (transformers 5.25). Nothing here
branches on a model name: :meth:`SineVariant.build` is the builder called with the record's keywords.

Examples
--------
>>> variant = SINE_VARIANTS["mae"]
>>> variant.build(height=2, width=2, dim=8).shape
(5, 8)
>>> sorted(name for name, v in SINE_VARIANTS.items() if "rt_detr" in v.models)
['rt_detr']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from refpos.backend import Array
from refpos.encodings.sincos2d import sincos_2d_grid, sine_coordinates, sine_position_map

#: builder name -> the function of refpos.encodings.sincos2d it stands for
BUILDERS: Mapping[str, Callable[..., Array]] = MappingProxyType({
    "grid": sincos_2d_grid,
    "mask": sine_position_map,
    "coordinates": sine_coordinates,
})


@dataclass(frozen=True)
class SineVariant:
    """One variant: a builder, its fixed keywords, the config keys it reads, its inputs and its models."""

    name: str
    builder: str
    parameters: Mapping[str, Any]
    inputs: str
    models: tuple[str, ...]
    source: str
    description: str
    #: builder keyword -> (config key, the config class's default)
    config_keys: Mapping[str, tuple[str, Any]] = field(default_factory=dict)
    #: config key -> the value the model must hold for this variant to be the one it runs
    requires: Mapping[str, Any] = field(default_factory=dict)

    def build(self, **inputs: Any) -> Array:
        """The builder called with ``inputs`` (the sizes, mask or coordinates) and the record's keywords."""
        clash = sorted(set(inputs) & set(self.parameters))
        if clash:
            raise ValueError(f"variant {self.name!r} fixes {clash}; give only its inputs")
        return BUILDERS[self.builder](**inputs, **self.parameters)


def _variant(name: str, builder: str, parameters: dict[str, Any], inputs: str, models: tuple[str, ...],
             source: str, description: str, **extra: Any) -> tuple[str, SineVariant]:
    return name, SineVariant(name, builder, MappingProxyType(parameters), inputs, models, source, description,
                             **{k: MappingProxyType(v) for k, v in extra.items()})


_TF = "transformers models/"
#: variant name -> record (transformers 5.25)
SINE_VARIANTS: Mapping[str, SineVariant] = MappingProxyType(dict([
    _variant("mae", "grid", {"axes": "xy", "flatten": "row_major", "cls_rows": 1, "temperature": 10000.0},
             "the patch grid (image_size/patch_size square), dim = hidden_size (decoder: decoder_hidden_size)",
             ("vit_mae",), _TF + "vit_mae/modeling_vit_mae.py: ViTMAEEmbeddings.initialize_weights",
             "columns first (MAE's checkpoints: the halves of the h-first table exchanged), a zero CLS row"),
    _variant("aimv2_native", "grid", {"axes": "xy", "flatten": "row_major", "cls_rows": 0, "temperature": 10000.0},
             "the patch grid of each image (height and width // patch_size), dim = hidden_size", ("aimv2",),
             _TF + "aimv2/modeling_aimv2.py: Aimv2VisionEmbeddings.forward",
             "columns first, recomputed for each input size", requires={"is_native": True}),
    _variant("granite_docling", "grid", {"axes": "xy", "flatten": "row_major", "cls_rows": 0,
                                         "temperature": 10000.0},
             "the square grid of one tile, dim = the merger's embed_dim", ("granite_docling",),
             _TF + "granite_docling/modeling_granite_docling.py: GraniteDoclingPositionEmbedding.build",
             "columns first (the h-first table rolled by dim/2)"),
    _variant("rt_detr", "grid", {"axes": "yx", "flatten": "row_major", "cls_rows": 0},
             "each encoded feature map's height and width, dim = encoder_hidden_dim",
             ("rt_detr", "rt_detr_v2", "d_fine", "deimv2", "pp_doclayout_v2", "pp_doclayout_v3", "pp_doclayout_v4"),
             _TF + "rt_detr/modeling_rt_detr.py: build_2d_sinusoidal_position_embedding, RTDetrSinePositionEmbedding",
             "rows first, row-major tokens", config_keys={"temperature": ("positional_encoding_temperature", 10000)}),
    _variant("omdet_turbo", "grid", {"axes": "xy", "flatten": "column_major", "cls_rows": 0},
             "each encoded feature map's height and width, dim = encoder_hidden_dim", ("omdet_turbo",),
             _TF + "omdet_turbo/modeling_omdet_turbo.py: OmDetTurboHybridEncoder.build_2d_sincos_position_embedding",
             "the original RT-DETR form: meshgrid(w, h, 'ij') lists the tokens column by column, width first",
             config_keys={"temperature": ("positional_encoding_temperature", 10000)}),
    _variant("detr", "mask", {"normalize": True, "offset": 0.0, "eps": 1e-6, "scale": None, "temperature": 10000.0},
             "the pixel mask downsampled to each feature map (all ones where the model passes none), "
             "num_features = d_model // 2 (SAM 2's neck: fpn_hidden_size // 2)",
             ("detr", "conditional_detr", "table_transformer", "maskformer", "mask2former", "oneformer", "sam2",
              "sam2_video", "sam3", "sam3_lite_text", "sam3_tracker_video", "edgetam", "edgetam_video"),
             _TF + "detr/modeling_detr.py: DetrSinePositionEmbedding",
             "normalised counts times 2π, temperature 10000", requires={"position_embedding_type": "sine"}),
    _variant("deformable_detr", "mask", {"normalize": True, "offset": -0.5, "eps": 1e-6, "scale": None,
                                         "temperature": 10000.0},
             "the pixel mask downsampled to each feature map, num_features = d_model // 2", ("deformable_detr",),
             _TF + "deformable_detr/modeling_deformable_detr.py: DeformableDetrSinePositionEmbedding",
             "DETR's with 0.5 taken from each count before normalising", requires={"position_embedding_type": "sine"}),
    _variant("grounding_dino", "mask", {"normalize": True, "offset": 0.0, "eps": 1e-6, "scale": None},
             "the pixel mask downsampled to each feature map, num_features = d_model // 2",
             ("grounding_dino", "mm_grounding_dino"),
             _TF + "grounding_dino/modeling_grounding_dino.py: GroundingDinoSinePositionEmbedding",
             "DETR's with the temperature of the config (20 by default), computed in float32",
             config_keys={"temperature": ("positional_embedding_temperature", 20)},
             requires={"position_embedding_type": "sine"}),
    _variant("dab_detr", "mask", {"normalize": True, "offset": 0.0, "eps": 1e-6},
             "the pixel mask downsampled to the feature map, num_features = hidden_size // 2", ("dab_detr",),
             _TF + "dab_detr/modeling_dab_detr.py: DabDetrSinePositionEmbedding",
             "a temperature per axis, (temperature_height, temperature_width), and the scale of the config",
             config_keys={"temperature": ("(temperature_height, temperature_width)", (20, 20)),
                          "scale": ("sine_position_embedding_scale", None)}),
    _variant("anchors", "coordinates", {"swap_xy": True, "scale": 6.283185307179586, "temperature": 10000.0,
                                        "layout": "interleaved", "rule": "paired"},
             "reference points or boxes in [0, 1], (x, y) or (x, y, w, h); num_features = d_model // 2",
             ("conditional_detr", "dab_detr", "grounding_dino", "mm_grounding_dino", "lw_detr", "rf_detr", "sam3",
              "sam3_lite_text"),
             _TF + "conditional_detr/modeling_conditional_detr.py: encode_sinusoidal_position_embedding; "
             "sam3/modeling_sam3.py: Sam3SinePositionEmbedding.encode_boxes, encode_1d_positions",
             "the decoders' query embedding: y block first, then x (then w, h)"),
    _variant("grounding_text", "coordinates", {"swap_xy": False, "scale": 6.283185307179586, "temperature": 10000.0,
                                               "layout": "interleaved", "rule": "paired"},
             "text token positions 0 … T−1 as a (…, 1) float array; num_features = d_model",
             ("grounding_dino", "mm_grounding_dino"),
             _TF + "grounding_dino/modeling_grounding_dino.py: GroundingDinoEncoder.get_text_position_embeddings",
             "integer positions times 2π: the fastest pair repeats every token"),
    _variant("deformable_proposals", "coordinates", {"swap_xy": False, "scale": 6.283185307179586,
                                                     "temperature": 10000.0, "layout": "interleaved",
                                                     "rule": "paired"},
             "sigmoid of the top proposals' box logits, (x, y, w, h); num_features = d_model // 2",
             ("deformable_detr",),
             _TF + "deformable_detr/modeling_deformable_detr.py: DeformableDetrModel.get_proposal_pos_embed",
             "the two-stage proposals: x, y, w, h in their own order", requires={"two_stage": True}),
    _variant("sam2_pointers", "coordinates", {"swap_xy": False, "scale": 1.0, "temperature": 10000.0,
                                              "layout": "concat", "rule": "doubled"},
             "temporal offsets of object pointers / (max_object_pointers_in_encoder − 1), shape (…, 1); "
             "num_features = the memory attention's hidden size",
             ("sam2_video", "sam3_tracker_video", "edgetam_video"),
             _TF + "sam2_video/modeling_sam2_video.py: get_1d_sine_pe",
             "each frequency twice, all sines then all cosines, no 2π",
             requires={"enable_temporal_pos_encoding_for_object_pointers": True}),
]))


def sincos2d_variant(name: str) -> SineVariant:
    """The record of variant ``name`` (a ``ValueError`` naming the known ones otherwise)."""
    if not isinstance(name, str) or name not in SINE_VARIANTS:
        raise ValueError(f"variant must be one of {tuple(SINE_VARIANTS)}, got {name!r}")
    return SINE_VARIANTS[name]


def variants_of(model_type: str) -> tuple[str, ...]:
    """The variants a transformers model type uses (empty when none)."""
    return tuple(name for name, variant in SINE_VARIANTS.items() if model_type in variant.models)
