"""Unit tests of refpos internals run on the backend named by REFPOS_BACKEND, like the spec suite."""

from __future__ import annotations

import pytest

from refpos.backend import get_xp
from refpos.testing.profiles import load_profile

load_profile()


@pytest.fixture(scope="session")
def xp():
    """The current backend's array namespace."""
    return get_xp()
