"""The ``sincos2d`` comparison of a table a stage after the stack adds (survey/pixel_kinds/sincos2d.py, ``at =
"output"``), on a hand-made Granite-Docling connector run (no torch): each path's table built and the rows the path
its forward took adds are exact, the catalogued mistakes told apart; a wrong claim, a table built otherwise, rows
added one off, and a path left unclaimed are wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from survey.pixel_compare import judge_records
from survey.pixel_kinds import compare_sincos2d
from survey.pixels import Capture, PixelRun, Site

RNG = np.random.default_rng(41)
DOCLING = {"model_type": "granite_docling_vision", "num_hidden_layers": 1, "num_attention_heads": 2,
           "hidden_size": 16, "image_size": 64, "patch_size": 8, "out_hidden_size": 24, "scale_factor": 4,
           "use_fine_route": True}
SHAPES = {"native": [1, 3, 64, 64]}


def paths():
    return [r for r in refpos.model_positions(DOCLING).layers if r.kind == "sincos2d"]


def connector_run(records, shift: int = 0, built_otherwise: bool = False) -> PixelRun:
    """The connector's two position modules (buffers as built), the coarse one called by the forward (its input the
    projected tokens, its output those plus the table, rows ``shift`` off), the fine one never."""
    sites = []
    for record, name in zip(records, ("coarse", "fine"), strict=True):
        h, w = record.grid
        built = np.asarray(record.reference(height=h, width=w), dtype=np.float32)
        if built_otherwise:
            built = np.asarray(dataclasses.replace(record, variant="rt_detr").reference(height=h, width=w),
                               dtype=np.float32)
        captures = {"native": Capture()}
        if name == "coarse":
            tokens = RNG.standard_normal((1, h * w, record.features))
            out = tokens + np.roll(built.astype(np.float64), shift, axis=0)[None]
            captures = {"native": Capture(module_in=tokens, module_out=out)}
        path = f"connector.{name}.pos_embed"
        sites.append(Site(path, f"connector.{name}", True, {f"{path}.pos_embed": built}, {}, captures))
    return PixelRun("GraniteDoclingVisionModel", "pixel_values", SHAPES, sites, ["GraniteDoclingVisionAttention"],
                    dtype="float64")


def test_each_path_is_exact_and_the_mistakes_told_apart():
    records = paths()
    assert [(r.at, r.shuffle, r.grid) for r in records] == [("output", 4, (2, 2)), ("output", 2, (4, 4))]
    run = connector_run(records)
    for record in records:
        outcome = compare_sincos2d(record, run, run.sites)
        assert outcome.status == "exact", outcome.cause
        assert outcome.tried >= 4 and outcome.survived == []


@pytest.mark.parametrize("wrong", [{"variant": "rt_detr"}, {"variant": "mae"}, {"grid": (4, 2)},
                                   {"features": 16}])
def test_a_wrong_claim_is_graded_wrong(wrong):
    records = paths()
    run = connector_run(records)
    outcome = compare_sincos2d(dataclasses.replace(records[0], **wrong), run, run.sites)
    assert outcome.status == "wrong", outcome


def test_a_table_built_otherwise_or_rows_added_off_are_wrong():
    records = paths()
    for run in (connector_run(records, built_otherwise=True), connector_run(records, shift=1)):
        assert compare_sincos2d(records[0], run, run.sites).status == "wrong"


def test_a_path_left_unclaimed_is_a_free_site():
    records = paths()
    run = connector_run(records)
    whole = judge_records(records, run)
    assert [o.status for o in whole] == ["exact", "exact", "exact"]
    outcomes = judge_records(records[:1], run)
    assert outcomes[-1].status == "wrong" and "connector.fine.pos_embed" in outcomes[-1].cause
