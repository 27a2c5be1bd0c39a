"""For test suites: Hypothesis strategies (:mod:`~refpos.testing.strategies`), the Hypothesis profiles
(:mod:`~refpos.testing.profiles`) and the reference adapter of the spec suite
(:mod:`~refpos.testing.adapter`).

``__all__`` is this package's public API: the three modules, each imported on first use (the strategies
and profiles need Hypothesis, from the ``test`` extra; the adapter does not).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["adapter", "profiles", "strategies"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
