"""The bad inputs every adapter of the spec suite must refuse: one record per input, what is wrong with it and the
error the contract asks for.

``spec_tests/test_rope_contract.py`` draws its bad-input tests from :data:`BAD_ROPE_CONFIGS` (through the first
of ``rope_frequencies``, ``apply_rope``, ``rope_cos_sin`` the adapter provides) and :data:`BAD_POSITIONS`
(through ``apply_rope`` and ``rope_cos_sin``); docs/write-an-adapter.md lists them in a table rendered by
:func:`markdown_table` (``spec_tests/test_meta_contract.py`` fails when the two drift apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BadInput:
    """One input the contract calls bad: its test id, the value, the error it must raise and why."""

    id: str
    value: Any
    error: type[Exception]
    why: str

    def shown(self) -> str:
        """The value as the table writes it."""
        if isinstance(self.value, np.ndarray):
            return f"`np.array({self.value.tolist()!r})`"
        return f"`{self.value!r}`"


def _rope(**keys: Any) -> dict[str, Any]:
    return {"rope_type": "default", "rope_theta": 1e4, "head_dim": 8, **keys}


#: rope dicts the contract does not define: ``ValueError`` before anything is rotated
BAD_ROPE_CONFIGS: tuple[BadInput, ...] = (
    BadInput("rotary_dim=5", _rope(rotary_dim=5), ValueError, "an odd rotated width: pairs need an even one"),
    BadInput("rope_type=ntk-by-parts", _rope(rope_type="ntk-by-parts"), ValueError,
             "a rope_type no rule of the contract has"),
    BadInput("yarn-original_max_position_embeddings=missing", _rope(rope_type="yarn", factor=4.0), ValueError,
             "YaRN without the pre-training length L0 it scales from (no default is assumed)"),
    BadInput("longrope-original_max_position_embeddings=missing",
             _rope(rope_type="longrope", factor=4.0, short_factor=[1.0] * 4, long_factor=[1.0] * 4), ValueError,
             "LongRoPE without L0, which picks the short or the long factors"),
    BadInput("linear-factor=0.5", _rope(rope_type="linear", factor=0.5), ValueError,
             "a scaling factor below 1"),
    BadInput("longrope-short_factor=3-of-4-pairs",
             _rope(rope_type="longrope", factor=4.0, original_max_position_embeddings=64, short_factor=[1.0] * 3,
                   long_factor=[1.0] * 4), ValueError, "a factor list of another length than the d/2 pairs"),
    BadInput("yarn-beta_fast<beta_slow",
             _rope(rope_type="yarn", factor=4.0, original_max_position_embeddings=64, beta_fast=1.0, beta_slow=32.0),
             ValueError, "YaRN's ramp reversed: beta_fast must exceed beta_slow"),
    BadInput("llama3-low_freq_factor>high_freq_factor",
             _rope(rope_type="llama3", factor=8.0, original_max_position_embeddings=64, low_freq_factor=4.0,
                   high_freq_factor=1.0), ValueError, "llama3's bands reversed: low_freq_factor must not exceed "
                                                      "high_freq_factor"),
    BadInput("rope_theta=0", _rope(rope_theta=0.0), ValueError, "a base θ that is not positive"),
    BadInput("layout=neox", _rope(layout="neox"), ValueError,
             "a layout name the contract does not define (half, interleaved, deinterleaved)"),
)

#: positions the contract does not define: through ``apply_rope`` and ``rope_cos_sin``
BAD_POSITIONS: tuple[BadInput, ...] = (
    BadInput("positions=[0,-1]", np.array([0, -1]), ValueError,
             "a negative position (unless INFO['negative_positions'] = 'rotate')"),
    BadInput("positions=[0.0,1.0]", np.array([0.0, 1.0]), TypeError, "float positions, even whole ones"),
    BadInput("positions=[0.5,1.5]", np.array([0.5, 1.5]), TypeError, "float positions"),
)


def markdown_table() -> str:
    """The bad inputs as the table of docs/write-an-adapter.md."""
    rows = ["| input | value | raises | why it is bad |", "|---|---|---|---|"]
    for record in (*BAD_ROPE_CONFIGS, *BAD_POSITIONS):
        where = "rope dict" if isinstance(record.value, dict) else "positions"
        rows.append(f"| {where} `{record.id}` | {record.shown()} | `{record.error.__name__}` | {record.why} |")
    return "\n".join(rows)
