"""The ``vision_rope`` comparison of the towers with tokens before their patches (no torch): DINOv3 (class and
register tokens unrotated, patch centres in [−1, 1]) and MLCD (a class token turned by its learned
``class_pos_emb``, read from the run's site of that name). A run that rotates as refpos claims is exact with every
wrong answer told apart; a run made by a catalogued mistake is graded wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refpos.models.kinds.vision_rope import VisionRopeLayer
from refpos.rope.vision import VisionRope, apply_vision_rope, dinov3_patch_positions, pixtral_patch_positions
from survey.pixel_kinds import compare_vision_rope
from survey.pixels import PixelRun, Site
from survey.probe import Applied

RNG = np.random.default_rng(41)
#: image shapes fed (patch 4): a square grid and a non-square one
SHAPES = {"native": [1, 3, 16, 16], "resampled": [1, 3, 12, 20]}


def Claim(rope: VisionRope, prefix: int = 0, prefix_weight: str | None = None, stack: str = "vision",
          index: int = 0) -> VisionRopeLayer:
    """A tower's layer record with ``prefix`` tokens turned by ``prefix_weight``'s angles (None: unrotated)."""
    return VisionRopeLayer(stack, index, None, rope=rope, prefix=prefix, prefix_weight=prefix_weight)


def _run(rotate, prefix: int, sites: list[Site], head_dim: int = 16) -> PixelRun:
    """A tower whose apply function rotated ``prefix`` tokens and the patches of each size by ``rotate`` in
    float32."""
    applied = {}
    for size, shape in SHAPES.items():
        h, w = shape[2] // 4, shape[3] // 4
        before = [RNG.standard_normal((prefix + h * w, head_dim)) for _ in range(2)]
        after = [np.asarray(rotate(x.astype(np.float32), h, w)).astype(np.float64) for x in before]
        applied[size] = [Applied("modeling_x.apply_rotary_pos_emb", before, after, None)]
    return PixelRun("XModel", "pixel_values", dict(SHAPES), sites, ["XAttention"], applied=applied)


DINOV3 = VisionRope("dinov3", 16, 100.0)


def dinov3(rope: VisionRope = DINOV3, *, scale: float = 1.0, prefix_at: float = 0.0):
    def rotate(x, h, w):
        positions = dinov3_patch_positions(h, w, prefix=3) * scale
        positions[:3] = prefix_at
        return apply_vision_rope(x, positions, rope)
    return rotate


def test_dinov3_is_exact_and_every_wrong_answer_is_told_apart():
    run = _run(dinov3(), 3, [])
    outcome = compare_vision_rope(Claim(DINOV3, 3), run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 8 and outcome.survived == [], outcome.survived
    assert outcome.error < 1e-5


@pytest.mark.parametrize("rotate", [dinov3(scale=0.5), dinov3(prefix_at=-1.0), dinov3(VisionRope("dinov3", 16, 1e4))],
                         ids=["coordinates-halved", "prefix-rotated", "theta"])
def test_a_dinov3_run_made_by_a_mistake_is_graded_wrong(rotate):
    run = _run(rotate, 3, [])
    assert compare_vision_rope(Claim(DINOV3, 3), run, run.sites).status == "wrong"


MLCD = VisionRope("mlcd", 16, 10000.0)
CLASS = RNG.normal(0.0, 0.5, (1, 8)).astype(np.float32)  # the seeded class_pos_emb


def mlcd(angles: np.ndarray = CLASS, rope: VisionRope = MLCD):
    return lambda x, h, w: apply_vision_rope(x, pixtral_patch_positions(h, w), rope, prefix_angles=angles)


def test_mlcd_is_exact_the_class_angles_read_from_its_site_and_every_wrong_answer_told_apart():
    site = Site("class_pos_emb", "", False, {"class_pos_emb": CLASS})
    run = _run(mlcd(), 1, [site])
    outcome = compare_vision_rope(Claim(MLCD, 1, "class_pos_emb"), run, run.sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.sites == ("class_pos_emb",)
    assert outcome.tried >= 5 and outcome.survived == [], outcome.survived
    later = compare_vision_rope(Claim(MLCD, 1, "class_pos_emb", index=1), run, [])  # the site accounted for already
    assert later.status == "exact" and later.survived == [], later.cause
    bare = dataclasses.replace(run, sites=[])
    no_site = compare_vision_rope(Claim(MLCD, 1, "class_pos_emb"), bare, [])
    assert no_site.status == "not reached" and "class_pos_emb" in no_site.cause


@pytest.mark.parametrize("rotate", [mlcd(np.zeros((1, 8))), mlcd(CLASS[:, ::-1].copy()),
                                    mlcd(rope=VisionRope("pixtral", 16, 10000.0))],
                         ids=["class-unrotated", "class-angles-reversed", "pixtral"])
def test_an_mlcd_run_made_by_a_mistake_is_graded_wrong(rotate):
    site = Site("class_pos_emb", "", False, {"class_pos_emb": CLASS})
    run = _run(rotate, 1, [site])
    assert compare_vision_rope(Claim(MLCD, 1, "class_pos_emb"), run, run.sites).status == "wrong"
