"""The record of a catalogued mistake of an encoding kind and the one rule that names it from an output.

A kind's mistakes module (:mod:`refpos.encodings.sincos2d_mistakes`, :mod:`refpos.encodings.fourier_mistakes`,
:mod:`refpos.encodings.sinusoid1d_mistakes`, :mod:`refpos.rope.vision_mistakes`) lists :class:`KindMistake`
records: a name, one line saying what was done wrong, and a function computing the wrong output from the same inputs
as the reference, with the kind's bound for that output (``None`` where the mistake cannot happen for those inputs:
an offset left out of a variant without one). :func:`identify_output` names the first mistake whose output a
candidate matches within its bound, after checking that the candidate is not already within the reference's bound
(a correct port is never named).

It sits in the base layer, beside :mod:`refpos.pairs`, so that the mistakes modules of :mod:`refpos.encodings` and
of :mod:`refpos.rope` (siblings, neither importing the other) share it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.backend import to_numpy


@dataclass(frozen=True)
class KindMistake:
    """One catalogued mistake: ``compute(inputs)`` is ``(wrong output, its bound)``, or ``None`` where it cannot
    occur."""

    name: str
    description: str
    compute: Callable[[Any], tuple[np.ndarray, np.ndarray] | None]


def as_float64(values: Any) -> np.ndarray:
    """Any backend's array as a NumPy float64 array (what outputs are compared in)."""
    return np.asarray(to_numpy(values), dtype=np.float64)


def within(candidate: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> bool:
    """Whether ``candidate`` has ``expected``'s shape and lies within ``bound`` (broadcast) of it everywhere."""
    if candidate.shape != expected.shape:
        return False
    return bool(np.all(np.abs(candidate - expected) <= bound))


def identify_output(candidate: Any, reference: tuple[np.ndarray, np.ndarray], mistakes: Sequence[KindMistake],
                    inputs: Any) -> str | None:
    """The name of the first mistake whose output ``candidate`` matches, or ``None``.

    ``reference`` is ``(output, bound)``. ``None`` for a candidate within the bound of the reference (a correct
    port, checked first) and for an output no catalogued mistake explains. A mistake's output is matched within the
    kind's bound of that output: the same computation with one step changed admits the same rounding.
    """
    got = as_float64(candidate)
    if within(got, *reference):
        return None
    for mistake in mistakes:
        wrong = mistake.compute(inputs)
        if wrong is not None and within(got, as_float64(wrong[0]), wrong[1]):
            return mistake.name
    return None
