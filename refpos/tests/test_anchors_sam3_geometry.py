r"""SAM 3's geometry encoder (and SAM 3 Lite-Text's, the same code): the pieces its refusal names, against the modules
transformers builds (anchors env).

The family rows refuse the encoder by name (refpos/models/data/families.toml: ``sam3_geometry_encoder``): its box
tokens gain a learned projection of a sine, not an encoding added, and its layers add the image's sine to the
cross-attention keys alone. What the refusal states of the sine is checked here: the encoder's box-coordinate
encoding (``_encode_box_coordinates``, the input of ``boxes_pos_enc_project``) is refpos's sincos2d variant
``anchors`` of the box centre ``(c_x, c_y)`` with ``hidden_size // 2`` features an axis, y block first, then the raw
height and width:

.. math:: e = \bigl[\,s(2\pi c_y) \;|\; s(2\pi c_x) \;|\; h \;|\; w\,\bigr].

Tolerance: the variant's float32 bound (refpos/encodings/sincos2d_mistakes.py, ``u·((8 + ln T)·θ + 4)`` per point,
``θ = 2π·max(c)``), the module computing in float32; the raw height and width pass through unchanged (exact). Each
catalogued sincos2d mistake of the variant, and height and width exchanged, lies outside it.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.encodings.sincos2d_mistakes import SINCOS2D_MISTAKES, Sincos2dInputs
from refpos.mistake_match import within

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

HIDDEN = 32
#: the encoders: (model type, modeling module, encoder class, config class)
ENCODERS = [("sam3_geometry_encoder", "sam3.modeling_sam3", "Sam3GeometryEncoder", "Sam3GeometryEncoderConfig"),
            ("sam3_lite_text_geometry_encoder", "sam3_lite_text.modeling_sam3_lite_text",
             "Sam3LiteTextGeometryEncoder", "Sam3LiteTextGeometryEncoderConfig")]


def _boxes() -> np.ndarray:
    """Seeded boxes ``(c_x, c_y, w, h)`` in [0, 1], float32-exact."""
    boxes = np.random.default_rng(3).uniform(0.05, 0.95, size=(9, 4))
    return boxes.astype(np.float32).astype(np.float64)


def _theirs(module_name: str, encoder: str, config: str, boxes: np.ndarray) -> np.ndarray:
    import importlib

    module = importlib.import_module(f"transformers.models.{module_name}")
    cfg = getattr(transformers, config)(hidden_size=HIDDEN, num_layers=1, num_attention_heads=2, intermediate_size=8)
    built = getattr(module, encoder)(cfg).eval()
    cx, cy, w, h = (torch.from_numpy(boxes[:, i]).float() for i in range(4))
    with torch.no_grad():
        return built._encode_box_coordinates(cx, cy, w, h).double().numpy()


def _ours(boxes: np.ndarray) -> tuple[Sincos2dInputs, np.ndarray, np.ndarray]:
    inputs = Sincos2dInputs("anchors", {"coords": boxes[:, :2], "num_features": HIDDEN // 2})
    sine, bound = inputs.reference()
    return inputs, np.concatenate([sine, boxes[:, [3, 2]]], axis=-1), bound


@pytest.mark.parametrize(("model_type", "module_name", "encoder", "config"), ENCODERS,
                         ids=[e[0] for e in ENCODERS])
def test_the_box_encoding_is_the_anchors_sine_then_height_and_width(model_type, module_name, encoder, config):
    boxes = _boxes()
    theirs = _theirs(module_name, encoder, config, boxes)
    inputs, ours, bound = _ours(boxes)
    assert theirs.shape == ours.shape == (len(boxes), HIDDEN + 2)
    sine = HIDDEN
    assert within(theirs[:, :sine], ours[:, :sine], bound), float(np.abs(theirs[:, :sine] - ours[:, :sine]).max())
    assert np.array_equal(theirs[:, sine:], ours[:, sine:])  # the raw height and width, exact
    caught = []
    for mistake in SINCOS2D_MISTAKES:
        wrong = mistake.compute(inputs)
        if wrong is not None and wrong[0].shape == ours[:, :sine].shape:
            assert not within(theirs[:, :sine], wrong[0], wrong[1]), mistake.name
            caught.append(mistake.name)
    assert caught, "no catalogued mistake applies"
    swapped = ours[:, [*range(sine), sine + 1, sine]]
    assert not np.array_equal(theirs, swapped)  # width before height: told apart
    refused = refpos.model_positions({"model_type": model_type, "hidden_size": HIDDEN, "num_layers": 1,
                                      "num_attention_heads": 2})
    assert {r.kind for r in refused} == {"refused"} and "boxes_pos_enc_project" in refused.not_modelled["model_type"]


def test_the_anchor_fails_on_the_centre_read_x_first():
    """The same comparison against the centre's sine with x first (Deformable DETR's order) fails."""
    boxes = _boxes()
    theirs = _theirs(*ENCODERS[0][1:], boxes)
    wrong = Sincos2dInputs("anchors", {"coords": boxes[:, :2], "num_features": HIDDEN // 2},
                           changed={"swap_xy": False})
    sine, bound = wrong.reference()
    assert not within(theirs[:, :HIDDEN], sine, bound)
