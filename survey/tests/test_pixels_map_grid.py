"""The grid comparison on an embedding laid out as maps ``(S, h, w, d)``: the output states its own grid and its
``S`` sequences (SegGPT stacks the prompt over its image, so its grid is not the fed image's, and runs the images and
the masks as a batch of two) — hand-made runs, no torch: every map graded against refpos's rows at the map's own
grid, one map off graded wrong, and the same rows read as one flat sequence of the fed image's aspect not exact."""

from __future__ import annotations

import numpy as np

import refpos
from survey.pixel_kinds import compare_grid
from survey.pixel_kinds.grid import map_sequences
from survey.pixels import Capture, PixelRun, Site

SEGGPT = {"model_type": "seggpt", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
          "image_size": [64, 32], "patch_size": 8, "pretrain_image_size": 32, "mlp_dim": 8,
          "use_relative_position_embeddings": False}
#: the image fed (32 × 32 pixels); the model embeds it under its prompt, a 64 × 32 image: an 8 × 4 map
FED = {"native": [1, 3, 32, 32]}


def map_run(record, table, off_map: int | None = None, flat: bool = False) -> PixelRun:
    """An embedding site whose recorded difference is refpos's rows at the 8 × 4 map, twice (map ``off_map`` off);
    ``flat``: the two maps recorded as one sequence."""
    rows = np.asarray(record.reference(table, (8, 4))).reshape(8, 4, -1)
    added = np.stack([rows + (0.5 if k == off_map else 0.0) for k in range(2)])
    added = added.reshape(1, -1, added.shape[-1]) if flat else added
    site = Site("embeddings.position_embeddings", "embeddings", True, {"embeddings.position_embeddings": table},
                captures={"native": Capture([added], [np.zeros_like(added)])})
    return PixelRun("SegGptModel", "pixel_values", FED, [site], attention=["SegGptAttention"], dtype="float64")


def test_each_map_is_compared_at_its_own_grid():
    record = refpos.model_positions(SEGGPT).stack("vision.input")[0]
    table = np.random.default_rng(5).standard_normal((record.table_rows, record.dim))
    run = map_run(record, table)
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.survived == []
    off = map_run(record, table, off_map=1)
    assert compare_grid(record, off, off.sites).status == "wrong"
    flat = map_run(record, table, flat=True)  # 64 rows of a square image: no grid of its aspect holds them
    assert compare_grid(record, flat, flat.sites).status != "exact"


def test_map_sequences_reads_maps_and_leaves_sequences():
    diff, grid = map_sequences(np.zeros((2, 8, 4, 6)), 6)
    assert diff.shape == (2, 32, 6) and grid == (8, 4)
    diff, grid = map_sequences(np.zeros((1, 6, 8, 4)), 6)  # channels first
    assert diff.shape == (1, 32, 6) and grid == (8, 4)
    diff, grid = map_sequences(np.zeros((1, 17, 6)), 6)
    assert diff.shape == (1, 17, 6) and grid is None
