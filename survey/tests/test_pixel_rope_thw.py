"""MiniMax-M3-VL's 3-D vision RoPE in the ``vision_rope`` comparison (survey/pixel_kinds/vision_rope.py), on hand-made
runs (no torch): refpos's rotation in float32 at the (t, h, w) of frames of merge blocks is exact with every wrong
answer told apart; runs made by the wrong answers, and wrong claims, are graded wrong (V-JEPA 2's form:
test_pixel_rope_vjepa2.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refpos.rope.vision import VisionRope
from refpos.rope.vision3d import VisionRope3D, apply_vision3d_rope, axial_part, thw_patch_positions
from survey.pixel_kinds import compare_vision_rope
from survey.pixel_kinds.vision_rope_thw import thw_mutants, thw_rotation
from survey.pixels import PixelRun, Site
from survey.probe import Applied
from survey.tests.test_pixel_rope import Claim

GRIDS = {"native": [1, 4, 4], "resampled": [2, 4, 6]}  # the survey's grids (a clip of 2 frames resampled)
ONE_FRAME = {"native": [1, 4, 4], "resampled": [1, 4, 6]}


def thw_run(rotate, seed: int = 3, grids=None) -> PixelRun:
    """A flattened-patch tower whose rotary apply function computed ``rotate(x, positions)`` in float32."""
    grids = GRIDS if grids is None else grids
    rng = np.random.default_rng(seed)
    applied = {}
    for size, grid in grids.items():
        positions = thw_patch_positions([grid], spatial_merge_size=2)
        before = [rng.standard_normal((len(positions), 20)) for _ in range(2)]
        after = [np.asarray(rotate(x.astype(np.float32), positions)).astype(np.float64) for x in before]
        applied[size] = [Applied("modeling_minimax_m3_vl.apply_rotary_pos_emb_vision", before, after, None)]
    site = Site("rotary_pos_emb", "", True, {"rotary_pos_emb.inv_freq": np.ones(3, dtype=np.float32)})
    return PixelRun("MiniMaxM3VLVisionModel", "hidden_states", {size: [int(np.prod(g)), 1176] for size, g in
                                                                 grids.items()}, [site], ["VisionAttention"],
                    applied=applied, grids=grids, merge=2)


ROPE = VisionRope3D("minimax_m3_vl", 20, 10000.0)
AXIAL = axial_part(ROPE)  # 18 channels rotated: sections (3, 3, 3), the frame's first
#: the wrong answers on the frame axis, each as a rotation of ``x`` at positions ``p`` (t, h, w)
FRAME_WRONG = {
    "frame index ignored (every patch at frame 0)": lambda x, p: thw_rotation(x, p * [0, 1, 1], AXIAL),
    "frame and row swapped": lambda x, p: thw_rotation(x, p[:, [1, 0, 2]], AXIAL),
    "frame index doubled": lambda x, p: thw_rotation(x, p * [2, 1, 1], AXIAL),
    "frame block at θ = 1e+06": lambda x, p: thw_rotation(x, p, AXIAL, frame_theta=1e6),
    "frame block one pair wider": lambda x, p: thw_rotation(x, p, VisionRope("axial", 18, 10000.0, (4, 2, 3))),
    "frame block one pair narrower": lambda x, p: thw_rotation(x, p, VisionRope("axial", 18, 10000.0, (2, 4, 3))),
}
#: the wrong answers that move no patch of a single frame (every one at frame 0)
FRAME_ONLY = ("frame index ignored (every patch at frame 0)", "frame index doubled", "frame block at θ = 1e+06")


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


def test_the_rotation_a_wrong_answer_is_made_by_is_refpos_rotation_where_nothing_changed():
    """:func:`thw_rotation` at the claim's rope and positions is refpos's 3-D rotation (so each wrong answer differs
    from the claim by the one thing it changes), and the frame block at the claim's own θ is the claim too."""
    x = np.random.default_rng(0).standard_normal((48, 20))
    p = thw_patch_positions([GRIDS["resampled"]], spatial_merge_size=2)
    claim = np.asarray(apply_vision3d_rope(x, p, ROPE))
    np.testing.assert_allclose(thw_rotation(x, p, AXIAL), claim, rtol=0, atol=1e-13)
    np.testing.assert_allclose(thw_rotation(x, p, AXIAL, frame_theta=10000.0), claim, rtol=0, atol=1e-13)


def test_every_frame_wrong_answer_is_a_mutant_and_none_survives_on_two_frames():
    p = thw_patch_positions([GRIDS["resampled"]], spatial_merge_size=2)
    assert set(FRAME_WRONG) <= {name for name, m in thw_mutants(ROPE, (2, 4, 6), 2, p).items() if m is not None}
    run = thw_run(lambda x, q: apply_vision3d_rope(x, q, ROPE))
    outcome = compare_vision_rope(Claim(ROPE), run, run.sites)
    assert outcome.status == "exact" and outcome.survived == []
    assert outcome.tried == 12  # 11 named (θ = 10000 is the claim's own) and no rotation


def test_on_one_frame_the_frame_only_wrong_answers_cannot_be_told_apart():
    """A single frame puts every patch at frame 0: the wrong answers on the frame axis alone are not tried there (they
    would turn the patches as the claim does), and a run made by one of them is graded exact — why the survey feeds
    a tower whose position ids carry the frame index a clip of two frames."""
    p = thw_patch_positions([ONE_FRAME["resampled"]], spatial_merge_size=2)
    mutants = thw_mutants(ROPE, (1, 4, 6), 2, p)
    assert all(mutants[name] is None for name in FRAME_ONLY)
    for name in FRAME_ONLY:
        run = thw_run(FRAME_WRONG[name], grids=ONE_FRAME)
        assert compare_vision_rope(Claim(ROPE), run, run.sites).status == "exact", name


@pytest.mark.parametrize("name", sorted(FRAME_WRONG))
def test_a_run_made_by_a_frame_axis_wrong_answer_is_graded_wrong_on_two_frames(name):
    run = thw_run(FRAME_WRONG[name])
    outcome = compare_vision_rope(Claim(ROPE), run, run.sites)
    assert outcome.status == "wrong", (name, outcome.cause)
