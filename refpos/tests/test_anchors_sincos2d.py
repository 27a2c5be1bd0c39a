r"""refpos.encodings.sincos2d against transformers 5.25's own functions and modules, every variant a model uses, and
timm's ``build_sincos2d_pos_embed``.

Each anchor is one :class:`Anchor`: the refpos variant and inputs (a :class:`Sincos2dInputs`), the library call, and
the dtype the library really computed in. Tolerance: the kind's bound (refpos/encodings/sincos2d_mistakes.py, module
docstring), derived for a float32 computation — ``u·((8 + ln T)·θ + 4)`` per token, pixel or point — with
``u = 2⁻²⁴``; where every step of the library ran in float64 (``dtype=torch.float64`` passed through, nothing cast to
float32 inside) the same derivation with ``u = 2⁻⁵³``. A library that computes its frequencies in float32 whatever
its input (``encode_sinusoidal_position_embedding``, ``get_1d_sine_pe``, the modules that call ``.float()``) is a
float32 anchor. :func:`largest_errors` reports the largest error of each anchor (docs/sincos2d.md#anchors).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.encodings.sincos2d_mistakes import Sincos2dInputs
from refpos.tests.kind_checks import Anchor, anchor_ids
from refpos.tests.kind_checks import transformers_object as _import

torch = pytest.importorskip("torch", reason="sin-cos anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="sin-cos anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors




def _mask() -> np.ndarray:
    mask = np.ones((2, 6, 9), dtype=bool)
    mask[0, 4:, :] = False  # rows padded
    mask[1, :, 7:] = False  # columns padded, none of them entirely
    mask[1, 5:, :] = False
    return mask


def _channels_last(t) -> object:
    return t.permute(0, 2, 3, 1)


def _grid_anchors() -> list[Anchor]:
    from transformers.models.granite_docling.modeling_granite_docling import GraniteDoclingPositionEmbedding
    from transformers.models.omdet_turbo.modeling_omdet_turbo import OmDetTurboHybridEncoder
    from transformers.models.rt_detr.modeling_rt_detr import RTDetrSinePositionEmbedding
    from transformers.models.vit_mae.modeling_vit_mae import build_2d_sinusoidal_position_embedding

    def mae_module(decoder: bool) -> object:
        from transformers import ViTMAEConfig, ViTMAEForPreTraining

        config = ViTMAEConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8,
                              image_size=28, patch_size=4, decoder_hidden_size=16, decoder_num_hidden_layers=1,
                              decoder_num_attention_heads=2, decoder_intermediate_size=8)
        model = ViTMAEForPreTraining(config)
        if decoder:
            model.decoder.initialize_weights(49)
            return model.decoder.decoder_pos_embed[0]
        model.vit.embeddings.patch_embeddings.projection._is_hf_initialized = False  # else it returns at once
        model.vit.embeddings.initialize_weights()
        return model.vit.embeddings.position_embeddings[0]

    def aimv2() -> object:
        from transformers import Aimv2VisionConfig
        from transformers.models.aimv2.modeling_aimv2 import Aimv2VisionEmbeddings

        module = Aimv2VisionEmbeddings(Aimv2VisionConfig(hidden_size=32, patch_size=4, is_native=True,
                                                         image_size=28)).double()
        torch.nn.init.zeros_(module.patch_embed.weight)
        torch.nn.init.zeros_(module.patch_embed.bias)
        return module(torch.zeros(1, 3, 20, 36, dtype=torch.float64))[0]  # zero patches: the output is the table

    def timm(reverse: bool) -> object:
        layers = pytest.importorskip("timm.layers", reason="the timm anchor needs timm")
        return layers.build_sincos2d_pos_embed([5, 7], dim=16, temperature=20.0, reverse_coord=reverse,
                                                interleave_sin_cos=True)

    def mae_function() -> object:
        table = build_2d_sinusoidal_position_embedding(5, 7, 16, cls_token=True, dtype=torch.float64)
        return torch.cat([table[..., 8:], table[..., :8]], dim=-1)  # the halves exchanged, as initialize_weights does

    return [
        Anchor("vit_mae: build_2d_sinusoidal_position_embedding halves exchanged (float64)",
               Sincos2dInputs("mae", {"height": 5, "width": 7, "dim": 16}),
               mae_function, "float64"),
        Anchor("vit_mae: ViTMAEEmbeddings.initialize_weights (float32 parameter)",
               Sincos2dInputs("mae", {"height": 7, "width": 7, "dim": 32}), lambda: mae_module(False), "float32"),
        Anchor("vit_mae: ViTMAEDecoder.initialize_weights (float32 parameter)",
               Sincos2dInputs("mae", {"height": 7, "width": 7, "dim": 16}), lambda: mae_module(True), "float32"),
        Anchor("aimv2: Aimv2VisionEmbeddings, is_native (float64)",
               Sincos2dInputs("aimv2_native", {"height": 5, "width": 9, "dim": 32}), aimv2, "float64"),
        Anchor("granite_docling: GraniteDoclingPositionEmbedding.build (float32 output)",
               Sincos2dInputs("granite_docling", {"height": 6, "width": 6, "dim": 24}),
               lambda: GraniteDoclingPositionEmbedding.build(24, 6), "float32"),
        Anchor("rt_detr: RTDetrSinePositionEmbedding (float64)",
               Sincos2dInputs("rt_detr", {"height": 5, "width": 8, "dim": 32, "temperature": 20.0}),
               lambda: RTDetrSinePositionEmbedding(32, 20)(8, 5, torch.device("cpu"), torch.float64)[0], "float64"),
        Anchor("omdet_turbo: build_2d_sincos_position_embedding (float64)",
               Sincos2dInputs("omdet_turbo", {"height": 5, "width": 8, "dim": 32, "temperature": 20.0}),
               lambda: OmDetTurboHybridEncoder.build_2d_sincos_position_embedding(8, 5, 32, 20.0,
                                                                                 dtype=torch.float64)[0], "float64"),
        Anchor("timm: build_sincos2d_pos_embed, interleave_sin_cos (float32)",
               Sincos2dInputs("rt_detr", {"height": 5, "width": 7, "dim": 16, "temperature": 20.0}),
               lambda: timm(False), "float32"),
        Anchor("timm: build_sincos2d_pos_embed, reverse_coord (float32)",
               Sincos2dInputs("omdet_turbo", {"height": 5, "width": 7, "dim": 16, "temperature": 20.0}),
               lambda: timm(True), "float32"),
    ]


#: the modules of DETR's form (DetrSinePositionEmbedding's build, copied per model), by model type
DETR_FORM = {"detr": "detr.modeling_detr:DetrSinePositionEmbedding",
             "conditional_detr": "conditional_detr.modeling_conditional_detr:ConditionalDetrSinePositionEmbedding",
             "maskformer": "maskformer.modeling_maskformer:MaskFormerSinePositionEmbedding",
             "mask2former": "mask2former.modeling_mask2former:Mask2FormerSinePositionEmbedding",
             "oneformer": "oneformer.modeling_oneformer:OneFormerSinePositionEmbedding",
             "sam2": "sam2.modeling_sam2:Sam2SinePositionEmbedding",
             "sam2_video": "sam2_video.modeling_sam2_video:Sam2VideoPositionEmbeddingSine",
             "sam3": "sam3.modeling_sam3:Sam3SinePositionEmbedding",
             "sam3_lite_text": "sam3_lite_text.modeling_sam3_lite_text:Sam3LiteTextSinePositionEmbedding",
             "sam3_tracker_video":
                 "sam3_tracker_video.modeling_sam3_tracker_video:Sam3TrackerVideoPositionEmbeddingSine",
             "edgetam": "edgetam.modeling_edgetam:EdgeTamSinePositionEmbedding",
             "edgetam_video": "edgetam_video.modeling_edgetam_video:EdgeTamVideoPositionEmbeddingSine",
             "deformable_detr": "deformable_detr.modeling_deformable_detr:DeformableDetrSinePositionEmbedding"}



def _mask_anchors() -> list[Anchor]:
    mask = _mask()
    anchors = []
    for model, path in DETR_FORM.items():
        variant = "deformable_detr" if model == "deformable_detr" else "detr"
        build = _import(path).build_sine_position_embedding
        anchors.append(Anchor(
            f"{model}: {path.split(':')[1]} with a padding mask (float64)",
            Sincos2dInputs(variant, {"mask": mask, "num_features": 16}),
            lambda b=build: _channels_last(b((2, 3, 6, 9), "cpu", torch.float64, 16, True, 2 * math.pi, 10000,
                                             torch.from_numpy(mask))), "float64"))
    anchors.append(Anchor(
        "sam2: Sam2SinePositionEmbedding called without a mask (float64)",
        Sincos2dInputs("detr", {"mask": np.ones((1, 4, 6), dtype=bool), "num_features": 16}),
        lambda: _channels_last(_import(DETR_FORM["sam2"])(16, normalize=True)((1, 3, 4, 6), "cpu", torch.float64)),
        "float64"))
    pixels, m = torch.zeros(2, 3, 6, 9), torch.from_numpy(mask).long()
    from transformers import DabDetrConfig, GroundingDinoConfig

    grounding = _import("grounding_dino.modeling_grounding_dino:GroundingDinoSinePositionEmbedding")
    mm = _import("mm_grounding_dino.modeling_mm_grounding_dino:MMGroundingDinoSinePositionEmbedding")
    dab = _import("dab_detr.modeling_dab_detr:DabDetrSinePositionEmbedding")
    table = _import("table_transformer.modeling_table_transformer:TableTransformerSinePositionEmbedding")
    grounding_config = SimpleNamespace(d_model=32, positional_embedding_temperature=20)
    assert GroundingDinoConfig().positional_embedding_temperature == 20
    dab_config = DabDetrConfig(hidden_size=32, temperature_height=20, temperature_width=30)
    anchors += [
        Anchor("grounding_dino: GroundingDinoSinePositionEmbedding (float32)",
               Sincos2dInputs("grounding_dino", {"mask": mask, "num_features": 16, "temperature": 20.0}),
               lambda: _channels_last(grounding(grounding_config)(pixels, m)), "float32"),
        Anchor("mm_grounding_dino: MMGroundingDinoSinePositionEmbedding (float32)",
               Sincos2dInputs("grounding_dino", {"mask": mask, "num_features": 16, "temperature": 20.0}),
               lambda: _channels_last(mm(grounding_config)(pixels, m)), "float32"),
        Anchor("dab_detr: DabDetrSinePositionEmbedding, temperatures (20, 30) (float32)",
               Sincos2dInputs("dab_detr", {"mask": mask, "num_features": 16, "temperature": (20.0, 30.0),
                                           "scale": None}),
               lambda: _channels_last(dab(dab_config)(pixels, m)), "float32"),
        Anchor("table_transformer: TableTransformerSinePositionEmbedding (float32)",
               Sincos2dInputs("detr", {"mask": mask, "num_features": 16}),
               lambda: _channels_last(table(16, normalize=True)(pixels, m)), "float32"),
    ]
    return anchors


def _coordinate_anchors() -> list[Anchor]:
    rng = np.random.default_rng(3)
    boxes, points = rng.random((2, 5, 4)), rng.random((2, 5, 2))
    anchors = []
    for model in ("conditional_detr", "dab_detr", "grounding_dino", "mm_grounding_dino", "lw_detr", "rf_detr"):
        encode = _import(f"{model}.modeling_{model}:encode_sinusoidal_position_embedding")
        for coords in (points, boxes):
            anchors.append(Anchor(
                f"{model}: encode_sinusoidal_position_embedding of {coords.shape[-1]} coordinates (float32 dim_t)",
                Sincos2dInputs("anchors", {"coords": coords, "num_features": 16}),
                lambda e=encode, c=coords: e(torch.from_numpy(c), 16), "float32"))
    sam3 = _import(DETR_FORM["sam3"])(16, normalize=False)
    x, y = torch.from_numpy(points[0, :, 0]), torch.from_numpy(points[0, :, 1])
    ground = _import("grounding_dino.modeling_grounding_dino:encode_sinusoidal_position_embedding")
    text = np.arange(12, dtype=np.float64)[None, :, None]
    offsets = np.arange(7, dtype=np.float64) / 15.0

    def proposals() -> object:
        get = _import("deformable_detr.modeling_deformable_detr:DeformableDetrModel").get_proposal_pos_embed
        logits = torch.from_numpy(np.log(boxes / (1 - boxes))).float()  # their sigmoid gives the boxes back
        return get(SimpleNamespace(config=SimpleNamespace(d_model=32)), logits)

    anchors += [
        Anchor("sam3: Sam3SinePositionEmbedding.encode_boxes (float64)",
               Sincos2dInputs("anchors", {"coords": boxes, "num_features": 16}),
               lambda: sam3.encode_boxes(torch.from_numpy(boxes)), "float64"),
        Anchor("sam3: Sam3SinePositionEmbedding.encode_1d_positions, (pos_y, pos_x) (float64)",
               Sincos2dInputs("anchors", {"coords": points[0], "num_features": 16}),
               lambda: torch.cat(sam3.encode_1d_positions(x, y)[::-1], dim=-1), "float64"),
        Anchor("grounding_dino: text positions 0 … 11 (float32 dim_t)",
               Sincos2dInputs("grounding_text", {"coords": text, "num_features": 32}),
               lambda: ground(torch.from_numpy(text), 32), "float32"),
        Anchor("deformable_detr: get_proposal_pos_embed of sigmoid proposals (float32)",
               Sincos2dInputs("deformable_proposals", {"coords": boxes, "num_features": 16}), proposals, "float32"),
    ]
    for model in ("sam2_video", "sam3_tracker_video", "edgetam_video"):
        pe = _import(f"{model}.modeling_{model}:get_1d_sine_pe")
        anchors.append(Anchor(f"{model}: get_1d_sine_pe of pointer offsets (float32 dim_t)",
                              Sincos2dInputs("sam2_pointers", {"coords": offsets[:, None], "num_features": 32}),
                              lambda p=pe: p(torch.from_numpy(offsets), dim=32), "float32"))
    return anchors


def all_anchors() -> list[Anchor]:
    return _grid_anchors() + _mask_anchors() + _coordinate_anchors()


ANCHORS = all_anchors()


@pytest.mark.parametrize("anchor", ANCHORS, ids=anchor_ids(ANCHORS))
def test_refpos_equals_the_library_within_the_bound(anchor):
    _, ratio = anchor.error()
    assert ratio <= 1.0, f"{anchor.name}: error {ratio:.3g} times the bound"


def test_every_variant_has_an_anchor():
    from refpos.encodings.sincos2d_variants import SINE_VARIANTS

    assert {a.inputs.variant for a in ANCHORS} == set(SINE_VARIANTS)


def test_a_freshly_built_vit_mae_holds_no_sincos_table():
    """An observation of transformers 5.25, not of refpos: ``ViTMAEForPreTraining(config)`` leaves both position
    tables zero (``ViTMAEEmbeddings.initialize_weights`` returns early once the patch projection is marked
    initialised; ``_init_weights`` zeroes ``decoder_pos_embed`` instead of building it), so a model trained from
    scratch in transformers starts without positions; checkpoints load their own tables. This test fails when
    transformers changes it, and docs/sincos2d.md must then be updated."""
    from transformers import ViTMAEConfig, ViTMAEForPreTraining

    config = ViTMAEConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8,
                          image_size=28, patch_size=4, decoder_hidden_size=16, decoder_num_hidden_layers=1,
                          decoder_num_attention_heads=2, decoder_intermediate_size=8)
    model = ViTMAEForPreTraining(config)
    assert float(model.vit.embeddings.position_embeddings.abs().max()) == 0.0
    assert float(model.decoder.decoder_pos_embed.abs().max()) == 0.0


def largest_errors() -> dict[str, tuple[str, float, float]]:
    """anchor name -> (dtype, largest error, largest error / bound): the numbers docs/sincos2d.md reports."""
    return {a.name: (a.dtype, *a.error()) for a in ANCHORS}
