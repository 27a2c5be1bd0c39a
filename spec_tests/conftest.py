"""Spec-suite plumbing: which implementation is under test, its INFO, hypothesis profiles.

``REFPOS_IMPL=pkg.module pytest spec_tests`` runs the suite against that adapter module (default
``refpos.adapter``). A function the adapter does not provide turns its tests into skips, with the reason
(``support.require``).
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from support import IMPL, IMPL_NAME

from refpos.hypothesis_profiles import load_profile

PROFILE = load_profile()


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = {k: v for k, v in sorted(os.environ.items()) if k.startswith("REFPOS_")}
    return [
        f"refpos spec suite: implementation {IMPL_NAME}",
        f"  INFO: {getattr(IMPL, 'INFO', '(none declared)')}",
        f"  settings: {settings or '(no REFPOS_* variables set)'}; hypothesis profile {PROFILE}",
    ]


@pytest.fixture(scope="session")
def impl() -> ModuleType:
    """The adapter module under test."""
    return IMPL
