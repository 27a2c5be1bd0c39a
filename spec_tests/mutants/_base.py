"""What every mutant shares: the reference adapter's functions, and a way to break exactly one thing.

A mutant module starts with ``globals().update(inherit(__name__, "mistake_id"))`` — every public
function of :mod:`refpos.testing.adapter` and an ``INFO`` that names the mistake by its id in the catalogue of
known mistakes (:mod:`refpos.check.catalogue`, the ids ``refpos check`` prints) — then redefines the one
function (or the one helper, via :func:`patched`) that carries its mistake. An id that is not catalogued is
a ``KeyError`` on import.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from refpos.check.catalogue import BY_ID, known
from refpos.testing import adapter as reference


def module(name: str) -> ModuleType:
    """A refpos module by name (``refpos.attention`` is also a function in ``refpos/__init__``)."""
    return importlib.import_module(name)


def inherit(name: str, mistake: str) -> dict[str, Any]:
    """The reference adapter's public functions plus an INFO naming the mutant and its mistake (a catalogue id)."""
    entry = BY_ID[known(mistake)]
    names = {
        key: value
        for key, value in vars(reference).items()
        if not key.startswith("_") and callable(value) and getattr(value, "__module__", None) == reference.__name__
    }
    names["INFO"] = {**reference.INFO, "name": name.rsplit(".", 1)[-1], "mutant_of": "refpos.testing.adapter",
                     "mistake": entry.id, "mistake_description": entry.description}
    return names


def inherit_patched(name: str, mistake: str, *patches: tuple[ModuleType, str, Any]) -> dict[str, Any]:
    """:func:`inherit` (``mistake``: a catalogue id), with every function run while the
    ``(module, attribute, replacement)`` patches hold.

    The reference's helper carrying the mistake is replaced only for the duration of an adapter call, so
    every adapter function that reaches it (directly or not) shows the mistake, and nothing else changes.
    """
    names = inherit(name, mistake)
    for key, func in list(names.items()):
        if key != "INFO":
            names[key] = _under(func, patches)
    return names


def _under(func: Any, patches: tuple[tuple[ModuleType, str, Any], ...]) -> Any:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as stack:
            for module, attribute, replacement in patches:
                stack.enter_context(patched(module, attribute, replacement))
            return func(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def patched(module: ModuleType, attribute: str, replacement: Any) -> Iterator[None]:
    """Temporarily replace ``module.attribute`` (one helper of the reference) for one call."""
    original = getattr(module, attribute)
    setattr(module, attribute, replacement)
    try:
        yield
    finally:
        setattr(module, attribute, original)
