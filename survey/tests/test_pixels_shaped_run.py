"""SigLIP 2's NaFlex tower run by the survey (survey/pixel_shapes.py): fed patches, each image's ``(h, w)`` in
patches and a mask of its padding patches, at a square grid and at a padded grid that is not square, refpos's
resampled grid is exact; a run fed the ``(h, w)`` swapped (the spatial shapes not the grid recorded) is graded
wrong."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

from survey.pixels import STACK

NAME = "siglip2_vision_model"


def test_the_naflex_tower_runs_at_both_sizes_and_is_exact(observation):
    from survey.run import judge_quietly

    seen = observation(NAME)
    assert STACK in seen.stacks, seen.row.cause
    run = seen.stacks[STACK]
    assert set(run.shapes) == {"native", "resampled"}, run.skipped
    _, h, w = run.grids["resampled"]
    assert h != w and run.shapes["resampled"][1] > h * w  # not square, with padding rows
    row = judge_quietly(seen)
    assert row.status == "exact", row.cause
    assert row.mutants >= 6 and not row.survived


def test_a_run_fed_other_spatial_shapes_is_wrong(monkeypatch):
    """The tower fed ``(w, h)`` while the survey records ``(h, w)``: its table resampled to another grid is told
    apart, so the spatial shapes fed are what is compared."""
    import survey.pixel_beside as beside
    from survey import catalogue
    from survey.pixel_shapes import shaped_inputs
    from survey.run import judge_quietly, observe_quietly

    def swapped(params, grid, shape):
        return shaped_inputs(params, None if grid is None else (grid[0], grid[2], grid[1]), shape)

    monkeypatch.setattr(beside, "shaped_inputs", swapped)
    seen = observe_quietly(catalogue.find(NAME))
    assert STACK in seen.stacks, seen.row.cause
    row = judge_quietly(seen)
    assert row.status == "wrong", row.cause
