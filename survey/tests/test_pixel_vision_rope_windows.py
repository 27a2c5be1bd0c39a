"""The ``vision_rope`` comparison of SAM 3's windowed and global layers, of Gemma 4's per-axis spans and of
EoMT-DINOv3's query layers (no torch).

A SAM 3 run whose first rotary call is a windowed layer's (its first window) and whose layers hold their position
buffers ``(w, h)`` in float32: each windowed layer is exact on the call and its buffer, the global layer on its
buffer, every wrong answer told apart; runs made by a mistake (the global scale dropped, the window's positions
swapped, Llama 4's form in Qwen2-VL's layout) are graded wrong. A Gemma 4 run (half-layout span per axis, the column
first) is exact with every other form told apart; a call recorded without its query (passed by keyword) is not
reached. A DINOv3 layer with query tokens before its class token is exact on a call of its own token count, and
not reached, by name, where the run kept only a call of a layer without them."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from refpos.models.kinds.vision_rope import VisionRopeLayer
from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    dinov3_patch_positions,
    pixtral_patch_positions,
    sam3_patch_positions,
)
from survey.pixel_kinds import compare_vision_rope
from survey.pixels import PixelRun, Site
from survey.probe import Applied

RNG = np.random.default_rng(7)
SAM3 = VisionRope("sam3", 16, 10000.0)
WINDOW, SIDE = 4, 12  # window size, the config grid's patches per side


def Claim(rope: VisionRope, index: int = 0, **fields: Any) -> VisionRopeLayer:
    """A tower's layer record: its window or fixed grid and scale, its prefix and queries (``fields``)."""
    return VisionRopeLayer("vision", index, None, rope=rope, **fields)


WINDOWED = Claim(SAM3, 0, window=WINDOW)
GLOBAL = Claim(SAM3, 1, grid=(SIDE, SIDE), scale=WINDOW / SIDE)


def _buffer(index: int, positions: np.ndarray) -> Site:
    name = f"layers.{index}.position_ids"
    return Site(name, f"layers.{index}", False, {name: positions[:, ::-1].astype(np.float32)})


def _sam3_run(rope: VisionRope = SAM3, window_at: np.ndarray | None = None, global_scale: float = WINDOW / SIDE
              ) -> PixelRun:
    """Layer 0 windowed (its first window's call kept), layer 1 global; float32 rotation and buffers."""
    window = sam3_patch_positions(WINDOW, WINDOW) if window_at is None else window_at
    sites = [_buffer(0, window), _buffer(1, sam3_patch_positions(SIDE, SIDE, global_scale))]
    before = [RNG.standard_normal((WINDOW * WINDOW, 16)) for _ in range(2)]
    after = [np.asarray(apply_vision_rope(x.astype(np.float32), window, rope)).astype(np.float64) for x in before]
    applied = {"native": [Applied("modeling_sam3.apply_rotary_pos_emb_2d", before, after, None)]}
    return PixelRun("Sam3ViTModel", "pixel_values", {"native": [1, 3, 48, 48]}, sites, ["Sam3ViTRoPEAttention"],
                    applied=applied)


def test_sam3_layers_are_exact_and_every_wrong_answer_is_told_apart():
    run = _sam3_run()
    windowed = compare_vision_rope(WINDOWED, run, run.sites)
    assert windowed.status == "exact", windowed.cause
    assert windowed.sites == ("layers.0.position_ids",)
    assert windowed.tried == 7 and windowed.survived == [], windowed.survived
    assert windowed.error < 1e-5
    overall = compare_vision_rope(GLOBAL, run, run.sites)  # judged on its buffer: no call of 144 tokens kept
    assert overall.status == "exact", overall.cause
    assert overall.tried == 3 and overall.survived == [], overall.survived


