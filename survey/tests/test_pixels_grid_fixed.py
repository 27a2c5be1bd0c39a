"""Tables added as they are, judged on hand-made runs (no torch): ViTPose's backbone (each patch its grid row plus the
table's first row), AST (a spectrogram's strided grid behind two rows), PVT (a table per stage, each site a
stage's embedding in a list) come out exact on refpos's own rows, every wrong reading of
:data:`refpos.encodings.grid_fixed.FIXED_MISTAKES` told apart, and the other fixed way graded wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from survey.pixel_kinds import compare_grid
from survey.pixel_kinds.base import embedding_site
from survey.pixels import Capture, PixelRun, Site

RNG = np.random.default_rng(11)
VITPOSE = {"model_type": "vitpose_backbone", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
           "image_size": [32, 24], "patch_size": [8, 8]}
AST = {"model_type": "audio-spectrogram-transformer", "num_hidden_layers": 2, "num_attention_heads": 2,
       "hidden_size": 8, "num_mel_bins": 40, "max_length": 64, "patch_size": 16, "frequency_stride": 6,
       "time_stride": 10}


def _site(config):
    return next(r for r in refpos.model_positions(config).layers if r.kind == "grid")


def fixed_run(record, shape, owner="embeddings", added=None):
    """A site holding a seeded table whose recorded difference is ``added`` (refpos's rows by default), float32."""
    table = RNG.standard_normal((record.table_rows, record.dim))
    rows = np.asarray(record.reference(table, record.grid)) if added is None else added(table)
    capture = Capture([rows.astype(np.float32)[None]], [np.zeros((1, *rows.shape), dtype=np.float32)])
    site = Site(f"{owner}.position_embeddings", owner, False,
                {f"{owner}.position_embeddings": table[None].astype(np.float32)}, captures={"native": capture})
    return PixelRun("Model", "pixel_values", {"native": list(shape)}, [site], attention=["Attention"])


@pytest.mark.parametrize(("config", "shape"), [(VITPOSE, (1, 3, 32, 24)), (AST, (1, 64, 40))])
def test_a_fixed_table_is_exact_and_its_wrong_readings_are_told_apart(config, shape):
    record = _site(config)
    run = fixed_run(record, shape)
    outcome = compare_grid(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried == 2 and outcome.survived == []  # transposed; first row left out or extra rows moved


def test_vitpose_claimed_as_a_plain_fixed_table_is_wrong():
    record = _site(VITPOSE)
    run = fixed_run(record, (1, 3, 32, 24))
    claim = dataclasses.replace(record, way="fixed")
    assert compare_grid(claim, run, run.sites).status == "wrong"


def test_a_model_that_leaves_the_first_row_out_is_graded_wrong():
    record = _site(VITPOSE)
    run = fixed_run(record, (1, 3, 32, 24), added=lambda table: table[1:])
    assert compare_grid(record, run, run.sites).status == "wrong"


def test_a_stage_s_embedding_in_a_list_is_an_embedding_site():
    assert embedding_site(Site("encoder.patch_embeddings.0.position_embeddings", "encoder.patch_embeddings.0",
                               False))
    assert not embedding_site(Site("encoder.layer.0.bias", "encoder.layer.0", False))
