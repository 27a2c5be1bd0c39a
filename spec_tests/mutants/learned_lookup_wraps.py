"""Mutant: learned absolute lookup by plain indexing — negative positions wrap to the end of the table
silently (docs/learned.md#the-math: "NumPy wraps negative indices silently, so check both ends";
docs/sinusoidal.md#where-the-anchors-differ).

Caught by the bounds test: position −1 must raise ``ValueError`` naming ``positions``.
"""

from __future__ import annotations

import numpy as np

from spec_tests.mutants._base import inherit

globals().update(inherit(__name__, "learned_lookup_wraps"))


def learned_lookup(table, positions):
    return np.asarray(table, dtype=np.float64)[np.asarray(positions)]
