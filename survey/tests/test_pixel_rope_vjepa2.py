"""V-JEPA 2's 3-D vision RoPE in the ``vision_rope`` comparison (survey/pixel_kinds/vision_rope_blocks.py), on
hand-made runs (no torch): each layer's three axis blocks, one call each at the frame's, the row's and the column's
coordinates of every token (the encoder's clip in order, the predictor's context and targets sorted), turned in
float32 as ``rotate_queries_or_keys`` does, are exact with every wrong answer told apart; runs made by wrong answers
are graded wrong; a stack whose calls are not one per axis is not reached, naming the count."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refpos.models.kinds.vision_rope import VisionRopeLayer
from refpos.rope.vision3d import VisionRope3D, vjepa2_patch_positions
from survey.pixel_kinds import compare_vision_rope
from survey.pixel_kinds.vision_rope_blocks import block_rotation
from survey.pixels import PixelRun
from survey.probe import Applied

ROPE = VisionRope3D("vjepa2", 24)  # d = 8: blocks of 8 channels, n = 4 frequencies
SIDE = 4
TOKENS = {"native": 2 * SIDE * SIDE, "resampled": 2 * 36}  # 2 tubelets of 4 × 4, and of 6 × 6 (split along 4)
ENCODER = VisionRopeLayer("encoder", 0, None, rope=ROPE, side=SIDE)
PREDICTOR = VisionRopeLayer("predictor", 0, None, rope=ROPE, side=SIDE)


def _ids(stack: str, n: int) -> np.ndarray:
    return np.repeat(np.arange(n), 2) if stack == "predictor" else np.arange(n)


def vjepa2_run(turn=None, side: int = SIDE, calls: int = 3, seed: int = 5) -> PixelRun:
    """The encoder's three block calls, then the predictor's, at each size, each block turned in float32 by
    ``turn(x, coordinate)`` (default V-JEPA 2's own, with the token indices split along ``side``)."""
    rng = np.random.default_rng(seed)
    turn = turn or (lambda x, p: block_rotation(x, p, ROPE))
    applied = {}
    for size, n in TOKENS.items():
        applied[size] = []
        for stack in ("encoder", "predictor"):
            positions = vjepa2_patch_positions(_ids(stack, n), side)
            for axis in range(calls):
                x = rng.standard_normal((len(positions), ROPE.axis_dim))
                y = np.asarray(turn(x.astype(np.float32), positions[:, axis])).astype(np.float32)
                applied[size].append(Applied("modeling_vjepa2.rotate_queries_or_keys", [x], [y.astype(np.float64)],
                                             None))
    return PixelRun("VJEPA2Model", "pixel_values_videos", {"native": [1, 4, 3, 64, 64],
                                                             "resampled": [1, 4, 3, 96, 96]},
                    attention=["VJEPA2RopeAttention"], applied=applied, dtype="float32")


@pytest.mark.parametrize("record", [ENCODER, PREDICTOR], ids=["encoder", "predictor"])
def test_each_block_is_exact_and_every_wrong_answer_is_told_apart(record):
    outcome = compare_vision_rope(record, vjepa2_run(), [])
    assert outcome.status == "exact", outcome.cause
    assert outcome.survived == [] and outcome.tried == (9 if record.stack == "predictor" else 8)
    assert outcome.error < 1e-5


@pytest.mark.parametrize("turn", [
    lambda x, p: block_rotation(x, p + 1, ROPE),  # from 1
    lambda x, p: x,  # no rotation
])
def test_a_run_made_by_a_wrong_answer_is_graded_wrong(turn):
    assert compare_vision_rope(ENCODER, vjepa2_run(turn), []).status == "wrong"


def test_another_side_and_blocks_in_another_order_are_graded_wrong():
    """Token indices split along 5, not crop_size // patch_size = 4; and the row's block called first."""
    assert compare_vision_rope(ENCODER, vjepa2_run(side=SIDE + 1), []).status == "wrong"
    run = vjepa2_run()
    swapped = {size: [calls[1], calls[0], *calls[2:]] for size, calls in run.applied.items()}
    assert compare_vision_rope(ENCODER, dataclasses.replace(run, applied=swapped), []).status == "wrong"


def test_a_stack_without_one_call_per_axis_is_not_reached_naming_the_count():
    outcome = compare_vision_rope(PREDICTOR, vjepa2_run(calls=2), [])
    assert outcome.status == "not reached" and "kept 2 calls of 64 tokens" in outcome.cause
    silent = dataclasses.replace(vjepa2_run(), applied={})
    assert compare_vision_rope(ENCODER, silent, []).status == "not reached"
