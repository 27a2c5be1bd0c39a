"""One ``refpos check`` target for every vision and audio kind, built from what its formula module already holds:
its contract functions, its reference with the bound a correct port stays within, and its identifier of mistakes.

A :class:`KindCheck` record says, for one encoding kind (``refpos.models.kinds``):

* ``calls``: one function per adapter-contract function the target takes, named and with the parameters of that
  contract function (``spec_tests/README.md``), returning the kind's inputs (``BiasTableInputs``,
  ``GridInputs``, …) of a call;
* ``reference``: those inputs → the reference output and its tolerance (a bound per entry, or one for all,
  derived in the kind's mistakes module for a port computing in float32: ``u = 2⁻²⁴``);
* ``identify``: ``(candidate, inputs)`` → the name of the catalogued mistake the candidate matches, ``None``
  when none does (the kind's ``identify_<kind>``);
* ``mistakes``: every name ``identify`` may answer → one line saying what the port did;
* ``wrong``: ``(inputs, name)`` → the output of that mistake from the same inputs (``None`` where the inputs cannot
  show it): what the mistake computes, for the tests and the docs;
* ``examples``: calls ``(function, arguments)`` of seeded inputs that together show every mistake;
* ``page``: the docs page that shows the target's command and mistakes, where it is not the kind's own page
  (``refpos.models.kinds.EncodingKind.doc``; ``None``: that page).

:func:`check_call` compares a candidate with the reference within the tolerance and, when it is outside, names
the mistake: as the catalogue id ``<kind>_<name>`` (the name itself when it already begins with the kind), one
entry of ``refpos/data/mistakes.toml`` each (docs/diagnosis.md#the-catalogue-vision-and-audio-kinds), or
``closest_mistake`` saying that no catalogued mistake is close. The bound is a float32 port's: a float64 port is
held to it too, and a float16 or bfloat16 output, whose storage alone is past it, is refused (exit status 2).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.check.kinds.call import case_arguments, read_call
from refpos.check.shared.arrays import Unusable, default_dtype, float_kind, host, non_finite, same_shape, summary
from refpos.check.shared.catalogue import known
from refpos.check.shared.request import Request
from refpos.golden.exact.ulp import DTYPES, MANTISSA

#: the dtypes a kind's bound holds for: those at least as precise as float32 (u ≤ 2⁻²⁴)
KIND_DTYPES = tuple(dtype for dtype in DTYPES if MANTISSA[dtype] >= MANTISSA["float32"])


@dataclass(frozen=True)
class KindCheck:
    """How ``refpos check <kind>`` checks one kind (module docstring)."""

    kind: str
    calls: tuple[Callable[..., Any], ...]
    reference: Callable[[Any], tuple[np.ndarray, Any]]
    identify: Callable[[np.ndarray, Any], str | None]
    mistakes: Mapping[str, str]
    wrong: Callable[[Any, str], np.ndarray | None]
    examples: Callable[[], list[tuple[str, dict[str, Any]]]]
    page: str | None = None

    @property
    def functions(self) -> tuple[str, ...]:
        """The contract functions the target takes."""
        return tuple(call.__name__ for call in self.calls)

    def inputs(self, function: str, arguments: Mapping[str, Any]) -> Any:
        """The kind's inputs of ``function(**arguments)``; :class:`Unusable` naming what does not fit."""
        calls = {call.__name__: call for call in self.calls}
        if function not in calls:
            raise Unusable(f"refpos check {self.kind} takes a call of {', '.join(calls)}, got {function!r}")
        try:
            inspect.signature(calls[function]).bind(**arguments)
        except TypeError as exc:
            raise Unusable(f"{function}: {exc} (its parameters: {inspect.signature(calls[function])})") from None
        try:
            return calls[function](**arguments)
        except (ValueError, TypeError) as exc:
            raise Unusable(f"{function}: {str(exc).splitlines()[0]}") from None


def mistake_output(mistakes: Any, inputs: Any, name: str) -> np.ndarray | None:
    """The output of mistake ``name`` of a tuple of :class:`~refpos.mistake_match.KindMistake` records
    (``None`` where the inputs cannot show it)."""
    wrong = next(m for m in mistakes if m.name == name).compute(inputs)
    return None if wrong is None else wrong[0]


def catalogue_id(kind: str, name: str) -> str:
    """The catalogue id of mistake ``name`` of ``kind``: ``<kind>_<name>`` (``name`` when it begins with it)."""
    return name if name.startswith(kind + "_") else f"{kind}_{name}"