@pytest.mark.parametrize(("run", "claim"), [
    (_sam3_run(global_scale=1.0), GLOBAL),
    (_sam3_run(window_at=sam3_patch_positions(WINDOW, WINDOW)[:, ::-1].copy()), WINDOWED),
    (_sam3_run(rope=VisionRope("qwen2_vl", 16, 10000.0), window_at=pixtral_patch_positions(WINDOW, WINDOW)),
     WINDOWED),
], ids=["global-unscaled", "window-swapped", "qwen2_vl"])
def test_a_sam3_run_made_by_a_mistake_is_graded_wrong(run, claim):
    assert compare_vision_rope(claim, run, run.sites).status == "wrong"


def test_sam3_without_its_buffer_is_not_reached():
    run = dataclasses.replace(_sam3_run(), sites=[])
    outcome = compare_vision_rope(WINDOWED, run, [])
    assert outcome.status == "not reached" and "layers.0.position_ids" in outcome.cause


GEMMA4 = VisionRope("gemma4", 16, 100.0)
SHAPES = {"native": [1, 3, 16, 16], "resampled": [1, 3, 12, 20]}


def _gemma4_run(rope: VisionRope = GEMMA4, keyword: bool = False) -> PixelRun:
    applied = {}
    for size, shape in SHAPES.items():
        positions = pixtral_patch_positions(shape[2] // 4, shape[3] // 4)
        before = [RNG.standard_normal((len(positions), 16))]
        after = [np.asarray(apply_vision_rope(x.astype(np.float32), positions, rope)).astype(np.float64)
                 for x in before]
        applied[size] = [Applied("modeling_gemma4.apply_multidimensional_rope", [] if keyword else before, after,
                                 None)]
    return PixelRun("Gemma4VisionModel", "pixel_values", dict(SHAPES), [], ["Gemma4VisionAttention"],
                    applied=applied)


def test_gemma4_is_exact_and_every_other_form_is_told_apart():
    outcome = compare_vision_rope(Claim(GEMMA4), _gemma4_run(), [])
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 7 and outcome.survived == [], outcome.survived
    for form in ("llama4", "qwen2_vl", "pixtral"):
        wrong = compare_vision_rope(Claim(GEMMA4), _gemma4_run(VisionRope(form, 16, 100.0)), [])
        assert wrong.status == "wrong", form


def test_a_call_recorded_without_its_query_is_not_reached():
    outcome = compare_vision_rope(Claim(GEMMA4), _gemma4_run(keyword=True), [])
    assert outcome.status == "not reached" and "keyword" in outcome.cause


DINOV3 = VisionRope("dinov3", 16, 100.0)


def _dinov3_run(prefix: int) -> PixelRun:
    """One image of 4 × 4 patches after ``prefix`` unrotated tokens, its first call kept."""
    positions = dinov3_patch_positions(4, 4, prefix=prefix)
    before = [RNG.standard_normal((len(positions), 16)) for _ in range(2)]
    after = [np.asarray(apply_vision_rope(x.astype(np.float32), positions, DINOV3)).astype(np.float64)
             for x in before]
    applied = {"native": [Applied("modeling_x.apply_rotary_pos_emb", before, after, None)]}
    return PixelRun("XModel", "pixel_values", {"native": [1, 3, 16, 16]}, [], ["XAttention"], applied=applied)


def test_a_layer_with_query_tokens_is_compared_on_its_own_calls_alone():
    with_queries = Claim(DINOV3, 7, prefix=8, queries=5)
    outcome = compare_vision_rope(with_queries, _dinov3_run(8), [])
    assert outcome.status == "exact" and outcome.survived == [], outcome.cause
    unseen = compare_vision_rope(with_queries, _dinov3_run(3), [])
    assert unseen.status == "not reached" and "5 query tokens" in unseen.cause
    assert compare_vision_rope(Claim(DINOV3, 0, prefix=3), _dinov3_run(3), []).status == "exact"
    assert compare_vision_rope(Claim(DINOV3, 0, prefix=3), _dinov3_run(8), []).status != "exact"
