"""MiniMax-M3-VL's 3-D vision RoPE in the ``vision_rope`` comparison (survey/pixel_kinds/vision_rope.py), on hand-made
runs (no torch): refpos's rotation in float32 at the (t, h, w) of frames of merge blocks is exact with every wrong
answer told apart; runs made by the wrong answers, and wrong claims, are graded wrong (V-JEPA 2's form:
test_pixel_rope_vjepa2.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refpos.rope.vision3d import VisionRope3D, apply_vision3d_rope, thw_patch_positions
from survey.pixel_kinds import compare_vision_rope
from survey.pixels import PixelRun, Site
from survey.probe import Applied
from survey.tests.test_pixel_rope import Claim

GRIDS = {"native": [1, 4, 4], "resampled": [2, 4, 6]}


def thw_run(rotate, seed: int = 3) -> PixelRun:
    """A flattened-patch tower whose rotary apply function computed ``rotate(x, positions)`` in float32."""
    rng = np.random.default_rng(seed)
    applied = {}
    for size, grid in GRIDS.items():
        positions = thw_patch_positions([grid], spatial_merge_size=2)
        before = [rng.standard_normal((len(positions), 20)) for _ in range(2)]
        after = [np.asarray(rotate(x.astype(np.float32), positions)).astype(np.float64) for x in before]
        applied[size] = [Applied("modeling_minimax_m3_vl.apply_rotary_pos_emb_vision", before, after, None)]
    site = Site("rotary_pos_emb", "", True, {"rotary_pos_emb.inv_freq": np.ones(3, dtype=np.float32)})
    return PixelRun("MiniMaxM3VLVisionModel", "hidden_states", {size: [int(np.prod(g)), 1176] for size, g in
                                                                 GRIDS.items()}, [site], ["VisionAttention"],
                    applied=applied, grids=GRIDS, merge=2)


ROPE = VisionRope3D("minimax_m3_vl", 20, 10000.0)


def test_the_claimed_rotation_is_exact_and_every_wrong_answer_is_told_apart():
    run = thw_run(lambda x, p: apply_vision3d_rope(x, p, ROPE))
    outcome = compare_vision_rope(Claim(ROPE), run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.sites == ("rotary_pos_emb",)
    assert outcome.tried >= 6 and outcome.survived == []
    assert outcome.error < 1e-5


@pytest.mark.parametrize("made_by", [
    lambda x, p: apply_vision3d_rope(x, p[:, [0, 2, 1]], ROPE),  # row and column swapped
    lambda x, p: apply_vision3d_rope(x, p + 1, ROPE),  # from 1
    lambda x, p: apply_vision3d_rope(x, p * [2, 1, 1], ROPE),  # the frame index doubled (the 2-frame size shows it)
    lambda x, p: apply_vision3d_rope(x, p, VisionRope3D("minimax_m3_vl", 20, 1e6)),  # another θ
    lambda x, p: x,  # no rotation
])
def test_a_run_made_by_a_wrong_answer_is_graded_wrong(made_by):
    run = thw_run(made_by)
    assert compare_vision_rope(Claim(ROPE), run, run.sites).status == "wrong"


def test_a_wrong_claim_is_graded_wrong():
    run = thw_run(lambda x, p: apply_vision3d_rope(x, p, ROPE))
    assert compare_vision_rope(Claim(VisionRope3D("minimax_m3_vl", 20, 500.0)), run, run.sites).status == "wrong"


def test_no_rotary_call_is_not_reached_and_another_head_size_is_wrong():
    run = thw_run(lambda x, p: apply_vision3d_rope(x, p, ROPE))
    silent = dataclasses.replace(run, applied={})
    assert compare_vision_rope(Claim(ROPE), silent, run.sites).status == "not reached"
    outcome = compare_vision_rope(Claim(VisionRope3D("minimax_m3_vl", 24)), run, run.sites)
    assert outcome.status == "wrong" and "20 channels per head" in outcome.cause
