"""The ``vision_rope`` comparison (survey/pixel_kinds/vision_rope.py): on a hand-made run (no torch) refpos's rotation
as float32 is exact and every wrong answer is told apart, a wrong claim is wrong; on transformers' Qwen2-VL vision
tower fed flattened patches at two grids (one non-square) refpos's answer is exact and wrong claims are wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refpos.models.kinds.vision_rope import VisionRopeLayer
from refpos.rope.vision import VisionRope, apply_vision_rope, qwen_patch_positions
from refpos.rope.vision3d import VisionRope3D
from survey import pixel_compare
from survey.pixel_kinds import compare_vision_rope
from survey.pixels import STACK, PixelRun, Site
from survey.probe import Applied

RNG = np.random.default_rng(37)
GRIDS = {"native": [1, 4, 4], "resampled": [1, 4, 6]}


def Claim(rope: VisionRope | VisionRope3D, stack: str = "vision", index: int = 0) -> VisionRopeLayer:
    """A tower's layer record rotating with ``rope`` (the kind's own: its positions are its patch_positions)."""
    return VisionRopeLayer(stack, index, None, rope=rope)


def qwen_run(rope: VisionRope) -> PixelRun:
    """A flattened-patch tower whose rotary apply function rotated as ``rope`` does (in float32)."""
    applied = {}
    for size, grid in GRIDS.items():
        positions = qwen_patch_positions([grid], spatial_merge_size=2)
        before = [RNG.standard_normal((len(positions), rope.head_dim)) for _ in range(2)]
        after = [np.asarray(apply_vision_rope(x.astype(np.float32), positions, rope)).astype(np.float64)
                 for x in before]
        applied[size] = [Applied("modeling_qwen2_vl.apply_rotary_pos_emb_vision", before, after, None)]
    site = Site("rotary_pos_emb", "", True, {"rotary_pos_emb.inv_freq": np.ones(4, dtype=np.float32)})
    return PixelRun("Qwen2VisionTransformerPretrainedModel", "hidden_states",
                    {size: [int(np.prod(g)), 1176] for size, g in GRIDS.items()}, [site], ["VisionAttention"],
                    applied=applied, grids=GRIDS, merge=2)


def test_the_claimed_rotation_is_exact_and_every_wrong_answer_is_told_apart():
    rope = VisionRope("qwen2_vl", 16, 10000.0)
    run = qwen_run(rope)
    outcome = compare_vision_rope(Claim(rope), run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.sites == ("rotary_pos_emb",)  # the frequencies' buffer is accounted for
    assert outcome.tried >= 5 and outcome.survived == []  # forms, axes, from 1, patch order, no rotation
    assert outcome.error < 1e-5


@pytest.mark.parametrize("wrong", [VisionRope("pixtral", 16, 10000.0), VisionRope("qwen2_vl", 16, 1e6),
                                   VisionRope("axial", 16, 10000.0, (4, 4), "interleaved"),
                                   VisionRope("qwen2_vl", 8, 10000.0)])
def test_a_wrong_rotation_claim_is_graded_wrong(wrong):
    run = qwen_run(VisionRope("qwen2_vl", 16, 10000.0))
    assert compare_vision_rope(Claim(wrong), run, run.sites).status == "wrong"


def test_a_run_with_no_rotary_apply_call_is_not_reached():
    run = dataclasses.replace(qwen_run(VisionRope("qwen2_vl", 16, 10000.0)), applied={})
    assert compare_vision_rope(Claim(VisionRope("qwen2_vl", 16)), run, run.sites).status == "not reached"


def test_qwen2_vl_vision_tower_is_exact_and_wrong_claims_are_wrong(observation):
    from refpos import model_positions
    from survey.run import judge_quietly

    seen = observation("qwen2_vl_vision")
    assert STACK in seen.stacks, seen.row.cause
    run = seen.stacks[STACK]
    assert run.input_name == "hidden_states" and run.grids == GRIDS
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert row.mutants >= 5 and not row.survived
    records = list(model_positions(seen.config).layers)
    rope = records[0].rope
    for wrong in (VisionRope("pixtral", rope.head_dim, rope.theta), VisionRope("qwen2_vl", rope.head_dim, 1e6)):
        claim = dataclasses.replace(records[0], rope=wrong)
        outcomes = pixel_compare.judge_records([claim, *records[1:]], run)
        assert "wrong" in [o.status for o in outcomes], wrong
