"""Repository-wide pytest hooks: with REFPOS_BACKEND=cupy and no usable GPU, every test is skipped
with the reason, instead of failing (tox env ``cupy``)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("REFPOS_BACKEND") != "cupy":
        return
    from refpos.backend import get_xp

    try:
        get_xp("cupy")
    except (ImportError, RuntimeError) as exc:
        skip = pytest.mark.skip(reason=f"REFPOS_BACKEND=cupy but CuPy cannot run here: {exc}")
        for item in items:
            item.add_marker(skip)
