"""The grid comparison with tables between the layers (YOLOS; hand-made runs, no torch): the embedding gains the
input's table, the module of the mid tables returns them resampled. refpos's tables are graded exact, and runs made
by wrong answers — the tables in the other order, bilinear for bicubic, the module's output missing — are graded
wrong or not reached."""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_variants import GRID_VARIANTS
from survey.pixel_kinds import compare_grid
from survey.pixels import Capture, PixelRun, Site

YOLOS = {"model_type": "yolos", "num_hidden_layers": 3, "num_attention_heads": 2, "hidden_size": 8,
         "image_size": [16, 24], "patch_size": 4, "num_detection_tokens": 2}
SHAPES = {"native": [1, 3, 16, 24], "resampled": [1, 3, 8, 40]}
GRIDS = {"native": (4, 6), "resampled": (2, 10)}


@pytest.fixture
def yolos():
    record = refpos.model_positions(YOLOS).stack("vision.input")[0]
    rng = np.random.default_rng(8)
    table = rng.standard_normal((record.table_rows, 8)).astype(np.float32).astype(np.float64)
    tables = rng.standard_normal((record.mid, record.table_rows, 8)).astype(np.float32).astype(np.float64)
    return record, table, tables


def run_of(record, table, tables, mid_of):
    first, mid = {}, {}
    for name, grid in GRIDS.items():
        added = np.asarray(record.reference(table, grid), np.float32)[None]
        first[name] = Capture([added], [np.zeros_like(added)])
        if mid_of is not None:
            out = np.asarray(mid_of(grid), np.float32)[:, None]
            mid[name] = Capture([out], [np.zeros_like(out)])
    sites = [Site("embeddings.position_embeddings", "embeddings", False,
                  {"embeddings.position_embeddings": table.astype(np.float32)[None]}, captures=first),
             Site("encoder.interpolation.mid_position_embeddings", "encoder.interpolation", False,
                  {"encoder.interpolation.mid_position_embeddings": tables.astype(np.float32)[:, None]},
                  captures=mid)]
    return PixelRun("YolosModel", "pixel_values", SHAPES, sites, attention=["YolosAttention"], dtype="float32")


def test_refpos_tables_are_exact_and_the_wrong_answers_told_apart(yolos):
    record, table, tables = yolos
    run = run_of(record, table, tables, lambda grid: record.mid_tables(tables, grid))
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 8 and outcome.survived == []
    assert set(outcome.sites) == {s.path for s in run.sites}


@pytest.mark.parametrize("wrong", ["other order", "bilinear"])
def test_runs_made_by_wrong_answers_are_wrong(yolos, wrong):
    record, table, tables = yolos

    def mid_of(grid):
        if wrong == "other order":
            return np.asarray(record.mid_tables(tables, grid))[::-1]
        return np.stack([GRID_VARIANTS["bilinear"].resample(t, grid, prefix_tokens=1, suffix_tokens=2,
                                                            source_grid=record.grid) for t in tables])

    run = run_of(record, table, tables, mid_of)
    assert compare_grid(record, run, run.sites).status == "wrong"


def test_a_run_without_the_mid_output_is_not_reached(yolos):
    record, table, tables = yolos
    run = run_of(record, table, tables, None)
    assert compare_grid(record, run, run.sites).status == "not reached"
