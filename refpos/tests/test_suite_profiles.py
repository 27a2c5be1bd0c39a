"""The spec suite's Hypothesis profiles keep one example database per implementation (refpos/testing/profiles.py):
a failing example found for one library is replayed first on that library's next run, never on another's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from refpos.testing.profiles import database_folder, register_profiles


def _first_examples(implementation: str, fail_above: int | None) -> list[int]:
    """Run one property test with ``implementation``'s database; the examples it tried, in order."""
    tried: list[int] = []

    @settings(database=DirectoryBasedExampleDatabase(database_folder(implementation)), max_examples=50,
              derandomize=False)
    @given(st.integers(0, 10**6))
    def prop(n: int) -> None:
        tried.append(n)
        assert fail_above is None or n <= fail_above

    try:
        prop()
    except AssertionError:
        pass
    return tried


def test_each_implementation_has_its_own_database(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    found = _first_examples("lib_a", fail_above=1000)  # lib_a fails: its shrunk example is saved
    saved = found[-1]
    assert saved > 1000
    assert (tmp_path / database_folder("lib_a")).is_dir()
    again = _first_examples("lib_a", fail_above=1000)
    assert again[0] == saved  # replayed first on lib_a's next run
    other = _first_examples("lib_b", fail_above=None)
    assert other[0] != saved  # lib_b does not start from lib_a's failure (one shared folder would replay it)


def test_the_profiles_name_the_implementations_database():
    register_profiles("spec_tests.adapters.apple_mlx")
    dev = settings.get_profile("refpos.dev")
    assert isinstance(dev.database, DirectoryBasedExampleDatabase)
    assert str(dev.database.path).endswith(".hypothesis/refpos/spec_tests.adapters.apple_mlx")
    assert settings.get_profile("ci").database is None  # the deterministic profiles keep none
    register_profiles()  # back to the reference's
    assert str(settings.get_profile("refpos.dev").database.path).endswith("refpos.testing.adapter")
    assert database_folder("my adapter; rm -rf /").name.startswith("sha256-")  # not a path of the text
