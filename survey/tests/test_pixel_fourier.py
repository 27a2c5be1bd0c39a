"""The ``fourier`` comparison (survey/pixel_kinds/fourier.py): on a hand-made SAM run (no torch), its Fourier
module computed in float32 as transformers' ``SamPositionalEmbedding`` does, refpos's features of the prompts fed and
of the image grid are exact and every catalogued mistake told apart; a model computing a mistake, and a wrong claim,
are graded wrong; a stored run keeps its calls. On transformers' SAM (torch) the row is exact."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refpos.models.kinds.fourier import FourierLayer
from survey.pixel_kinds import COMPARISONS, compare_fourier
from survey.pixels import Capture, PixelRun, PositionCall, Site

RNG = np.random.default_rng(53)
M = 8
IMAGE = 32
GRID = 4
PATH = "shared_image_embedding.positional_embedding"
PROMPTS = {"input_points": np.array([[[[3.0, 20.0], [31.0, 0.0], [17.0, 9.0]]]]),
           "input_boxes": np.array([[[5.0, 7.0, 26.0, 30.0]]])}


def prompt_record(**changes):
    record = FourierLayer("prompt_encoder.input", 0, None, variant="sam_prompts", at="input", m=M,
                          reads=(("rows", ("points",)),))
    return dataclasses.replace(record, **changes)


def grid_record(index=0, **changes):
    record = FourierLayer("mask_decoder", index, None, variant="sam_image_grid", at="query_key", m=M,
                          reads=(("key", ("image_grid",)),))
    return dataclasses.replace(record, **changes)


def sam32(coords, gaussian, size=None):
    """transformers' ``SamPositionalEmbedding.forward`` in float32: ``c / size``, ``2c − 1``, ``@ G``, ``2π``,
    ``[sin | cos]``."""
    c = coords.astype(np.float32)
    if size is not None:
        c = c / np.float32(size)
    phases = np.float32(2 * np.pi) * ((np.float32(2) * c - np.float32(1)) @ gaussian.astype(np.float32))
    return np.concatenate([np.sin(phases), np.cos(phases)], axis=-1).astype(np.float32)


def sam_run(gaussian=None, grid_output=None, prompt_output=None) -> PixelRun:
    """SAM's calls of its Fourier module in a float32 run: the image grid's centres (the composite's own module),
    then the points and the box's corners, each shifted to the pixel centre (the prompt encoder's)."""
    gaussian = RNG.standard_normal((2, M)).astype(np.float32) if gaussian is None else gaussian
    ones = np.ones((GRID, GRID))
    centres = np.stack([ones.cumsum(1) - 0.5, ones.cumsum(0) - 0.5], axis=-1) / GRID
    points = PROMPTS["input_points"] + 0.5
    corners = PROMPTS["input_boxes"].reshape(1, 1, 2, 2) + 0.5
    make = prompt_output or (lambda p: sam32(p, gaussian, IMAGE))
    calls = [PositionCall("shared_image_embedding", centres.astype(np.float32),
                          (grid_output or (lambda c: sam32(c, gaussian)))(centres)),
             PositionCall("prompt_encoder.shared_embedding", points.astype(np.float32), make(points)),
             PositionCall("prompt_encoder.shared_embedding", corners.astype(np.float32), make(corners))]
    site = Site(PATH, "shared_image_embedding", False, {PATH: gaussian},
                captures={"native": Capture(calls=calls)})
    return PixelRun("SamModel", "pixel_values", {"native": [1, 3, IMAGE, IMAGE]}, [site], ["SamAttention"],
                    prompts={"native": dict(PROMPTS)})


def test_the_prompts_and_the_grid_are_exact_and_the_mistakes_told_apart():
    run = sam_run()
    prompts = compare_fourier(prompt_record(), run, run.sites)
    assert prompts.status == "exact", prompts.cause
    assert prompts.sites == (PATH,)
    # recentring, 2π, sin/cos swapped, interleaved, x and y swapped, the pixel centre (the square image: no swap)
    assert prompts.tried == 6 and prompts.survived == []
    for index in (0, 1):  # both decoder layers read the one grid of the one tied G
        grid = compare_fourier(grid_record(index), run, [])
        assert grid.status == "exact", grid.cause
        assert grid.tried == 7 and grid.survived == []  # the catalogue's five, the corners and the spread grid
    assert max(prompts.error, grid.error) < 1e-5  # float32's rounding, far inside β's O(1) mistakes


def test_the_comparison_is_registered():
    assert COMPARISONS["fourier"].compare is compare_fourier


@pytest.mark.parametrize("mistake", ["recentring_missing", "two_pi_missing", "sin_cos_swapped", "interleaved_layout",
                                     "xy_swapped", "pixel_centre_missing"])
def test_a_model_computing_a_catalogued_mistake_is_wrong(mistake):
    """Each mistake's own output put where the model's was: the prompts' calls, and (all but the pixel centre,
    a prompt's) the grid's."""
    from refpos.check.kinds.fourier import fourier_features, sam_prompt_features
    from survey.pixel_kinds.base import check_target

    check = check_target("fourier")
    gaussian = RNG.standard_normal((2, M)).astype(np.float32)

    def prompt_output(shifted):
        points = (shifted - 0.5).reshape(-1, 2)
        wrong = check.wrong(sam_prompt_features(points, [IMAGE, IMAGE], gaussian), mistake)
        return wrong.reshape(*shifted.shape[:-1], -1)

    run = sam_run(gaussian, prompt_output=prompt_output)
    assert compare_fourier(prompt_record(), run, run.sites).status == "wrong", mistake
    if mistake != "pixel_centre_missing":
        run = sam_run(gaussian, grid_output=lambda c: check.wrong(fourier_features(c.reshape(-1, 2), gaussian),
                                                                  mistake).reshape(GRID, GRID, -1))
        assert compare_fourier(grid_record(), run, run.sites).status == "wrong", mistake


def test_a_grid_read_at_its_corners_is_wrong():
    gaussian = RNG.standard_normal((2, M)).astype(np.float32)
    run = sam_run(gaussian, grid_output=lambda c: sam32(c - 0.5 / GRID, gaussian))
    assert compare_fourier(grid_record(), run, run.sites).status == "wrong"


@pytest.mark.parametrize("claim", [prompt_record(m=M + 1), grid_record(m=M // 2),
                                   prompt_record(variant="sam_image_grid"), grid_record(variant="sam_prompts")])
def test_a_wrong_fourier_claim_is_graded_wrong(claim):
    """Another width of ``G``; the prompt encoder claimed to encode the grid (its module is fed no grid); the
    decoder claimed to read prompts (the composite's own module is fed none)."""
    run = sam_run()
    outcome = compare_fourier(claim, run, run.sites)
    assert outcome.status == "wrong", outcome.cause


def test_each_stack_reads_its_own_untied_matrix():
    """Two matrices (SAM 2's prompt encoder holds its own): the prompts are read with the prompt encoder's, the
    grid with the composite's, each site accounted for by its record."""
    run, own = sam_run(), RNG.standard_normal((2, M)).astype(np.float32)
    site = run.sites[0]
    grid_call, *prompt_calls = site.captures["native"].calls
    path = "prompt_encoder.shared_embedding.positional_embedding"
    redone = [PositionCall(c.module, c.input, sam32(c.input, own, IMAGE)) for c in prompt_calls]
    site.captures["native"].calls = [grid_call]
    run.sites.append(Site(path, "prompt_encoder.shared_embedding", False, {path: own},
                          captures={"native": Capture(calls=redone)}))
    prompts, grid = compare_fourier(prompt_record(), run, run.sites), compare_fourier(grid_record(), run, run.sites)
    assert (prompts.status, grid.status) == ("exact", "exact"), (prompts.cause, grid.cause)
    assert (prompts.sites, grid.sites) == ((path,), (PATH,))


def test_a_run_fed_no_prompts_is_not_reached_and_no_module_wrong():
    run = sam_run()
    run.prompts = {}
    assert compare_fourier(prompt_record(), run, run.sites).status == "not reached"
    run.sites[0].captures["native"].calls = []
    assert compare_fourier(grid_record(), run, run.sites).status == "wrong"


def test_a_stored_run_keeps_its_calls_and_prompts(tmp_path):
    from survey import store

    run = sam_run()
    store.save(run, tmp_path / "sam.npz")
    back = store.load(tmp_path / "sam.npz")
    assert isinstance(back.sites[0].captures["native"].calls[0], PositionCall)
    assert compare_fourier(prompt_record(), back, back.sites).status == "exact"
    np.testing.assert_array_equal(back.prompts["native"]["input_boxes"], PROMPTS["input_boxes"])


def test_sam_is_exact(observation):
    """transformers' SAM, fed seeded points and a box: both sites' calls recorded and graded exact, every mistake
    told apart."""
    from survey.pixels import STACK
    from survey.run import judge_quietly

    seen = observation("sam")
    assert STACK in seen.stacks, seen.row.cause
    run = seen.stacks[STACK]
    assert set(run.prompts["native"]) == {"input_points", "input_boxes"}
    calls = [c.module for s in run.sites for c in s.captures["native"].calls]
    assert calls == ["shared_image_embedding", "prompt_encoder.shared_embedding", "prompt_encoder.shared_embedding"]
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert row.mutants >= 6 + 2 * 7 and not row.survived
