"""The grid comparison on NaViT-style towers and on RADIO's square crop (hand-made runs, no torch): refpos's rows
graded exact, a tie read one row below (the model's float arithmetic) still exact, the catalogued mistakes of each
way told apart, and a deliberately wrong way graded wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_buckets import bucketed_position_ids
from survey.pixel_kinds import compare_grid
from survey.pixels import Capture, PixelRun, Site

IDEFICS2 = {"model_type": "idefics2_vision", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
            "image_size": 48, "patch_size": 8}
#: native 6 × 6 (every patch a tie) and 4 × 9 (ties at rows 2 and columns 3, 6)
SHAPES = ((1, 3, 48, 48), (1, 3, 32, 72))


def bucket_run(record, table, ids_of=None):
    """An embedding site whose recorded difference is the table's rows at ``ids_of(grid)`` (refpos's by default)."""
    ids_of = ids_of or (lambda grid: bucketed_position_ids(grid, record.grid))
    captures = {}
    for name, shape in zip(("native", "resampled"), SHAPES, strict=True):
        added = table[ids_of((shape[-2] // 8, shape[-1] // 8))].astype(np.float32)[None]
        captures[name] = Capture([added], [np.zeros_like(added)])
    site = Site("embeddings.position_embedding", "embeddings", True,
                {"embeddings.position_embedding.weight": table.astype(np.float32)}, captures=captures)
    return PixelRun("Idefics2VisionTransformer", "pixel_values",
                    {n: list(s) for n, s in zip(("native", "resampled"), SHAPES, strict=True)}, [site],
                    attention=["Idefics2VisionAttention"])


@pytest.fixture
def record():
    return refpos.model_positions(IDEFICS2).stack("vision.input")[0]


@pytest.fixture
def table(record):
    return np.random.default_rng(37).standard_normal((record.table_rows, record.dim))


def test_the_bucketed_rows_are_exact_and_the_mistakes_told_apart(record, table):
    assert record.way == "buckets_padded"
    run = bucket_run(record, table)
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried == 3 and outcome.survived == []  # resampled, centred, axes swapped


def test_a_tie_read_one_row_below_is_the_models_arithmetic_not_a_mistake(record, table):
    run = bucket_run(record, table, lambda grid: bucketed_position_ids(grid, record.grid, at_ties="below"))
    assert compare_grid(record, run, run.sites).status == "exact"


@pytest.mark.parametrize("way", ["bicubic_grid_only", "bilinear_align_corners", "bilinear_grid_only_float32"])
def test_a_wrong_way_is_graded_wrong(record, table, way):
    run = bucket_run(record, table)
    outcome = compare_grid(dataclasses.replace(record, way=way), run, run.sites)
    assert outcome.status == "wrong", outcome


def test_rows_two_below_are_graded_wrong(record, table):
    """Beyond the tie's row below: a reading two rows lower at a tie is no port's arithmetic."""
    def two_below(grid):
        ids = bucketed_position_ids(grid, record.grid, at_ties="below")
        return [max(0, i - 1) if i != e else i for i, e in zip(ids, bucketed_position_ids(grid, record.grid),
                                                                 strict=True)]
    run = bucket_run(record, table, two_below)
    assert compare_grid(record, run, run.sites).status == "wrong"


def test_a_forward_taking_target_sizes_is_fed_the_images_patch_grid():
    pytest.importorskip("torch", reason="the input is a torch tensor")
    from types import SimpleNamespace

    from survey.pixel_inputs import image_grid_inputs

    config = SimpleNamespace(patch_size=16)
    fed = image_grid_inputs({"pixel_values": None, "target_sizes": None}, config, (1, 3, 192, 288))
    assert fed["target_sizes"].tolist() == [[12, 18]]
    assert image_grid_inputs({"pixel_values": None}, config, (1, 3, 192, 288)) == {}


RADIO = {"model_type": "radio", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
         "max_img_size": 48, "patch_size": 8}


def test_a_square_crop_is_exact_and_a_stretched_claim_is_wrong():
    record = refpos.model_positions(RADIO).stack("vision.input")[0]
    table = np.random.default_rng(5).standard_normal((record.table_rows, record.dim))
    captures = {}
    for name, shape in zip(("native", "resampled"), SHAPES, strict=True):
        added = np.asarray(record.reference(table, (shape[-2] // 8, shape[-1] // 8)), dtype=np.float32)[None]
        captures[name] = Capture([added], [np.zeros_like(added)])
    site = Site("embeddings.position_embedding", "embeddings", False,
                {"embeddings.position_embedding": table[None].astype(np.float32)}, captures=captures)
    run = PixelRun("RadioModel", "pixel_values", {n: list(s) for n, s in zip(("native", "resampled"), SHAPES,
                                                                              strict=True)}, [site])
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact" and "grid_stretched_for_square_crop" not in outcome.survived, outcome
    assert outcome.tried >= 4 and outcome.survived == []
    stretched = dataclasses.replace(record, way="bilinear_grid_only_float32")
    assert compare_grid(stretched, run, run.sites).status == "wrong"
