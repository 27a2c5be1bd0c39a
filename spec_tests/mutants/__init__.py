"""Deliberately wrong adapters: each wraps :mod:`refpos.adapter` and breaks exactly one thing.

:data:`CATALOGUE` maps each mutant module (``spec_tests.mutants.<name>``) to the mistake it makes, the
pitfalls.md section it comes from, and the spec test files expected to catch it. The meta test
(``spec_tests/test_meta.py``) runs those files on every mutant and asserts that they fail, and runs
them on :mod:`refpos.adapter` and asserts that they pass.

Run one by hand: ``REFPOS_IMPL=spec_tests.mutants.softmax_no_max python -m pytest spec_tests -x``.
"""

from __future__ import annotations

from typing import NamedTuple


class Mutant(NamedTuple):
    """One known mistake, where it is catalogued, and which spec test files must catch it."""

    mistake: str
    pitfall: str
    catches: tuple[str, ...]


#: mutant module name -> what it breaks; ``catches`` are paths relative to the repository root
CATALOGUE: dict[str, Mutant] = {
    "softmax_no_max": Mutant(
        "softmax without the max subtraction: exp overflows to NaN for logits >= 710",
        "pitfalls.md §17, encodings.md §1.6",
        ("spec_tests/test_attention.py",),
    ),
}
