"""What every library adapter checks the same way before it calls its library.

The adapter contract (spec_tests/README.md) fixes two argument rules that no library's own code
states: the ALiBi forms, and integer positions. An adapter calls these instead of repeating them.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.alibi import FORMS as ALIBI_FORMS


def alibi_form(form: str, supported: str, library: str) -> None:
    """``form`` must be a contract ALiBi form; a form the library does not build is ``NotImplementedError``
    (the suite reports a skip with the reason). Head counts are left to the library."""
    if form not in ALIBI_FORMS:
        raise ValueError(f"form must be one of {ALIBI_FORMS}, got {form!r}")
    if form != supported:
        raise NotImplementedError(f"{library} builds the {supported} ALiBi form only, not {form!r}")


def integer_positions(positions, *, reject_negative: bool) -> np.ndarray:
    """``positions`` as int64. ``reject_negative=False`` passes negative positions on to the library, so
    that what it does with them is what the suite sees (torchtune and keras-hub index from the end);
    ``True`` only where the library's kernel cannot take them at all."""
    pos = np.asarray(positions)
    if not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"positions must be integers, got {pos.dtype}")
    if reject_negative and (pos < 0).any():
        raise ValueError("positions must be >= 0")
    return pos.astype(np.int64)
