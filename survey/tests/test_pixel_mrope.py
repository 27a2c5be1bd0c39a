"""The ``mrope`` comparison on hand-made runs (no torch): a talker stack run on its ``inputs_embeds`` feeds its rotary
module the same positions on the t, h and w rows; the tables are then 1-D RoPE's and compared as such, a wrong claim
graded wrong, and rows that differ left not reached by name."""

from __future__ import annotations

import dataclasses

import numpy as np

import refpos
from survey.pixel_kinds import COMPARISONS
from survey.pixels import Capture, PixelRun, Site

#: Qwen3-Omni's talker text model: the thinker's round-robin M-RoPE, its default [24, 20, 20] over 32 pairs
TALKER = {"model_type": "qwen3_omni_moe_talker_text", "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 1, "hidden_size": 256, "rope_parameters": {"rope_type": "default",
                                                                            "rope_theta": 10000.0}}


def _record():
    record = refpos.model_positions(TALKER).layers[0]
    assert record.kind == "mrope" and record.rope.mrope_section == (11, 11, 10)
    return record


def talker_run(rope, rows=None, frames=(6, 9)):
    """A run whose rotary module was fed ``rows`` (default: ``0 … T − 1`` on each of t, h, w) and returned the
    1-D tables of ``rope`` at the first row (float32)."""
    from survey.pixel_kinds.rope import tables

    site = Site("model.rotary_emb", "decoder", True)
    for size, t in zip(("native", "resampled"), frames, strict=True):
        ids = np.stack([np.arange(t)] * 3)[:, None] if rows is None else rows(t)  # (3, B=1, T)
        both = tables(rope, ids[0, 0].astype(np.float64))[0].astype(np.float32)[:, None]  # (2, B, T, r)
        site.captures[size] = Capture(module_in=ids, module_out=both)
    return PixelRun("TalkerModel", "inputs_embeds", {"native": [1, 6, 256], "resampled": [1, 9, 256]}, [],
                    attention=["Attention"], dtype="float32", rotary=[site])


def test_equal_rows_are_compared_as_1d_rope_and_each_changed_claim_is_told_apart():
    record = _record()
    outcome = COMPARISONS["mrope"].judge(record, talker_run(record.rope), [])
    assert outcome.status == "exact" and outcome.tried >= 2 and outcome.survived == [], outcome


def test_a_wrong_mrope_claim_is_graded_wrong():
    record = _record()
    for wrong in ({"theta": 500000.0}, {"layout": "interleaved"}):
        observed = talker_run(dataclasses.replace(record.rope, **wrong))
        assert COMPARISONS["mrope"].judge(record, observed, []).status == "wrong", wrong


def test_rows_that_differ_are_not_reached():
    record = _record()
    def rows(t):  # t, then rows and columns of a 2-wide grid
        return np.stack([np.arange(t), np.arange(t) // 2, np.arange(t) % 2])[:, None]

    grid = talker_run(record.rope, rows=rows)
    outcome = COMPARISONS["mrope"].judge(record, grid, [])
    assert outcome.status == "not reached" and "rows that differ" in outcome.cause, outcome
