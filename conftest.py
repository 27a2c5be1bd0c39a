"""Repository-wide pytest hooks.

* A Python without refpos's dependencies (pytest run before ``pip install -e '.[test]'``, or from another
  environment) stops the run with one line naming the missing module and the install command, instead of a
  collection traceback in every test module.
* With REFPOS_BACKEND=cupy and no usable GPU, every test is skipped with the reason, instead of failing (tox env
  ``cupy``): the collected tests, and the modules that build arrays when they are imported (their collection
  error, which names the backend, becomes the same skip)."""

from __future__ import annotations

import functools
import os
import sys

import pytest


def _dependencies_installed() -> None:
    """Stop the run with one line if refpos cannot be imported. Called when this file loads: pytest loads it
    before the conftest files below it (spec_tests/conftest.py imports refpos at its top)."""
    try:
        import refpos  # noqa: F401  (its dependencies: pyproject.toml's [project] dependencies)
    except ModuleNotFoundError as exc:
        pytest.exit(f"refpos cannot be imported by {sys.executable}: the module {exc.name!r} is not installed; "
                    f"install refpos with its test extra into this Python first: pip install -e '.[test]'",
                    returncode=pytest.ExitCode.USAGE_ERROR)


_dependencies_installed()


@functools.cache
def cupy_unusable() -> str | None:
    """Why REFPOS_BACKEND=cupy cannot run here, or None (another backend, or CuPy with a GPU)."""
    if os.environ.get("REFPOS_BACKEND") != "cupy":
        return None
    from refpos.backend import get_xp

    try:
        get_xp("cupy")
    except (ImportError, RuntimeError) as exc:
        return f"REFPOS_BACKEND=cupy but CuPy cannot run here: {exc}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = cupy_unusable()
    if reason is not None:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    outcome = yield
    report = outcome.get_result()
    reason = cupy_unusable()
    if reason is not None and report.failed and "backend 'cupy'" in str(report.longrepr):
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), 0, f"Skipped: {reason}")
