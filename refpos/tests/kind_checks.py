"""Checks shared by the tests of the vision and audio kinds (2-D sin–cos, Fourier features, 1-D audio sinusoids):
a correct float32 port within the kind's bound and named nothing, every catalogued mistake beyond the bound and
named, the golden cases, and the anchor record their anchor modules list.

A kind's inputs object has ``reference() -> (output, bound)``; its mistakes are
:class:`refpos.mistake_match.KindMistake` records and its identifier ``identify(candidate, inputs)``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from refpos.golden.exact import entries
from refpos.golden.exact.certify import certificate
from refpos.golden.files.manifest import Case
from refpos.mistake_match import KindMistake
from refpos.testing import adapter

#: float64's and float32's unit roundoff: an all-float64 library run is held to the float32 bound times their ratio
U64, U32 = 2.0**-53, 2.0**-24


def check_port(port: np.ndarray, inputs: Any, identify: Callable[[Any, Any], str | None]) -> None:
    """A correct float32 port lies within the bound and is named nothing."""
    reference, bound = inputs.reference()
    assert np.all(np.abs(np.asarray(port, dtype=np.float64) - reference) <= bound)
    assert identify(port, inputs) is None


def check_mistakes(inputs: Any, mistakes: Sequence[KindMistake], identify: Callable[[Any, Any], str | None], *,
                   margin: float) -> list[str]:
    """Every mistake that can occur for ``inputs`` differs from the reference by more than ``margin`` times the bound
    somewhere (or in shape) and is named from its output; the names of those that occurred."""
    reference, bound = inputs.reference()
    named = []
    for mistake in mistakes:
        wrong = mistake.compute(inputs)
        if wrong is None:
            continue
        assert wrong[0].shape != reference.shape or np.any(np.abs(wrong[0] - reference) > margin * bound), \
            mistake.name
        assert identify(wrong[0], inputs) == mistake.name
        named.append(mistake.name)
    return named


def replay(case: Case) -> tuple[Any, ...]:
    """The case's call on the reference adapter (its inputs by name, its values as given)."""
    spec = case.parameters["call"]
    args = [case.inputs[a["input"]] if "input" in a else a["value"] for a in spec["args"]]
    result = getattr(adapter, spec["function"])(*args)
    return tuple(result) if len(spec["returns"]) > 1 else (result,)


def check_case(case: Case, wrong: Any) -> None:
    """The case replays through the contract function, is certified within its float64 entry, a float32 copy passes
    its float32 entry, and ``wrong(array)`` (a mistaken output) fails it."""
    returned = replay(case)
    for name, value in zip(case.parameters["call"]["returns"], returned, strict=True):
        out = case.outputs[name]
        assert entries.compare(value, out.array, out.tolerance, "float64")["ok"], (case.id, name)
        certified = certificate(out.array, out.certify, out.tolerance)
        assert certified["within_float64_tolerance"], (case.id, name, certified)
        as_float32 = out.array.astype(np.float32).astype(np.float64)
        assert entries.compare(as_float32, out.array, out.tolerance, "float32")["ok"], (case.id, name)
        assert not entries.compare(wrong(out.array), out.array, out.tolerance, "float32")["ok"], (case.id, name)


def transformers_object(path: str) -> Any:
    """``"module.sub:Name"`` below ``transformers.models`` (anchor modules import what they compare with lazily)."""
    module, name = path.split(":")
    return getattr(importlib.import_module("transformers.models." + module), name)


@dataclass(frozen=True)
class Anchor:
    """One anchor comparison: refpos's inputs, the library's output (a tensor or array), the dtype it computed in."""

    name: str
    inputs: Any
    library: Callable[[], Any]
    dtype: str  # "float64" (every step of the library in float64) or "float32"

    def error(self) -> tuple[float, float]:
        """(largest |refpos − library|, largest ratio of the error to the bound)."""
        reference, bound = self.inputs.reference()
        bound = bound * (U64 / U32 if self.dtype == "float64" else 1.0)
        theirs = self.library()
        got = np.asarray(theirs.detach().double().numpy() if hasattr(theirs, "detach") else theirs, dtype=np.float64)
        assert got.shape == reference.shape, (got.shape, reference.shape)
        error = np.abs(got - reference)
        return float(error.max()), float((error / bound).max())


def anchor_ids(anchors: Sequence[Anchor]) -> list[str]:
    return [a.name.split(":")[0] + "-" + str(i) for i, a in enumerate(anchors)]


def call_file(directory: Path, function: str, arguments: dict[str, Any]) -> Path:
    """A ``refpos check <kind> --call`` file for ``function(**arguments)``, every array argument in a .npy file
    beside it."""
    args: dict[str, Any] = {}
    for name, value in arguments.items():
        if isinstance(value, np.ndarray):
            np.save(directory / f"{name}.npy", value)
            args[name] = {"npy": f"{name}.npy"}
        else:
            args[name] = value
    path = directory / "call.json"
    path.write_text(json.dumps({"function": function, "args": args}), encoding="utf-8")
    return path

