"""The grid comparison on packed towers (Qwen3-VL's kin; hand-made runs, no torch): a tower fed flat patches of one
``(t, h, w)`` grid per size adds its grid in merge-block order, once per frame. refpos's rows are graded exact, and
runs made by wrong answers — raster order, another way, the axes swapped — are graded wrong."""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.encodings.grid import packed_position_rows
from survey.pixel_kinds import compare_grid
from survey.pixels import Capture, PixelRun, Site

QWEN3_VL = {"model_type": "qwen3_vl_vision", "depth": 1, "hidden_size": 8, "num_heads": 2,
            "num_position_embeddings": 64, "spatial_merge_size": 2, "patch_size": 16}
#: the sizes' grids: a square image, and a clip of two frames of a wider one
GRIDS = {"native": [1, 4, 4], "resampled": [2, 4, 6]}


@pytest.fixture
def record():
    return refpos.model_positions(QWEN3_VL).stack("vision.input")[0]


@pytest.fixture
def table(record):
    return np.random.default_rng(46).standard_normal((record.table_rows, record.dim))


def packed_run(table, rows_of):
    """A tower run whose first layer's input gains ``rows_of(thw)`` at each size (float32, as a model's)."""
    captures = {}
    for name, thw in GRIDS.items():
        added = np.asarray(rows_of(thw), dtype=np.float32)
        captures[name] = Capture([added], [np.zeros_like(added)])
    site = Site("pos_embed", "", True, {"pos_embed.weight": table.astype(np.float32)}, captures=captures,
                at=": the first layer's input")
    shapes = {name: [t * h * w, 1536] for name, (t, h, w) in GRIDS.items()}
    return PixelRun("Qwen3VLVisionModel", "hidden_states", shapes, [site], attention=["Qwen3VLVisionAttention"],
                    grids=dict(GRIDS), merge=2)


def test_refpos_rows_are_exact_and_the_wrong_answers_told_apart(record, table):
    assert record.packed and record.merge == 2
    run = packed_run(table, lambda thw: record.tokens(table, [thw]))
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 4 and outcome.survived == []


@pytest.mark.parametrize("wrong", ["raster order", "one frame", "bicubic"])
def test_runs_made_by_wrong_answers_are_wrong(record, table, wrong):
    def rows_of(thw):
        if wrong == "raster order":
            return packed_position_rows(lambda hw: record.reference(table, hw), [thw], 1)
        if wrong == "one frame":
            return record.tokens(table, [[1, *thw[1:]]])
        return packed_position_rows(lambda hw: _bicubic(record, table, hw), [thw], 2)

    run = packed_run(table, rows_of)
    assert compare_grid(record, run, run.sites).status == "wrong"


def _bicubic(record, table, hw):
    from refpos.encodings.grid import resample_position_table

    return resample_position_table(table, hw, mode="bicubic", align_corners=True, keep_extra=False,
                                   prefix_tokens=0, source_grid=record.grid)


def test_a_run_without_its_grid_is_not_reached(record, table):
    run = packed_run(table, lambda thw: record.tokens(table, [thw]))
    run.grids.pop("native")
    assert compare_grid(record, run, run.sites).status == "not reached"


def test_a_class_row_before_each_image_is_read_from_its_weight():
    """Inkling2: each image starts with a class token carrying the weight cls_position_embedding; the comparison reads
    that weight from the run's sites (exact), says not reached without it, and a run missing the class row is wrong."""
    config = {"model_type": "inkling2_vision", "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
              "posemb_grid_size": 8, "spatial_merge_size": 2}
    record = refpos.model_positions(config).stack("vision.input")[0]
    table = np.random.default_rng(3).standard_normal((64, 8))
    class_row = np.random.default_rng(4).standard_normal(8)
    run = packed_run(table, lambda thw: record.tokens(table, [thw], class_row))
    run.sites.append(Site("cls_position_embedding", "embeddings", False,
                          {"embeddings.cls_position_embedding": class_row.astype(np.float32)}))
    assert compare_grid(record, run, run.sites[:1]).status == "exact"
    run.sites.pop()
    assert compare_grid(record, run, run.sites).status == "not reached"
    bare = packed_run(table, lambda thw: record.tokens(table, [thw], class_row)[1:])
    bare.sites.append(Site("cls_position_embedding", "embeddings", False,
                           {"embeddings.cls_position_embedding": class_row.astype(np.float32)}))
    assert compare_grid(record, bare, bare.sites[:1]).status == "wrong"
