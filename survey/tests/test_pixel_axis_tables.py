"""The ``axis_tables`` comparison (survey/pixel_kinds/axis_tables.py): on a hand-made Pix2Struct run (float32, no
torch) refpos's rows are exact and the catalogued mistakes told apart; a run made by a mistake is graded wrong, and
so is a claim of another variant or size; on transformers' Pix2Struct and Kosmos-2.5 towers refpos's answer is
exact."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

import refpos
from survey.pixel_inputs import PATCH_GRIDS
from survey.pixel_kinds import compare_axis_tables
from survey.pixel_kinds.axis_tables import fed_indices
from survey.pixels import STACK, Capture, PixelRun, Site

TOWER = {"model_type": "pix2struct_vision_model", "num_hidden_layers": 1, "num_attention_heads": 2,
         "hidden_size": 8, "seq_len": 16}
SHAPES = {"native": [1, 16, 770], "resampled": [1, 24, 770]}


def record():
    return refpos.model_positions(TOWER).stack("vision.input")[0]


def numbered(size: str) -> np.ndarray:
    rows, cols = PATCH_GRIDS[0 if size == "native" else 1]
    r, c = np.meshgrid(np.arange(rows) + 1, np.arange(cols) + 1, indexing="ij")
    return np.stack([r.ravel(), c.ravel()], axis=1)


def pix2struct_run(read=lambda row, col, r, c: row[r] + col[c]) -> PixelRun:
    """Pix2Struct's embedding in float32: a seeded projection plus ``read(tables, indices)`` (the model's rows, or
    a mistake's), captured as run and with each table zeroed."""
    rng = np.random.default_rng(5)
    row, col = (rng.standard_normal((16, 8)).astype(np.float32) for _ in range(2))
    captures = {"row": {}, "column": {}}
    for size in SHAPES:
        idx = numbered(size)
        projection = rng.standard_normal((1, idx.shape[0], 8)).astype(np.float32)
        out = projection + read(row, col, idx[:, 0], idx[:, 1])[None].astype(np.float32)
        zero = np.zeros_like(row)
        captures["row"][size] = Capture([out], [projection + read(zero, col, idx[:, 0], idx[:, 1])[None]])
        captures["column"][size] = Capture([out], [projection + read(row, zero, idx[:, 0], idx[:, 1])[None]])
    sites = [Site(f"embeddings.{name}_embedder", "embeddings", True, {f"embeddings.{name}_embedder.weight": table},
                  {}, captures[axis]) for name, axis, table in (("row", "row", row), ("column", "column", col))]
    return PixelRun("Pix2StructVisionModel", "flattened_patches", SHAPES, sites, ["Pix2StructVisionAttention"])


def test_the_indices_fed_are_the_grids_numbered_from_one():
    run = pix2struct_run()
    assert fed_indices(run, "resampled", 24).tolist() == numbered("resampled").tolist()
    assert fed_indices(run, "native", 15) is None


def test_the_rows_are_exact_and_the_mistakes_told_apart():
    run = pix2struct_run()
    outcome = compare_axis_tables(record(), run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried == 5 and outcome.survived == []  # swapped, −1, +1, concatenated, the column table missing
    assert outcome.error <= 4 * 2.0**-24 * 8


@pytest.mark.parametrize("read", [
    lambda row, col, r, c: row[c] + col[r],  # row and column swapped
    lambda row, col, r, c: row[r - 1] + col[c - 1],  # numbered from 0
    lambda row, col, r, c: row[r],  # the column table never added
])
def test_a_run_made_by_a_mistake_is_wrong(read):
    run = pix2struct_run(read)
    assert compare_axis_tables(record(), run, run.sites).status == "wrong"


@pytest.mark.parametrize("wrong", [{"variant": "gemma4"}, {"rows": 12}, {"dim": 4}])
def test_a_wrong_claim_is_graded_wrong(wrong):
    run = pix2struct_run()
    assert compare_axis_tables(dataclasses.replace(record(), **wrong), run, run.sites).status == "wrong", wrong


@pytest.mark.parametrize("model_type", ["pix2struct_vision_model", "kosmos_2_5_vision_model"])
def test_the_towers_are_exact(observation, model_type):
    from survey.run import judge_quietly

    seen = observation(model_type)
    assert STACK in seen.stacks, seen.row.cause
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause


def test_gemma4_s_patches_are_fed_with_their_ids_and_padding():
    """A tower taking pixel_position_ids is fed patches (1, h·w + padding, C·p²) and their (x, y) ids: whole blocks
    of its pooling kernel, the second size wider, followed by a pooled token's worth of (−1, −1) padding."""
    from types import SimpleNamespace

    from survey.pixel_inputs import candidates, id_grid, patch_ids

    config = SimpleNamespace(pooling_kernel_size=3, patch_size=16, num_channels=3)
    assert id_grid(config, "native") == (6, 6, 0) and id_grid(config, "resampled") == (6, 9, 9)
    assert candidates("pixel_values", config, ids=True) == {"native": [(1, 36, 768)], "resampled": [(1, 63, 768)]}
    ids = patch_ids(2, 3, 1)[0]
    assert ids.tolist() == [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1], [-1, -1]]  # (x, y): x the column


def test_gemma4_s_input_is_exact_and_its_padding_told_apart(observation):
    """Gemma 4's tower run with its ids: what its patch embedder's table adds is refpos's gemma4 rows (padding
    patches adding none), every catalogued mistake its inputs show told apart (the padding rules differ only at a
    patch with one id −1, which the survey does not feed: not tried)."""
    seen = observation("gemma4_vision")
    assert STACK in seen.stacks, seen.row.cause
    run = seen.stacks[STACK]
    claim = refpos.model_positions(seen.config).stack("vision.input")[0]
    outcome = compare_axis_tables(claim, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried == 6 and outcome.survived == []
    swapped = copy.deepcopy(run)  # the observation is shared: changed in a copy
    swapped.sites[0].params = {name: p[::-1].copy() for name, p in swapped.sites[0].params.items()}  # x and y tables
    assert compare_axis_tables(claim, swapped, swapped.sites).status == "wrong"
