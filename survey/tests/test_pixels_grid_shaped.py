"""A tower fed patches with its image's ``(h, w)`` (SigLIP 2's NaFlex tower; hand-made runs, no torch): the first
``h·w`` rows are the table resampled bilinear with antialias to ``(h, w)``, the padding rows after them are masked.
refpos's grid is graded exact with the wrong answers told apart (bilinear without antialias, bicubic, the axes
swapped, the padding rows counted), and runs made by those wrong answers are graded wrong."""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from survey.pixel_kinds import compare_grid
from survey.pixel_shapes import shape_grid, shaped_candidates
from survey.pixels import Capture, PixelRun, Site

SIGLIP2 = {"model_type": "siglip2_vision_model", "hidden_size": 8, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_patches": 16, "patch_size": 2}


@pytest.fixture
def siglip2():
    record = refpos.model_positions(SIGLIP2).stack("vision.input")[0]
    table = np.random.default_rng(3).standard_normal((record.table_rows, 8)).astype(np.float32).astype(np.float64)
    return record, table


def run_of(record, table, rows_of):
    """A run whose image rows are ``rows_of(h, w, padding)``, its padding rows the first image row (as transformers'
    tower adds there)."""
    captures, shapes, grids = {}, {}, {}
    for size, shape in shaped_candidates(SIGLIP2).items():
        h, w, padding = shape_grid(SIGLIP2, size)
        rows = np.asarray(rows_of(h, w, padding), np.float64)
        added = np.concatenate([rows, np.repeat(rows[:1], padding, axis=0)]).astype(np.float32)[None]
        captures[size] = Capture([added], [np.zeros_like(added)])
        shapes[size], grids[size] = list(shape[0]), [1, h, w]
    site = Site("embeddings.position_embedding", "embeddings", True,
                {"embeddings.position_embedding.weight": table.astype(np.float32)}, captures=captures)
    return PixelRun("Siglip2VisionModel", "pixel_values", shapes, [site], attention=["Siglip2Attention"],
                    grids=grids)


def test_the_sizes_fed_are_a_square_grid_and_a_padded_grid_that_is_not_square():
    assert shape_grid(SIGLIP2, "native") == (4, 4, 0)
    h, w, padding = shape_grid(SIGLIP2, "resampled")
    assert h != w and padding == w
    assert shaped_candidates(SIGLIP2)["resampled"] == [(1, h * w + padding, 3 * 2 * 2)]
    with pytest.raises(ValueError, match="size"):
        shape_grid(SIGLIP2, "other")


def test_refpos_grid_is_exact_and_the_wrong_answers_told_apart(siglip2):
    record, table = siglip2
    run = run_of(record, table, lambda h, w, p: record.reference(table, (h, w)))
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 6 and outcome.survived == []


def _swapped(record, table, h, w):
    return np.asarray(record.reference(table, (w, h))).reshape(w, h, -1).transpose(1, 0, 2).reshape(h * w, -1)


@pytest.mark.parametrize("wrong", ["spatial shapes ignored", "axes swapped", "no antialias", "bicubic"])
def test_runs_made_by_wrong_answers_are_wrong(siglip2, wrong):
    """``spatial shapes ignored``: the padding rows counted as rows of the image (the table resampled to ``(N/w,
    w)``), what a tower fed no ``(h, w)`` would read."""
    from refpos.encodings.grid_mistakes import GridInputs

    record, table = siglip2

    def rows_of(h, w, padding):
        inputs = GridInputs(table, (h, w), record.variant, source_grid=record.grid)
        return {"spatial shapes ignored": lambda: np.asarray(record.reference(table, (h + padding // w, w)))[:h * w],
                "axes swapped": lambda: _swapped(record, table, h, w),
                "no antialias": lambda: inputs.resample(antialias=False),
                "bicubic": lambda: inputs.resample(mode="bicubic")}[wrong]()

    run = run_of(record, table, rows_of)
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "wrong", outcome.cause
