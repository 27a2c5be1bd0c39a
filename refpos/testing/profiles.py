"""Hypothesis profiles of the spec suite.

* ``refpos.dev`` — fast, for editing (20 examples).
* ``ci`` — deterministic (derandomized, no example database, no deadline); loaded when ``CI`` is set,
  as Hypothesis itself does for its built-in ``ci`` profile.
* ``refpos.thorough`` — many examples, for nightly runs.
* ``refpos.portability`` — few examples, deterministic: the second backend's run inside ``tox`` (it proves that
  every code path runs on that backend; the NumPy run with ``ci`` or ``refpos.dev`` draws the examples).

``REFPOS_HYPOTHESIS_PROFILE`` picks one explicitly.

The profiles that keep an example database (``refpos.dev``, ``refpos.thorough``) keep one per implementation,
``.hypothesis/refpos/<implementation>/`` in the current folder (:func:`database_folder`): a failing example is
replayed first on the next run of the same implementation, never on another library's (whose failures are its
own). The deterministic profiles keep none.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

PROFILES = ("refpos.dev", "ci", "refpos.thorough", "refpos.portability")

_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


#: the implementation a database belongs to when none is named: the reference adapter
REFERENCE = "refpos.testing.adapter"


def database_folder(implementation: str) -> Path:
    """``.hypothesis/refpos/<implementation>`` (relative: the current folder's): the example database of one
    implementation (an adapter module's name; another text is named by its sha256).

    >>> database_folder("spec_tests.adapters.apple_mlx").as_posix()
    '.hypothesis/refpos/spec_tests.adapters.apple_mlx'
    """
    name = implementation if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]{0,199}", implementation) else (
        "sha256-" + hashlib.sha256(implementation.encode("utf-8")).hexdigest()[:16])
    return Path(".hypothesis") / "refpos" / name


def register_profiles(implementation: str = REFERENCE) -> None:
    """Register the profiles; those with a database keep ``implementation``'s own (:func:`database_folder`)."""
    database = DirectoryBasedExampleDatabase(database_folder(implementation))
    settings.register_profile("refpos.dev", max_examples=20, database=database, **_common)
    settings.register_profile(
        "ci", max_examples=50, derandomize=True, database=None, print_blob=True, **_common
    )
    settings.register_profile("refpos.thorough", max_examples=1000, database=database, **_common)
    settings.register_profile(
        "refpos.portability", max_examples=10, derandomize=True, database=None, print_blob=True, **_common
    )


def active_profile() -> str:
    """The profile to load: ``REFPOS_HYPOTHESIS_PROFILE``, else ``ci`` under CI, else ``refpos.dev``."""
    chosen = os.environ.get("REFPOS_HYPOTHESIS_PROFILE")
    if chosen:
        if chosen not in PROFILES:
            raise ValueError(f"REFPOS_HYPOTHESIS_PROFILE must be one of {PROFILES}, got {chosen!r}")
        return chosen
    return "ci" if os.environ.get("CI") else "refpos.dev"


def load_profile(implementation: str = REFERENCE) -> str:
    """Register the profiles for ``implementation`` and load the active one (:func:`active_profile`); its name."""
    register_profiles(implementation)
    name = active_profile()
    settings.load_profile(name)
    return name
