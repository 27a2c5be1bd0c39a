"""Hypothesis profiles of the spec suite.

* ``refpos.dev`` — fast, for editing (20 examples).
* ``ci`` — deterministic (derandomized, no example database, no deadline); loaded when ``CI`` is set,
  as Hypothesis itself does for its built-in ``ci`` profile.
* ``refpos.thorough`` — many examples, for nightly runs.
* ``refpos.portability`` — few examples, deterministic: the second backend's run inside ``tox`` (it proves that
  every code path runs on that backend; the NumPy run with ``ci`` or ``refpos.dev`` draws the examples).

``REFPOS_HYPOTHESIS_PROFILE`` picks one explicitly.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILES = ("refpos.dev", "ci", "refpos.thorough", "refpos.portability")

_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


def register_profiles() -> None:
    settings.register_profile("refpos.dev", max_examples=20, **_common)
    settings.register_profile(
        "ci", max_examples=50, derandomize=True, database=None, print_blob=True, **_common
    )
    settings.register_profile("refpos.thorough", max_examples=1000, **_common)
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


def load_profile() -> str:
    register_profiles()
    name = active_profile()
    settings.load_profile(name)
    return name
