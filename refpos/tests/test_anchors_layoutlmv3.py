r"""refpos's layout bias and box tables against transformers 5.25's LayoutLMv3 (the same code in 5.24).

* ``LayoutLMv3Encoder._compute_position_bias`` (the bias every layer adds, ``relative_position_bucket``,
  ``_cal_1d_pos_emb``, ``_cal_2d_pos_emb``) of a small config with seeded bucket tables, at the text tokens' places
  and boxes, and at text and image tokens joined as ``LayoutLMv3Model.forward`` joins them (the class token's and the
  patches' boxes from ``create_visual_bbox``, their places restarting at 0), against
  :func:`refpos.encodings.layout_bias.layout_bias` within the float32 bound of
  :func:`refpos.encodings.layout_bias_mistakes.layout_bias_bound`; every catalogued mistake lies outside it.
* ``relative_position_bucket`` at every relative position to 5000 each way, against
  :func:`refpos.encodings.t5.t5_bucket` (the one bucket function), exactly, for several bucket counts and distances.
* ``LayoutLMv3TextEmbeddings.calculate_spatial_position_embeddings`` (the six box rows concatenated, the extents
  clipped to 0 … 1023) against :func:`refpos.encodings.box_tables.box_positions` with ``combine="concat"``, exactly
  (a concatenation of rows rounds nothing).
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.box_tables import box_positions
from refpos.encodings.layout_bias import joint_positions, layout_bias, visual_boxes
from refpos.encodings.layout_bias_mistakes import MISTAKES, bias_with, layout_bias_bound, mistaken
from refpos.encodings.t5 import t5_bucket
from refpos.tests.kind_checks import transformers_object as _import

torch = pytest.importorskip("torch", reason="LayoutLMv3 anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="LayoutLMv3 anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

HEADS, WIDTH = 4, 32  # head width 8
BINS, MAX, BINS_2D, MAX_2D = 32, 128, 64, 256
#: boxes whose left edges and bottom edges differ by small and large distances (exact, logarithmic and saturated
#: buckets), and whose top and right edges differ from them
BOXES = np.array([[[10, 20, 30, 40], [12, 25, 300, 41], [400, 5, 420, 600], [0, 300, 999, 310],
                   [700, 700, 710, 720], [9, 18, 35, 44], [150, 90, 160, 140], [1000 - 1, 0, 1000, 999]]])


def _config(**more):
    return _import("layoutlmv3.configuration_layoutlmv3:LayoutLMv3Config")(
        vocab_size=16, hidden_size=WIDTH, num_hidden_layers=1, num_attention_heads=HEADS, intermediate_size=16,
        max_position_embeddings=64, rel_pos_bins=BINS, max_rel_pos=MAX, rel_2d_pos_bins=BINS_2D,
        max_rel_2d_pos=MAX_2D, input_size=32, patch_size=8, **more)


def _encoder(**more):
    encoder = _import("layoutlmv3.modeling_layoutlmv3:LayoutLMv3Encoder")(_config(**more)).eval()
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name in ("rel_pos_bias", "rel_pos_x_bias", "rel_pos_y_bias"):
            if hasattr(encoder, name):
                weight = getattr(encoder, name).weight
                weight.copy_(torch.randn(weight.shape, generator=generator))
    return encoder


def _tables(encoder) -> dict[str, np.ndarray]:
    names = {"1d": "rel_pos_bias", "x": "rel_pos_x_bias", "y": "rel_pos_y_bias"}
    return {k: getattr(encoder, v).weight.detach().double().numpy().T for k, v in names.items() if hasattr(encoder, v)}


def _observed(encoder, positions: np.ndarray, boxes: np.ndarray | None) -> np.ndarray:
    with torch.no_grad():
        bias = encoder._compute_position_bias(torch.as_tensor(positions)[None],
                                              None if boxes is None else torch.as_tensor(boxes))
    return bias.double().numpy()


PARAMS = {"num_buckets": BINS, "max_distance": MAX, "num_2d_buckets": BINS_2D, "max_2d_distance": MAX_2D}


def _cases():
    visual = visual_boxes(4)  # input_size 32, patch 8: a 4 × 4 grid
    joint = np.concatenate([BOXES, visual[None]], axis=1)
    rng = np.random.default_rng(0)  # 300 tokens: 1-D distances past max_rel_pos
    corners = np.sort(rng.integers(0, 1000, (1, 300, 2, 2)), axis=-2)
    long = corners.transpose(0, 1, 3, 2).reshape(1, 300, 4)
    return [("text", np.arange(BOXES.shape[1]), BOXES),
            ("text and image", joint_positions(BOXES.shape[1], 16), joint),
            ("300 tokens", np.arange(300), long)]


@pytest.mark.parametrize("case", [0, 1, 2])
def test_the_bias_within_the_float32_bound(case):
    encoder = _encoder()
    name, positions, boxes = _cases()[case]
    tables = _tables(encoder)
    reference = layout_bias(tables["1d"], tables["x"], tables["y"], positions, boxes, max_distance=MAX,
                            max_2d_distance=MAX_2D, head_dim=WIDTH // HEADS)
    observed = _observed(encoder, positions, boxes)
    bound = layout_bias_bound(tables, positions, boxes, PARAMS, WIDTH // HEADS)
    assert observed.shape == reference.shape == (1, HEADS, positions.size, positions.size)
    worst = float(np.max(np.abs(observed - reference) / bound))
    assert worst <= 1.0, (name, worst)
    assert float(np.abs(observed - reference).max()) > 0.0  # a float32 sum compared as it is


def test_the_bias_without_the_spatial_part():
    encoder = _encoder(has_spatial_attention_bias=False)
    positions = np.arange(8)
    tables = _tables(encoder)
    reference = layout_bias(tables["1d"], None, None, positions, max_distance=MAX, head_dim=WIDTH // HEADS)
    observed = _observed(encoder, positions, None)
    bound = layout_bias_bound(tables, positions, None, PARAMS, WIDTH // HEADS)
    assert float(np.max(np.abs(observed[0] - reference) / bound)) <= 1.0


def test_every_mistake_lies_outside_the_bound():
    encoder = _encoder()
    tables = _tables(encoder)
    margins: dict[str, list[float]] = {}
    for _, positions, boxes in _cases():
        observed = _observed(encoder, positions, boxes)
        bound = layout_bias_bound(tables, positions, boxes, PARAMS, WIDTH // HEADS)
        for mistake in MISTAKES:
            wrong = bias_with(tables, positions, boxes, mistaken(mistake, PARAMS), WIDTH // HEADS)
            margins.setdefault(mistake, []).append(float(np.max(np.abs(observed - wrong) / bound)))
    for mistake, found in margins.items():  # caught somewhere, and wherever it shows, far outside the bound
        assert max(found) > 1e3 and all(m <= 1.0 or m > 1e3 for m in found), (mistake, found)


def test_the_visual_boxes_are_create_visual_bbox():
    model = _import("layoutlmv3.modeling_layoutlmv3:LayoutLMv3Model")(_config())
    for size in (1, 3, 4, 7, 14):
        assert np.array_equal(model.create_visual_bbox(image_size=(size, size)).numpy(), visual_boxes(size))


def test_one_bucket_function():
    bucket = _import("layoutlmv3.modeling_layoutlmv3:LayoutLMv3Encoder").relative_position_bucket
    rel = np.arange(-5000, 5001)
    for bins, distance in [(32, 128), (64, 256), (16, 32), (8, 16), (128, 512), (32, 256)]:
        theirs = bucket(None, torch.as_tensor(rel), num_buckets=bins, max_distance=distance).numpy()
        assert np.array_equal(theirs, np.asarray(t5_bucket(rel, num_buckets=bins, max_distance=distance)))


def test_the_box_rows_concatenated():
    config = _config(max_2d_position_embeddings=1024, coordinate_size=6, shape_size=4)
    module = _import("layoutlmv3.modeling_layoutlmv3:LayoutLMv3TextEmbeddings")(config).eval()
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name in "xyhw":
            table = getattr(module, f"{name}_position_embeddings").weight
            table.copy_(torch.randn(table.shape, generator=generator))
    boxes = np.concatenate([BOXES, [[[40, 50, 30, 20]]]], axis=1)  # a last box with negative extents: row 0
    with torch.no_grad():
        observed = module.calculate_spatial_position_embeddings(torch.as_tensor(boxes)).double().numpy()
    tables = {f"{n}_table": getattr(module, f"{n}_position_embeddings").weight.detach().double().numpy()
              for n in "xyhw"}
    mine = box_positions(**tables, bbox=boxes, combine="concat", clip_extents=1023)
    assert np.array_equal(observed, mine)
    swapped = box_positions(tables["y_table"], tables["x_table"], tables["h_table"], tables["w_table"], boxes,
                            combine="concat", clip_extents=1023)
    assert not np.array_equal(observed, swapped)