def _diagnosis(check: KindCheck, candidate: np.ndarray, reference: np.ndarray | None, inputs: Any
               ) -> list[dict[str, Any]]:
    found = [] if reference is None else non_finite(candidate, reference)
    name = check.identify(candidate, inputs)
    if name is not None:
        return [*found, {"id": known(catalogue_id(check.kind, name)), "mistake": name, "evidence": (
            f"{check.mistakes[name]}: the candidate equals that computation of the same inputs within the "
            f"{check.kind} bound")}]
    return [*found, {"id": known("closest_mistake"), "closest": None, "evidence": (
        f"no catalogued mistake is close: none of the {len(check.mistakes)} mistakes of {check.kind} explains the "
        "candidate within the kind's bound (docs/diagnosis.md#the-catalogue-vision-and-audio-kinds)")}]


def _other_shape(check: KindCheck, function: str, dtype: str, cand: np.ndarray, reference: np.ndarray,
                 inputs: Any) -> dict[str, Any]:
    """A candidate of another shape than the reference: the mistake whose output has its shape and values, or
    :class:`Unusable` naming both shapes."""
    name = check.identify(cand, inputs)
    if name is None:
        same_shape(cand, reference.shape, f"the output of {function}")
    return {"target": check.kind, "function": function, "dtype": dtype, "ok": False, "max_abs_error": float("inf"),
            "max_ratio": float("inf"), "worst_index": [], "n_outside": int(reference.size),
            "shape": list(cand.shape), "reference_shape": list(reference.shape),
            "diagnosis": _diagnosis(check, cand, None, inputs)}


def check_call(check: KindCheck, function: str, arguments: Mapping[str, Any], candidate: Any, *,
               dtype: str | None = None) -> dict[str, Any]:
    """Compare ``candidate`` with the reference of ``function(**arguments)`` within the kind's tolerance and name
    the catalogued mistake when it is outside (module docstring)."""
    inputs = check.inputs(function, arguments)
    try:
        reference, tolerance = check.reference(inputs)
    except (ValueError, TypeError) as exc:
        raise Unusable(f"{function}: {str(exc).splitlines()[0]}") from None
    cand = float_kind(np.asarray(host(candidate)), "candidate")
    dtype = dtype or default_dtype(cand)
    if dtype not in KIND_DTYPES:
        raise Unusable(f"refpos check {check.kind}: the kind's bound is derived for a port computing in float32 or "
                       f"float64, not {dtype} (a {dtype} output's rounding alone is past it)")
    reference = np.asarray(reference, dtype=np.float64)
    cand = cand.astype(np.float64)
    if cand.shape != reference.shape:  # a mistake that drops or adds rows (the CLS row), or no output of the call
        return _other_shape(check, function, dtype, cand, reference, inputs)
    atol = np.broadcast_to(np.asarray(tolerance, dtype=np.float64), reference.shape)
    result = {"target": check.kind, "function": function, "dtype": dtype, **summary(cand, reference, atol),
              "diagnosis": []}
    if not result["ok"]:
        result["diagnosis"] = _diagnosis(check, cand, reference, inputs)
    return result


def run(check: KindCheck, request: Request) -> dict[str, Any]:
    """``refpos check <kind> --call CALL.json --candidate Y.npy`` (:mod:`refpos.check.kinds.call`); with
    ``--config``, the arguments the call leaves out are the layer record's and an argument contradicting the record
    is refused naming it and both values (:func:`refpos.golden.cases.model_kind_cases.layer_arguments`)."""
    function, arguments = read_call(request.need("call", "--call CALL.json"))
    if request.layer is not None:
        from refpos.golden.cases.model_kind_cases import layer_arguments

        try:
            arguments = layer_arguments(request.layer, function, arguments)
        except ValueError as exc:
            raise Unusable(f"--config: {str(exc).splitlines()[0]}") from None
    return check_call(check, function, arguments, request.candidate, dtype=request.dtype)


def golden(check: KindCheck, case: Mapping[str, Any], args: list[Any], inputs: Mapping[str, np.ndarray],
           candidate: np.ndarray, dtype: str) -> dict[str, Any]:
    """The check of a golden case of one of the kind's contract functions (its ``call`` entry's arguments)."""
    function = case["function"]
    signature = {call.__name__: call for call in check.calls}[function]
    arguments = case_arguments(case["parameters"]["call"], inputs, signature, case["parameters"])
    return check_call(check, function, arguments, candidate, dtype=dtype)


__all__ = ["KIND_DTYPES", "KindCheck", "catalogue_id", "check_call", "golden", "mistake_output", "run"]
