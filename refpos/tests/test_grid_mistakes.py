"""The catalogued mistakes of position grids and of decomposed relative positions: each differs from the reference
by more than a correct float32 port may, and the identifiers name each one from its output and nothing for a
correct float32 port (refpos/golden/cases/grid_exact.py in float32 for grids; the float32 evaluation of the terms for
decomposed).
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.decomposed_mistakes import (
    DECOMPOSED_MISTAKES,
    DecomposedInputs,
    decomposed_tolerance,
    identify_decomposed,
)
from refpos.encodings.grid_mistakes import GRID_MISTAKES, UNRECOGNISED, GridInputs, grid_tolerance, identify_grid
from refpos.encodings.grid_variants import GRID_VARIANTS
from refpos.golden.cases.grid_exact import resample_table


def standard_grid_inputs(name: str) -> GridInputs:
    """An 8 × 8 table with a CLS row resampled to 5 × 11: one axis shrinks (antialias matters), one grows,
    the grid is not square (the axes matter)."""
    table = np.random.default_rng(37).standard_normal((1 + 64, 4))
    return GridInputs(table, (5, 11), GRID_VARIANTS[name], prefix_tokens=1)


GRID_CASES = [(v, m) for v in GRID_VARIANTS for m, mistake in GRID_MISTAKES.items()
              if mistake.applies(standard_grid_inputs(v))]


def test_every_grid_mistake_applies_somewhere_and_every_way_has_mistakes():
    assert {m for _, m in GRID_CASES} == set(GRID_MISTAKES)
    assert {v for v, _ in GRID_CASES} == set(GRID_VARIANTS)


@pytest.mark.parametrize(("variant", "mistake"), GRID_CASES)
def test_a_grid_mistake_differs_and_is_named(variant, mistake):
    inputs = standard_grid_inputs(variant)
    wrong = GRID_MISTAKES[mistake].compute(inputs)
    reference = inputs.resample()
    tolerance = grid_tolerance(inputs)
    assert wrong.shape != reference.shape or np.max(np.abs(wrong - reference)) > 100 * tolerance
    assert identify_grid(wrong, inputs) == mistake


@pytest.mark.parametrize("variant", list(GRID_VARIANTS))
def test_a_correct_float32_port_and_the_reference_are_named_nothing(variant):
    inputs = standard_grid_inputs(variant)
    way = {key: getattr(inputs.variant, key) for key in ("mode", "align_corners", "antialias", "scale_factor_offset",
                                                         "padding", "keep_extra", "axes", "read")}
    port = resample_table(inputs.table, inputs.grid, way, prefix_tokens=1, f=np.float32)
    assert np.max(np.abs(port - inputs.resample())) <= grid_tolerance(inputs)
    assert identify_grid(port, inputs) is None
    assert identify_grid(inputs.resample(), inputs, dtype="float64") is None


def test_an_unknown_wrong_grid_is_unrecognised():
    inputs = standard_grid_inputs("bicubic")
    assert identify_grid(inputs.resample() + 0.5, inputs) == UNRECOGNISED


def standard_decomposed_inputs(square: bool) -> DecomposedInputs:
    """A 27-row table (pretrained on 14-patch windows) read by 6 × 6 queries against 6 × 6 keys (square: the axes
    can be swapped) or 6 × 4 queries against 3 × 8 keys (the q/k ratio matters)."""
    rng = np.random.default_rng(11)
    q_size, k_size = ((6, 6), (6, 6)) if square else ((6, 4), (3, 8))
    return DecomposedInputs(rng.standard_normal((2, q_size[0] * q_size[1], 5)), rng.standard_normal((27, 5)),
                            rng.standard_normal((27, 5)), q_size, k_size)


DECOMPOSED_CASES = [(square, m) for square in (True, False) for m, mistake in DECOMPOSED_MISTAKES.items()
                    if mistake.applies(standard_decomposed_inputs(square))]


def test_every_decomposed_mistake_applies_somewhere():
    assert {m for _, m in DECOMPOSED_CASES} == set(DECOMPOSED_MISTAKES)


@pytest.mark.parametrize(("square", "mistake"), DECOMPOSED_CASES)
def test_a_decomposed_mistake_differs_and_is_named(square, mistake):
    inputs = standard_decomposed_inputs(square)
    wrong = DECOMPOSED_MISTAKES[mistake].compute(inputs)
    assert np.max(np.abs(wrong - inputs.terms())) > 100 * decomposed_tolerance(inputs)
    assert identify_decomposed(wrong, inputs) == mistake


@pytest.mark.parametrize("square", [True, False])
def test_a_correct_float32_evaluation_is_named_nothing(square):
    inputs = standard_decomposed_inputs(square)
    arrays = [a.astype(np.float32) for a in (inputs.q, inputs.rel_pos_h, inputs.rel_pos_w)]
    port = inputs.terms(*arrays).astype(np.float32)  # every array and the sums in float32
    assert identify_decomposed(port, inputs) is None
    assert identify_decomposed(inputs.terms() - 1.0, inputs) == "decomposed_unrecognised"
