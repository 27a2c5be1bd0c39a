"""Mutant: Grok's log-space YaRN blended linearly — the arithmetic mean of the kept and interpolated
frequencies (YaRN's blend) where the config asks for the geometric one (docs/extrapolation.md#yarn-log)."""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "yarn_log_linear_blend"))
