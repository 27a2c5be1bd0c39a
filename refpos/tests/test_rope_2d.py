"""GLM's 2-D positions (:mod:`refpos.rope.two_d`, the ``rope_2d`` kind): each half of a head a RoPE at its own axis.

Exact checks where the split makes them exact: a half is :func:`refpos.apply_rope` at its axis; the first axis
alone moves the first half; the pipeline runs the record's encoding with two-axis positions.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.models import model_positions
from refpos.rope.config import RopeConfig
from refpos.rope.two_d import GLM_AXES, apply_rope_2d, glm_position_ids

HALF = RopeConfig(head_dim=8, theta=10000.0)
X = np.random.default_rng(0).standard_normal((6, 16))


def test_each_half_is_a_rope_at_its_own_axis():
    ids = glm_position_ids(context=4, length=6)
    out = apply_rope_2d(X, ids, HALF)
    np.testing.assert_array_equal(out[:, :8], refpos.to_numpy(refpos.apply_rope(X[:, :8], ids[0], HALF)))
    np.testing.assert_array_equal(out[:, 8:], refpos.to_numpy(refpos.apply_rope(X[:, 8:], ids[1], HALF)))
    swapped = apply_rope_2d(X, ids[::-1], HALF)  # the axes are not interchangeable
    assert not np.allclose(swapped, out)


def test_the_position_ids_are_glm_s():
    ids = glm_position_ids(context=3, length=6, mask_position=1)
    assert ids.tolist() == [[0, 1, 2, 1, 1, 1], [0, 0, 0, 1, 2, 3]]
    assert ids.dtype == np.int64 and GLM_AXES == ("position_ids", "block_position_ids")
    for kwargs, named in (({"context": 0, "length": 2}, "context"), ({"context": 3, "length": 2}, "length"),
                          ({"context": 3, "length": 4, "mask_position": 3}, "mask_position")):
        with pytest.raises(ValueError, match=named):
            glm_position_ids(**kwargs)


def test_bad_shapes_are_refused_by_name():
    with pytest.raises(ValueError, match="head size 12"):
        apply_rope_2d(X[:, :12], glm_position_ids(3, 6), HALF)
    with pytest.raises(ValueError, match="two axes"):
        apply_rope_2d(X, np.arange(6), HALF)


def test_the_record_runs_in_the_attention_pipeline():
    glm = {"model_type": "chatglm", "num_layers": 1, "num_attention_heads": 2, "hidden_size": 32,
           "position_encoding_2d": True}
    layer = model_positions(glm).layers[0]
    assert (layer.kind, layer.rope.head_dim) == ("rope_2d", 8) and layer.params()["axes"] == list(GLM_AXES)
    encoding = layer.encoding()
    ids = glm_position_ids(context=4, length=6)
    q, k = encoding.rotate(X[None], X[None, ::-1], ids, ids)
    np.testing.assert_array_equal(q[0], apply_rope_2d(X, ids, layer.rope))
    np.testing.assert_array_equal(k[0], apply_rope_2d(X[::-1], ids, layer.rope))
    odd = dict(glm, hidden_size=12, num_attention_heads=2)  # heads of 6 channels: no two whole-pair halves
    with pytest.raises(ValueError, match="divisible by 4"):
        model_positions(odd)
