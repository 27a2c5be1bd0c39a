"""refpos.encodings.tiled_grid and the tiled_grid kind without torch: the formula on hand-made tables, bad input
refused by name, the bound's mistakes outside it, and the family row's record."""

from __future__ import annotations

import math

import numpy as np
import pytest

import refpos
from refpos.encodings.tiled_grid import aspect_ratio_rows, gated_tile_grid, tiled_input_positions
from refpos.encodings.tiled_grid_mistakes import input_bound, input_mistakes

RNG = np.random.default_rng(7)
T, N, D, IDS = 2, 3, 4, 3
E, G = RNG.standard_normal((N, D)), RNG.standard_normal((IDS, T * N * D))
A_PRE, A_POST = RNG.standard_normal((IDS, T * D)), RNG.standard_normal((IDS, T * D))


def test_the_gated_grid_is_the_mix_per_tile():
    t = math.tanh(0.4)
    out = gated_tile_grid(E, G, 0.4, 2, T)
    for tile in range(T):
        for row in range(N):
            expected = (1 - t) * E[row] + t * G[2, (tile * N + row) * D:(tile * N + row + 1) * D]
            np.testing.assert_allclose(out[tile, row], expected, rtol=0, atol=1e-15)


def test_the_class_row_gains_no_pre_tile_row():
    out = tiled_input_positions(E, G, 0.4, A_PRE, -0.3, 1, T)
    grid, pre = gated_tile_grid(E, G, 0.4, 1, T), aspect_ratio_rows(A_PRE, -0.3, 1, T)
    np.testing.assert_array_equal(out[:, 0], grid[:, 0])
    np.testing.assert_allclose(out[:, 1:], grid[:, 1:] + pre[:, None], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(aspect_ratio_rows(A_PRE, None, 1, T), A_PRE[1].reshape(T, D))


@pytest.mark.parametrize(("call", "name"), [
    (lambda: gated_tile_grid(E, G, 0.1, IDS, T), "aspect_ratio_id"),
    (lambda: gated_tile_grid(E, G, 0.1, -1, T), "aspect_ratio_id"),
    (lambda: gated_tile_grid(E, G, 0.1, 1.0, T), "aspect_ratio_id"),
    (lambda: gated_tile_grid(E, G, 0.1, 0, 3), "tile_table"),
    (lambda: gated_tile_grid(E[0], G, 0.1, 0, T), "embedding"),
    (lambda: gated_tile_grid(E, G, float("nan"), 0, T), "gate"),
    (lambda: gated_tile_grid(E, G, "0.1", 0, T), "gate"),
    (lambda: aspect_ratio_rows(A_PRE, 0.1, 0, 3), "table"),
    (lambda: aspect_ratio_rows(A_PRE[0], 0.1, 0, T), "table"),
    (lambda: tiled_input_positions(E, G, 0.1, RNG.standard_normal((IDS, T * 5)), 0.1, 0, T), "pre_table"),
])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


def test_every_mistake_lies_outside_the_bound():
    args = (E, G, 0.4, A_PRE, -0.3, 1, T)
    right, bound = tiled_input_positions(*args), input_bound(*args)
    mistakes = input_mistakes(E, G, 0.4, A_PRE, -0.3, A_POST, 0.6, 1, T)
    assert len(mistakes) == 8
    for name, wrong in mistakes.items():
        assert wrong is not None and np.any(np.abs(wrong - right) > bound), name


def test_the_family_row_builds_the_record():
    config = {"model_type": "mllama_vision_model", "num_hidden_layers": 2, "attention_heads": 2, "hidden_size": D,
              "image_size": 28, "patch_size": 14, "max_num_tiles": T, "supported_aspect_ratios": [[1, 1], [1, 2]]}
    site = refpos.model_positions(config).stack("vision.input")[0]
    assert (site.tiles, site.rows, site.dim, site.ids) == (T, 5, D, 3)
    with pytest.raises(ValueError, match="tile_table"):
        site.reference(np.zeros((5, D)), np.zeros((2, T * 5 * D)), 0.1, np.zeros((3, T * D)), 0.1, 0)
    with pytest.raises(ValueError, match="supported_aspect_ratios"):
        refpos.model_positions(config | {"supported_aspect_ratios": []})
