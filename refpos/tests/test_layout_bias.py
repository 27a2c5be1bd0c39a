"""refpos.encodings.layout_bias and the layout_bias kind: the bias at hand-computed buckets, the record's tables and
image path, bad input named; a wrong bias (the y table at the top edge) is told apart."""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.layout_bias import joint_positions, layout_bias, layout_buckets, visual_boxes
from refpos.encodings.layout_bias_mistakes import bias_with, mistaken
from refpos.models import model_positions

LAYOUTLMV3 = {"model_type": "layoutlmv3", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 12,
              "coordinate_size": 2, "shape_size": 2, "max_2d_position_embeddings": 32, "max_position_embeddings": 64,
              "pad_token_id": 1, "input_size": 32, "patch_size": 8}


def test_the_bias_at_hand_computed_buckets():
    R, X, Y = (np.arange(n, dtype=float)[:, None] * s for n, s in ((32, 1), (64, 100), (64, 1000)))
    box = [[0, 0, 5, 5], [20, 0, 25, 40]]  # Δx0 = 20, Δy1 = 35: logarithmic x and y buckets
    # 16 + trunc(ln(20/16) / ln(16) · 16) = 17, 16 + trunc(ln(35/16) / ln(16) · 16) = 20; + 32 for the future half
    assert {k: v.tolist() for k, v in layout_buckets([0, 1], box).items()} == {
        "1d": [[0, 17], [1, 0]], "x": [[0, 49], [17, 0]], "y": [[0, 52], [20, 0]]}
    bias = layout_bias(R, X, Y, [0, 1], box, max_distance=128, max_2d_distance=256, head_dim=4)
    assert bias[0].tolist() == [[0.0, (17 + 4900 + 52000) / 2], [(1 + 1700 + 20000) / 2, 0.0]]
    params = {"num_buckets": 32, "max_distance": 128, "num_2d_buckets": 64, "max_2d_distance": 256}
    wrong = bias_with({"1d": R, "x": X, "y": Y}, [0, 1], np.array(box), mistaken("y_top_edge", params), 4)
    assert not np.array_equal(wrong, bias)


def test_the_image_path_joins_the_patch_grid():
    assert visual_boxes(2).tolist() == [[1, 1, 999, 999], [0, 0, 500, 500], [500, 0, 1000, 500],
                                        [0, 500, 500, 1000], [500, 500, 1000, 1000]]
    assert joint_positions(2, 4).tolist() == [0, 1, 0, 1, 2, 3, 4]
    layer = model_positions(LAYOUTLMV3).stack("encoder")[0]
    places, boxes = layer.joined([0, 1], [[[1, 2, 3, 4], [5, 6, 7, 8]]])
    assert layer.image_side == 4 and places.size == 2 + 1 + 16 and boxes.shape == (1, 19, 4)
    without = model_positions({**LAYOUTLMV3, "visual_embed": False})
    assert without.stack("encoder")[0].image_side == 0
    assert [r.kind for r in without.stack("encoder.input")] == ["box_tables", "learned"]
    assert [r.kind for r in model_positions(LAYOUTLMV3).stack("encoder.input")] == ["box_tables", "learned", "grid"]


def test_bad_input_is_named():
    R, XY = np.ones((32, 2)), np.ones((64, 2))
    box = [[[1, 2, 3, 4]]]
    for kwargs, name in (({"rel_table": np.ones((31, 2))}, "rel_table"), ({"x_table": None}, "x_table"),
                         ({"y_table": np.ones((64, 3))}, "y_table"), ({"bbox": None}, "bbox"),
                         ({"max_distance": 8}, "max_distance"), ({"head_dim": 0}, "head_dim")):
        call = {"rel_table": R, "x_table": XY, "y_table": XY, "positions": [0], "bbox": box, "head_dim": 4, **kwargs}
        with pytest.raises(ValueError, match=name):
            layout_bias(**call)
    layer = model_positions(LAYOUTLMV3).stack("encoder")[0]
    with pytest.raises(ValueError, match="x_table"):
        layer.bias_at(np.ones((32, 2)), np.ones((32, 2)), np.ones((64, 2)), [0], box)


def test_a_table_of_another_shape_is_refused_by_name():
    """The records check the tables they are handed against the shapes they state (refpos.validation's
    check_table_shapes, one check for every kind with tables)."""
    from refpos.validation import check_table_shapes

    layer = model_positions(LAYOUTLMV3).stack("encoder")[0]
    rel = np.zeros((layer.num_buckets, layer.n_heads))
    xy = np.zeros((layer.num_2d_buckets, layer.n_heads))
    assert layer.bias_at(rel, xy, xy, [0, 1], [[[0, 0, 1, 1], [2, 2, 3, 3]]]).shape[-2:] == (2, 2)
    with pytest.raises(ValueError, match=r"y_table: the record's table is \(64, 2\), got \(63, 2\)"):
        layer.bias_at(rel, xy, xy[1:], [0, 1], [[[0, 0, 1, 1], [2, 2, 3, 3]]])
    with pytest.raises(ValueError, match=r"x_table: .* got None"):
        layer.bias_at(rel, None, xy, [0, 1], [[[0, 0, 1, 1], [2, 2, 3, 3]]])
    check_table_shapes({"t": (np.zeros((2, 3)), (2, 3))})
    with pytest.raises(ValueError, match=r"t: the record's table is \(2, 3\), got \(3, 2\)"):
        check_table_shapes({"t": (np.zeros((3, 2)), (2, 3))})


@pytest.mark.parametrize(("rows", "distance", "why"), [(5, 128, "even"), (2, 128, ">= 4"), (32, 4, "max_distance")])
def test_a_table_t5s_buckets_refuse_is_named(rows, distance, why):
    """A table's rows are its bucket count, held to T5's bidirectional rules (refpos.encodings.t5.check_bucket_args)."""
    with pytest.raises(ValueError, match=rf"rel_table \({rows} bucket rows\): .*{why}"):
        layout_bias(np.ones((rows, 2)), None, None, [0, 1], head_dim=4, max_distance=distance)
    with pytest.raises(ValueError, match=r"x_table \(7 bucket rows\): .*even"):
        layout_bias(np.ones((32, 2)), np.ones((7, 2)), np.ones((7, 2)), [0, 1], [[0, 0, 1, 1], [1, 1, 2, 2]],
                    head_dim=4)
