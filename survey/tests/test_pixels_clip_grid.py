"""The grid comparison on video clips (TimeSformer, ViViT; hand-made runs, no torch): the embedding's output gains
the position table's rows, and TimeSformer's time table's, laid over the clip's tokens. refpos's rows are graded
exact, and runs made by wrong answers — the time table skipped, the tokens frame by frame, bicubic for nearest,
a ViViT table read patch by patch — are graded wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_clips import frame_major_order
from survey.pixel_kinds import compare_grid
from survey.pixels import Capture, PixelRun, Site

TIMESFORMER = {"model_type": "timesformer", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
               "image_size": 16, "patch_size": 4, "num_frames": 3}
VIVIT = {"model_type": "vivit", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
         "image_size": 16, "tubelet_size": [2, 4, 4], "num_frames": 4}


def clip_run(record, table, time, rows_of, shapes):
    """A run whose embedding gains ``rows_of(name)`` from its table and, beside it, ``time_rows`` from its time table
    (float32, as a model's): each site's capture is its own part."""
    captures, timed = {}, {}
    for name in shapes:
        grid_part, time_part = rows_of(name)
        captures[name] = Capture([np.asarray(grid_part, np.float32)[None]], [np.zeros((1, *grid_part.shape),
                                                                                     np.float32)])
        timed[name] = Capture([np.asarray(time_part, np.float32)[None]], [np.zeros((1, *time_part.shape), np.float32)])
    sites = [Site("embeddings.position_embeddings", "embeddings", False,
                  {"embeddings.position_embeddings": table.astype(np.float32)[None]}, captures=captures)]
    if time is not None:
        sites.append(Site("embeddings.time_embeddings", "embeddings", False,
                          {"embeddings.time_embeddings": time.astype(np.float32)[None]}, captures=timed))
    return PixelRun("Model", "pixel_values", shapes, sites, attention=["Attention"], dtype="float32")


@pytest.fixture
def timesformer():
    record = refpos.model_positions(TIMESFORMER).stack("vision.input")[0]
    rng = np.random.default_rng(5)
    table, time = rng.standard_normal((record.table_rows, 8)), rng.standard_normal((3, 8))
    table, time = table.astype(np.float32).astype(np.float64), time.astype(np.float32).astype(np.float64)
    #: the native clip, and one of fewer rows (the grid resampled nearest)
    shapes = {"native": [1, 3, 3, 16, 16], "resampled": [1, 3, 3, 8, 16]}
    return record, table, time, shapes


def _split(record, table, time, grid, frames):
    """The rows the table adds and those the time table adds (each addition is linear in its table)."""
    return (np.asarray(record.clip_rows(table, grid, frames, np.zeros_like(time))),
            np.asarray(record.clip_rows(np.zeros_like(table), grid, frames, time)))


GRIDS = {"native": (4, 4), "resampled": (2, 4)}


def test_timesformer_rows_are_exact_and_the_wrong_answers_told_apart(timesformer):
    record, table, time, shapes = timesformer
    run = clip_run(record, table, time, lambda name: _split(record, table, time, GRIDS[name], 3), shapes)
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 5 and outcome.survived == []
    assert set(outcome.sites) == {"embeddings.position_embeddings", "embeddings.time_embeddings"}


@pytest.mark.parametrize("wrong", ["time skipped", "frame by frame", "bicubic"])
def test_timesformer_runs_made_by_wrong_answers_are_wrong(timesformer, wrong):
    record, table, time, shapes = timesformer

    def rows_of(name):
        grid_part, time_part = _split(record, table, time, GRIDS[name], 3)
        if wrong == "time skipped":
            return grid_part, np.zeros_like(time_part)
        if wrong == "frame by frame":
            order = [0, *(1 + i for i in frame_major_order(GRIDS[name][0] * GRIDS[name][1], 3))]
            return grid_part[order], time_part[order]
        return _split(dataclasses.replace(record, way="bicubic"), table, time, GRIDS[name], 3)

    run = clip_run(record, table, time, rows_of, shapes)
    assert compare_grid(record, run, run.sites).status == "wrong"


def test_timesformer_without_its_time_table_is_wrong(timesformer):
    record, table, time, shapes = timesformer
    run = clip_run(record, table, None, lambda name: _split(record, table, time, GRIDS[name], 3), shapes)
    assert compare_grid(record, run, run.sites).status == "wrong"


def test_vivit_table_as_it_is_and_read_patch_by_patch():
    record = refpos.model_positions(VIVIT).stack("vision.input")[0]
    table = np.random.default_rng(6).standard_normal((record.table_rows, 8)).astype(np.float32).astype(np.float64)
    shapes = {"native": [1, 4, 3, 16, 16]}
    run = clip_run(record, table, None, lambda name: (table, np.zeros_like(table)), shapes)
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact" and outcome.tried == 2 and outcome.survived == [], outcome
    by_patch = np.concatenate([table[:1], table[1:].reshape(2, 16, 8).transpose(1, 0, 2).reshape(-1, 8)])
    run = clip_run(record, table, None, lambda name: (by_patch, np.zeros_like(table)), shapes)
    assert compare_grid(record, run, run.sites).status == "wrong"
