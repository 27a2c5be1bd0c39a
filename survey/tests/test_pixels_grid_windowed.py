"""The grid comparison of SAM 2's Hiera (hand-made runs, no torch): a background table resampled bicubic plus a
window table tiled, recorded as two sites of one owner at its first block's input, graded exact on refpos's rows,
wrong where the window is left out, and every wrong way of the catalogue told apart."""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_windowed import WINDOW_MISTAKES
from survey.pixel_kinds import compare_grid
from survey.pixels import Capture, PixelRun, Site

HIERA = {"model_type": "sam2_hiera_det_model", "hidden_size": 8, "window_size_per_stage": [4, 4, 4, 4],
         "window_positional_embedding_background_size": [3, 5], "blocks_per_stage": [1, 1, 1, 1]}
SHAPE = [1, 3, 64, 96]  # a 16 × 24 patch map at stride 4


@pytest.fixture
def record():
    return refpos.model_positions(HIERA).stack("vision.input")[0]


def hiera_run(record, background, window, rows):
    """Two bare tables of one owner, each capture the first block's input as run and with that table zeroed:
    the patches ``x`` plus ``rows`` (what both tables add), and the patches plus what the other one adds."""
    h, w, d = 16, 24, record.dim
    x = np.random.default_rng(1).standard_normal((1, h, w, d))
    tiled = np.asarray(WINDOW_MISTAKES["background_missing"](background, window, (h, w), record.grid, record.window))
    out = x + rows.reshape(1, h, w, d)
    sites = []
    for name, table, kept in (("pos_embed", background, tiled), ("pos_embed_window", window, rows - tiled)):
        cells = table.shape[0]
        side = record.grid if name == "pos_embed" else (record.window, record.window)
        weight = np.moveaxis(table.reshape(*side, d), -1, 0)[None]
        assert weight.shape[2] * weight.shape[3] == cells
        zeroed = x + kept.reshape(1, h, w, d)
        sites.append(Site(f"backbone.{name}", "backbone", False, {f"backbone.{name}": weight},
                          captures={"native": Capture([out], [zeroed])}, at="backbone: the first layer's input"))
    return PixelRun("Sam2HieraDetModel", "pixel_values", {"native": SHAPE}, sites,
                    attention=["Sam2MultiScaleAttention"])


@pytest.fixture
def tables(record):
    rng = np.random.default_rng(37)
    return (rng.standard_normal((record.grid[0] * record.grid[1], record.dim)),
            rng.standard_normal((record.window ** 2, record.dim)))


def test_the_windowed_rows_are_exact_and_every_wrong_way_told_apart(record, tables):
    assert (record.way, record.grid, record.window) == ("bicubic", (3, 5), 4)
    background, window = tables
    rows = np.asarray(record.reference(background, (16, 24), window_table=window))
    run = hiera_run(record, background, window, rows)
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= len(WINDOW_MISTAKES) and outcome.survived == []
    assert set(outcome.sites) == {"backbone.pos_embed", "backbone.pos_embed_window"}


@pytest.mark.parametrize("mistake", sorted(WINDOW_MISTAKES))
def test_a_wrong_way_is_graded_wrong(record, tables, mistake):
    background, window = tables
    rows = np.asarray(WINDOW_MISTAKES[mistake](background, window, (16, 24), record.grid, record.window))
    run = hiera_run(record, background, window, rows)
    assert compare_grid(record, run, run.sites).status == "wrong"


def test_a_run_without_the_window_table_is_absent(record, tables):
    background, window = tables
    rows = np.asarray(record.reference(background, (16, 24), window_table=window))
    run = hiera_run(record, background, window, rows)
    outcome = compare_grid(record, run, run.sites[:1])
    assert outcome.status != "exact" and "window" in outcome.cause
