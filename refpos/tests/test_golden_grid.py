"""The golden cases of resampling, position grids and decomposed relative positions (refpos/golden/grid_cases.py,
refpos/golden/decomposed_cases.py): they build, every output is certified within its float64 tolerance against
the exact rational evaluation, each call replays through the reference adapter, and a wrong way fails the check.
"""

from __future__ import annotations

import pytest

from refpos.golden.certify import certificate
from refpos.golden.decomposed_cases import decomposed_cases
from refpos.golden.entries import compare
from refpos.golden.grid_cases import grid_cases
from refpos.golden.manifest import case_entry
from refpos.testing import adapter

CASES = grid_cases() + decomposed_cases()


def test_case_ids_are_unique_and_every_way_has_a_case():
    from refpos.encodings.grid_variants import GRID_VARIANTS

    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert {f"grid/{name.replace('_', '-')}" for name in GRID_VARIANTS} <= set(ids)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_is_certified_and_replays_through_the_adapter(case):
    entry = case_entry(case, {})  # the manifest entry, with its certificates
    for name, output in case.outputs.items():
        certified = certificate(output.array, output.certify, output.tolerance)
        assert certified["within_float64_tolerance"], (case.id, name, certified)
        assert entry["outputs"][name]["certified"]["max_error_ulps"] == certified["max_error_ulps"]
    spec = case.parameters["call"]
    args = [case.inputs[a["input"]] if "input" in a else a["value"] for a in spec["args"]]
    got = getattr(adapter, spec["function"])(*args)
    primary = case.primary or spec["returns"][0]
    result = compare(got, case.outputs[primary].array, case.outputs[primary].tolerance, "float64")
    assert result["ok"], result


def test_a_wrong_way_fails_a_grid_case():
    case = next(c for c in CASES if c.id == "grid/bicubic")
    way = {**case.parameters["way"], "mode": "bilinear"}
    got = adapter.resample_position_table(case.inputs["table"], [4, 9], way, 1, 0)
    assert not compare(got, case.outputs["table"].array, case.outputs["table"].tolerance, "float32")["ok"]
