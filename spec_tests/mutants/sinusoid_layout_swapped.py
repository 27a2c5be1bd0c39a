"""Mutant: sinusoid layout swapped — concatenated ``[sin | cos]`` where interleaved ``(sin, cos)`` pairs
are asked, and back (docs/sinusoidal.md#where-the-anchors-differ, docs/diagnosis.md; docs/sinusoidal.md#the-math).

The Gram matrix, the shift-matrix group and the offset property still hold; the d = 4, p = 1 vectors and
``PE[0]`` pin the layout.
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit

globals().update(inherit(__name__, "sinusoid_layout_swap"))
_reference = dict(globals())
SWAP = {"interleaved": "concat", "concat": "interleaved"}


def sinusoidal(positions, dim, base=10000.0, layout="interleaved", spacing="paper"):
    return _reference["sinusoidal"](positions, dim, base=base, layout=SWAP.get(layout, layout), spacing=spacing)


def sinusoidal_shift_matrix(r, dim, base=10000.0, layout="interleaved"):
    return _reference["sinusoidal_shift_matrix"](r, dim, base=base, layout=SWAP.get(layout, layout))
