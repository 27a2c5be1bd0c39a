r"""refpos.encodings.fourier against transformers 5.25: SAM's random Fourier features in every model that has them
(the positional embedding module, the prompt encoder's point path, the image-wide grid) and Perceiver's Fourier
position encoding.

Tolerance: the kind's bound (refpos/encodings/fourier_mistakes.py, module docstring), derived for a float32
computation with ``u = 2⁻²⁴``; where every step of the library ran in float64 (the module in ``.double()``, or
Perceiver's bands under ``torch.set_default_dtype(torch.float64)``), the same derivation with ``u = 2⁻⁵³``. ``G`` is
the module's own float32 matrix, given to refpos exactly (float32 values are float64 values).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.encodings.fourier import linear_positions
from refpos.encodings.fourier_mistakes import FourierInputs
from refpos.tests.kind_checks import Anchor, anchor_ids
from refpos.tests.kind_checks import transformers_object as _import

torch = pytest.importorskip("torch", reason="Fourier anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="Fourier anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors


#: model type -> the positional embedding module of its prompt encoder (SAM's PositionEmbeddingRandom)
MODULES = {"sam": "sam.modeling_sam:SamPositionalEmbedding",
           "sam_hq": "sam_hq.modeling_sam_hq:SamHQPositionalEmbedding",
           "sam2": "sam2.modeling_sam2:Sam2PositionalEmbedding",
           "sam2_video": "sam2_video.modeling_sam2_video:Sam2VideoPositionalEmbedding",
           "sam3_tracker": "sam3_tracker.modeling_sam3_tracker:Sam3TrackerPositionalEmbedding",
           "sam3_tracker_video": "sam3_tracker_video.modeling_sam3_tracker_video:Sam3TrackerVideoPositionalEmbedding",
           "edgetam": "edgetam.modeling_edgetam:EdgeTamPositionalEmbedding",
           "edgetam_video": "edgetam_video.modeling_edgetam_video:EdgeTamVideoPositionalEmbedding"}



def _module(path: str, double: bool) -> tuple[object, np.ndarray]:
    """The module with a seeded float32 G (2, 16), and G as float64."""
    torch.manual_seed(0)
    module = _import(path)(SimpleNamespace(scale=1.0, num_pos_feats=16, hidden_size=32))
    gaussian = module.positional_embedding.detach().float().double().numpy()
    return (module.double() if double else module), gaussian


def _sam_anchors() -> list[Anchor]:
    rng = np.random.default_rng(4)
    coords = rng.random((1, 2, 5, 2))
    anchors = []
    for model, path in MODULES.items():
        for double in (True, False):
            module, gaussian = _module(path, double)
            dtype = torch.float64 if double else torch.float32
            anchors.append(Anchor(f"{model}: {path.split(':')[1]} of coordinates in [0, 1] ({dtype})",
                                  FourierInputs("sam", coords, gaussian),
                                  lambda m=module, d=dtype: m(torch.from_numpy(coords).to(d)),
                                  "float64" if double else "float32"))
    return anchors


def _prompt_and_grid_anchors() -> list[Anchor]:
    from transformers import SamConfig
    from transformers.models.sam.modeling_sam import SamModel, SamPromptEncoder
    from transformers.models.sam2.modeling_sam2 import Sam2Model, Sam2PromptEncoder

    rng = np.random.default_rng(5)
    points = np.floor(rng.random((1, 1, 4, 2)) * 1024)
    torch.manual_seed(1)
    sam = SamPromptEncoder(SamConfig())
    sam_g = sam.shared_embedding.positional_embedding.detach().double().numpy()
    from transformers import Sam2PromptEncoderConfig

    sam2 = Sam2PromptEncoder(Sam2PromptEncoderConfig())
    sam2_g = sam2.shared_embedding.positional_embedding.detach().double().numpy()

    def points_through(encoder: object, label_weight: Callable[[object], object]) -> object:
        labels = torch.ones(1, 1, 4, dtype=torch.long)
        with torch.no_grad():
            out = encoder._embed_points(torch.from_numpy(points).float(), labels, pad=False)
        return out - label_weight(encoder)  # the label-1 embedding added to every point

    def grid(model: type, encoder: object, size: object) -> object:
        config = SimpleNamespace(prompt_encoder_config=SimpleNamespace(image_embedding_size=64))
        owner = SimpleNamespace(config=config, shared_image_embedding=encoder.shared_embedding,
                                prompt_encoder=SimpleNamespace(image_embedding_size=size))
        with torch.no_grad():
            return model.get_image_wide_positional_embeddings(owner)[0].permute(1, 2, 0)

    from refpos.encodings.fourier import grid_centre_coordinates

    grid64 = np.asarray(grid_centre_coordinates(64, 64, xp=np))
    return [
        Anchor("sam: SamPromptEncoder._embed_points, points in pixels of 1024 (float32)",
               FourierInputs("sam_prompts", points, sam_g, image_size=(1024, 1024)),
               lambda: points_through(sam, lambda e: e.point_embed[1].weight), "float32"),
        Anchor("sam2: Sam2PromptEncoder._embed_points, points in pixels of 1024 (float32)",
               FourierInputs("sam_prompts", points, sam2_g, image_size=(1024, 1024)),
               lambda: points_through(sam2, lambda e: e.point_embed.weight[1]), "float32"),
        Anchor("sam: SamModel.get_image_wide_positional_embeddings, 64 × 64 (float32)",
               FourierInputs("sam", grid64, sam_g), lambda: grid(SamModel, sam, None), "float32"),
        Anchor("sam2: Sam2Model.get_image_wide_positional_embeddings, 64 × 64 (float32)",
               FourierInputs("sam", grid64, sam2_g), lambda: grid(Sam2Model, sam2, (64, 64)), "float32"),
    ]


def _perceiver_anchors() -> list[Anchor]:
    from transformers.models.perceiver.modeling_perceiver import (
        PerceiverFourierPositionEncoding,
        generate_fourier_features,
    )

    dims, bands, resolution = [6, 9], 8, (12, 16)
    positions = np.reshape(np.asarray(linear_positions(dims, xp=np)), (-1, 2))
    setting = {"num_bands": bands, "max_resolution": resolution, "concat_pos": True, "sine_only": False}

    def float64_run() -> object:
        before = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)  # the bands' linspace follows the default dtype
        try:
            return generate_fourier_features(torch.from_numpy(positions)[None], bands, resolution, True, False)[0]
        finally:
            torch.set_default_dtype(before)

    module = PerceiverFourierPositionEncoding(bands, resolution, concat_pos=True, sine_only=False)
    sine_only = PerceiverFourierPositionEncoding(bands, resolution, concat_pos=False, sine_only=True)
    return [
        Anchor("perceiver: generate_fourier_features, default dtype float64 (float64)",
               FourierInputs("perceiver", positions, perceiver=setting), float64_run, "float64"),
        Anchor("perceiver: PerceiverFourierPositionEncoding (float32)",
               FourierInputs("perceiver", positions, perceiver=setting),
               lambda: module(dims, 1, torch.device("cpu"), torch.float32)[0], "float32"),
        Anchor("perceiver: PerceiverFourierPositionEncoding, sine only, no positions (float32)",
               FourierInputs("perceiver", positions, perceiver={**setting, "concat_pos": False, "sine_only": True}),
               lambda: sine_only(dims, 1, torch.device("cpu"), torch.float32), "float32"),
    ]


#: model type -> (its modeling module, its class prefix): the SAM 2-style composites, each with its own prompt encoder
#: (its G a buffer of (2, hidden_size // 2)) and its own shared_image_embedding for the mask decoder's grid
SAM2_STYLE = {"sam2": ("sam2.modeling_sam2", "Sam2"), "sam2_video": ("sam2_video.modeling_sam2_video", "Sam2Video"),
              "sam3_tracker": ("sam3_tracker.modeling_sam3_tracker", "Sam3Tracker"),
              "sam3_tracker_video": ("sam3_tracker_video.modeling_sam3_tracker_video", "Sam3TrackerVideo"),
              "edgetam": ("edgetam.modeling_edgetam", "EdgeTam"),
              "edgetam_video": ("edgetam_video.modeling_edgetam_video", "EdgeTamVideo")}


def _sam2_style_anchors() -> list[Anchor]:
    """Each SAM 2-style composite's prompt encoder on whole-pixel points and a box (its corners), in an image of its
    config's size, and its model's image-wide grid at the prompt encoder's embedding size: the label embeddings the
    encoder adds (point_embed rows 1, 2 and 3) taken off, the rest is the Fourier features."""
    from transformers import AutoConfig

    from refpos.encodings.fourier import grid_centre_coordinates

    rng = np.random.default_rng(6)
    anchors = []
    for model, (module, prefix) in SAM2_STYLE.items():
        config = AutoConfig.for_model(f"{model}_prompt_encoder")
        size, side = config.image_size, config.image_size // config.patch_size
        points = np.floor(rng.random((1, 1, 3, 2)) * size)
        box = np.floor(rng.random((1, 1, 4)) * size)
        torch.manual_seed(7)
        encoder = _import(f"{module}:{prefix}PromptEncoder")(config)
        gaussian = encoder.shared_embedding.positional_embedding.detach().double().numpy()
        label = encoder.point_embed.weight.detach()

        def through_points(e: object = encoder, p: np.ndarray = points, w: object = label) -> object:
            with torch.no_grad():
                return e._embed_points(torch.from_numpy(p).float(), torch.ones(1, 1, 3, dtype=torch.long),
                                       pad=False) - w[1]

        def through_box(e: object = encoder, b: np.ndarray = box, w: object = label) -> object:
            with torch.no_grad():
                corners = e._embed_boxes(torch.from_numpy(b).float())[:, :, :2]  # the padding point is no corner
                return corners - w[2:4]

        owner_class = _import(f"{module}:{prefix}Model")

        def grid(e: object = encoder, model_class: type = owner_class, n: int = side) -> object:
            owner = SimpleNamespace(shared_image_embedding=e.shared_embedding,
                                    prompt_encoder=SimpleNamespace(image_embedding_size=(n, n)))
            with torch.no_grad():
                return model_class.get_image_wide_positional_embeddings(owner)[0].permute(1, 2, 0)

        centres = np.asarray(grid_centre_coordinates(side, side, xp=np))
        anchors += [
            Anchor(f"{model}: {prefix}PromptEncoder._embed_points, points in pixels of {size} (float32)",
                   FourierInputs("sam_prompts", points, gaussian, image_size=(size, size)), through_points, "float32"),
            Anchor(f"{model}: {prefix}PromptEncoder._embed_boxes, a box's corners in pixels of {size} (float32)",
                   FourierInputs("sam_prompts", box.reshape(1, 1, 2, 2), gaussian, image_size=(size, size)),
                   through_box, "float32"),
            Anchor(f"{model}: {prefix}Model.get_image_wide_positional_embeddings, {side} × {side} (float32)",
                   FourierInputs("sam", centres, gaussian), grid, "float32")]
    return anchors


ANCHORS = _sam_anchors() + _prompt_and_grid_anchors() + _perceiver_anchors()
SAM2_STYLE_ANCHORS = _sam2_style_anchors()


@pytest.mark.parametrize("anchor", ANCHORS + SAM2_STYLE_ANCHORS, ids=anchor_ids(ANCHORS + SAM2_STYLE_ANCHORS))
def test_refpos_equals_the_library_within_the_bound(anchor):
    _, ratio = anchor.error()
    assert ratio <= 1.0, f"{anchor.name}: error {ratio:.3g} times the bound"


@pytest.mark.parametrize("anchor", SAM2_STYLE_ANCHORS, ids=anchor_ids(SAM2_STYLE_ANCHORS))
def test_every_catalogued_mistake_lies_outside_the_bound_of_the_library(anchor):
    """Each mistake the catalogue holds for the anchor's form, computed on its inputs, differs from what transformers
    computed by more than the bound somewhere: the bound that lets a float32 port through tells them apart."""
    from refpos.encodings.fourier_mistakes import FOURIER_MISTAKES

    theirs = anchor.library().detach().double().numpy()
    _, bound = anchor.inputs.reference()
    tried = 0
    for mistake in FOURIER_MISTAKES:
        wrong = mistake.compute(anchor.inputs)
        if wrong is None:
            continue
        tried += 1
        assert np.max(np.abs(np.asarray(wrong[0], dtype=np.float64) - theirs) / bound) > 1.0, mistake.name
    assert tried >= 5, anchor.name


def largest_errors() -> dict[str, tuple[str, float, float]]:
    """anchor name -> (dtype, largest error, largest error / bound): the numbers docs/fourier.md reports."""
    return {a.name: (a.dtype, *a.error()) for a in ANCHORS + SAM2_STYLE_ANCHORS}
