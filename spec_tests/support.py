"""Shared helpers of the spec suite: the implementation under test and skips for what it lacks."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

IMPL_NAME = os.environ.get("REFPOS_IMPL", "refpos.adapter")


def load_impl() -> ModuleType:
    try:
        return importlib.import_module(IMPL_NAME)
    except ImportError as exc:
        raise pytest.UsageError(f"REFPOS_IMPL={IMPL_NAME!r} cannot be imported: {exc}") from exc


IMPL = load_impl()


def require(impl: ModuleType, *names: str):
    """The adapter's functions ``names``; skip the test (with the reason) if one is missing."""
    missing = [n for n in names if not callable(getattr(impl, n, None))]
    if missing:
        pytest.skip(f"{IMPL_NAME} does not provide {', '.join(missing)}")
    funcs = tuple(getattr(impl, n) for n in names)
    return funcs[0] if len(funcs) == 1 else funcs
