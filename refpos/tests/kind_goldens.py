"""The checks every golden case of a vision or audio kind passes (used by test_sincos2d, test_fourier,
test_sinusoid1d): it replays through the reference adapter's contract function, its values are certified within the
float64 entry, a float32 copy passes the float32 entry, and a deliberately wrong output fails it."""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.golden import entries
from refpos.golden.certify import certificate
from refpos.golden.manifest import Case
from refpos.testing import adapter


def replay(case: Case) -> tuple[Any, ...]:
    """The case's call on the reference adapter (its inputs by name, its values as given)."""
    spec = case.parameters["call"]
    args = [case.inputs[a["input"]] if "input" in a else a["value"] for a in spec["args"]]
    result = getattr(adapter, spec["function"])(*args)
    return tuple(result) if len(spec["returns"]) > 1 else (result,)


def check_case(case: Case, wrong: Any) -> None:
    """``wrong(array) -> array`` makes the mistaken output that the float32 entry must reject."""
    returned = replay(case)
    for name, value in zip(case.parameters["call"]["returns"], returned, strict=True):
        out = case.outputs[name]
        assert entries.compare(value, out.array, out.tolerance, "float64")["ok"], (case.id, name)
        certified = certificate(out.array, out.certify, out.tolerance)
        assert certified["within_float64_tolerance"], (case.id, name, certified)
        as_float32 = out.array.astype(np.float32).astype(np.float64)
        assert entries.compare(as_float32, out.array, out.tolerance, "float32")["ok"], (case.id, name)
        assert not entries.compare(wrong(out.array), out.array, out.tolerance, "float32")["ok"], (case.id, name)
