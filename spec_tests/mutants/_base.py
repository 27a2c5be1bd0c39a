"""What every mutant shares: the reference adapter's functions, and a way to break exactly one thing.

A mutant module starts with ``globals().update(inherit(__name__, "what is broken"))`` — every public
function of :mod:`refpos.adapter` and an ``INFO`` that names the mistake — then redefines the one function
(or the one helper, via :func:`patched`) that carries its mistake.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from refpos import adapter as reference


def inherit(name: str, mistake: str) -> dict[str, Any]:
    """The reference adapter's public functions plus an INFO naming the mutant and its mistake."""
    names = {
        key: value
        for key, value in vars(reference).items()
        if not key.startswith("_") and callable(value) and getattr(value, "__module__", None) == reference.__name__
    }
    names["INFO"] = {**reference.INFO, "name": name.rsplit(".", 1)[-1], "mutant_of": "refpos.adapter",
                     "mistake": mistake}
    return names


@contextlib.contextmanager
def patched(module: ModuleType, attribute: str, replacement: Any) -> Iterator[None]:
    """Temporarily replace ``module.attribute`` (one helper of the reference) for one call."""
    original = getattr(module, attribute)
    setattr(module, attribute, replacement)
    try:
        yield
    finally:
        setattr(module, attribute, original)
