"""MiniMax-M3-VL's vision tower run by the survey (survey/pixels.py) and judged: its position ids carry the frame
index (transformers' ``include_temporal``), so it is fed a clip of two frames at the resampled size; refpos's 3-D
rotation is exact there, and each wrong answer on the frame axis — the run's query and key after replaced by that
answer's rotation of the query and key before — is graded wrong on the observation."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

import refpos
from survey import pixel_compare
from survey.pixel_inputs import CLIP_FRAMES, clip_frames, patch_grid
from survey.pixels import STACK
from survey.tests.test_pixel_rope_thw import FRAME_ONLY

TOWER = "minimax_m3_vl_vision"
#: the frame-axis wrong answers of survey.pixel_kinds.vision_rope_thw, by the name the comparison gives them
FRAME_WRONG = ("frame index ignored (every patch at frame 0)", "frame and row swapped", "frame index doubled",
               "frame block at θ = 1e+06", "frame block one pair wider", "frame block one pair narrower")


def test_a_tower_whose_position_ids_carry_the_frame_is_fed_a_clip():
    import torch

    class Tower(torch.nn.Module):
        def __init__(self, temporal: bool) -> None:
            super().__init__()
            self.include_temporal = temporal
            self.inner = torch.nn.Linear(2, 2)

    assert clip_frames(Tower(True)) == CLIP_FRAMES == 2
    assert clip_frames(Tower(False)) == 1 and clip_frames(torch.nn.Linear(2, 2)) == 1
    config = SimpleNamespace(spatial_merge_size=2)
    assert patch_grid(config, "resampled", clip_frames(Tower(True))) == (2, 4, 6)
    assert patch_grid(config, "native", clip_frames(Tower(True))) == (1, 4, 4)  # the native size stays an image


def _seen(observation):
    from survey.run import judge_quietly

    seen = observation(TOWER)
    assert STACK in seen.stacks, seen.row.cause
    return seen, judge_quietly(seen)


def test_the_tower_is_fed_two_frames_and_refpos_is_exact_with_every_wrong_answer_told_apart(observation):
    seen, row = _seen(observation)
    run = seen.stacks[STACK]
    assert run.grids["resampled"][0] == 2 and run.grids["native"][0] == 1
    assert row.status == "exact", row.cause
    assert not row.survived and row.mutants >= 12 * 2  # 11 wrong rotations and none, on every layer


def _replaced(run, made_by):
    """The run with every rotary call's query and key after replaced by ``made_by(before, grid)``."""
    applied = {size: [dataclasses.replace(call, after=[made_by(x.astype(np.float64), run.grids[size]).astype(
        np.float32) for x in call.before]) for call in calls] for size, calls in run.applied.items()}
    return dataclasses.replace(run, applied=applied)


@pytest.mark.parametrize("name", FRAME_WRONG)
def test_each_frame_wrong_answer_is_graded_wrong_on_the_observation(observation, name):
    from refpos.rope.vision3d import axial_part
    from survey.pixel_kinds.vision_rope_thw import thw_mutants, thw_rotation

    seen, _ = _seen(observation)
    run = seen.stacks[STACK]
    records = [r for r in refpos.model_positions(seen.config).layers if r.kind == "vision_rope"]
    rope = records[0].rope

    def made_by(x, grid):
        positions = records[0].patch_positions(tuple(grid), run.merge)
        mutant = thw_mutants(rope, tuple(grid), run.merge, positions)[name]
        if mutant is None:  # on one frame: the claim's own rotation (a wrong answer on the frame axis alone)
            assert name in FRAME_ONLY and grid[0] == 1
            return thw_rotation(x, positions, axial_part(rope))
        return thw_rotation(x, mutant[1], mutant[0], mutant[2])

    outcomes = pixel_compare.judge_records(records, _replaced(run, made_by))
    assert "wrong" in [o.status for o in outcomes], name
