"""Mutant: rope_theta not read — θ = 10000 filled in where the config says another base
(docs/diagnosis.md#default_theta; Llama-3 with θ = 500000 run with 10000)."""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "default_theta"))
