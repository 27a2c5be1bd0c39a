"""The ``sincos2d`` comparison (survey/pixel_kinds/sincos2d.py): on a hand-made ViT-MAE run (no torch) refpos's
table and its rows (a random subset of the patches, the grid resampled bicubic at the second size) are exact and
the catalogued mistakes told apart, a wrong claim is wrong; on transformers' ViT-MAE refpos's answer is exact."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_variants import GRID_VARIANTS
from survey.pixel_kinds import compare_sincos2d
from survey.pixels import STACK, Capture, PixelRun, Site

RNG = np.random.default_rng(37)
MAE = {"model_type": "vit_mae", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 16,
       "image_size": 32, "patch_size": 8}
SHAPES = {"native": [1, 3, 32, 32], "resampled": [1, 3, 16, 48]}


def sincos(config=MAE):
    return next(r for r in refpos.model_positions(config).layers if r.kind == "sincos2d")


def mae_run(record, kept=0.5) -> PixelRun:
    """ViT-MAE's embedding: the built table is refpos's, the drawn one is added to the patches (resampled bicubic at
    the second size), the CLS row first, then a random ``kept`` share of the patches in a random order."""
    h, w = record.grid
    built = np.asarray(record.reference(height=h, width=w), dtype=np.float32)
    drawn = RNG.standard_normal(built.shape).astype(np.float32)
    captures = {}
    for size, shape in SHAPES.items():
        grid = (shape[-2] // 8, shape[-1] // 8)
        table = drawn.astype(np.float64) if grid == record.grid else np.asarray(GRID_VARIANTS["bicubic"].resample(
            drawn.astype(np.float64), grid, prefix_tokens=1, source_grid=record.grid))
        keep = 1 + RNG.permutation(table.shape[0] - 1)[:int(kept * (table.shape[0] - 1))]
        added = table[np.concatenate([[0], keep])][None].astype(np.float32)
        captures[size] = Capture([added], [np.zeros_like(added)])
    site = Site("embeddings.position_embeddings", "embeddings", False,
                {"embeddings.position_embeddings": drawn[None]},
                {"embeddings.position_embeddings": built[None]}, captures)
    return PixelRun("ViTMAEModel", "pixel_values", SHAPES, [site], ["ViTMAEAttention"], resample_flag=True)


def test_the_table_and_its_rows_are_exact_and_the_mistakes_told_apart():
    record = sincos()
    run = mae_run(record)
    outcome = compare_sincos2d(record, run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 8 and outcome.survived == []  # axes, sin/cos, CLS row, bilinear, CLS resampled …


@pytest.mark.parametrize("wrong", [{"variant": "aimv2_native"}, {"way": "bilinear"}, {"grid": (3, 5)},
                                   {"way": None}, {"features": 8}])
def test_a_wrong_sincos_claim_is_graded_wrong(wrong):
    record = sincos()
    run = mae_run(record)
    claim = dataclasses.replace(record, **wrong)
    assert compare_sincos2d(claim, run, run.sites).status == "wrong", wrong


def test_a_table_the_code_built_otherwise_is_wrong():
    record = sincos()
    run = mae_run(record)
    site = run.sites[0]
    built = site.initial["embeddings.position_embeddings"]
    half = built.shape[-1] // 2  # the h-first table, MAE's halves not exchanged
    site.initial["embeddings.position_embeddings"] = np.concatenate([built[..., half:], built[..., :half]], axis=-1)
    assert compare_sincos2d(record, run, run.sites).status == "wrong"


def test_vit_mae_is_exact(observation):
    from survey.run import judge_quietly

    seen = observation("vit_mae")
    assert STACK in seen.stacks, seen.row.cause
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert row.mutants >= 8 and not row.survived
