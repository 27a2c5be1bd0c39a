"""The two RoPE golden cases every resolved RoPE gets, 1-D or multi-axis: its cos/sin tables and a rotated x.

:mod:`refpos.golden.cases.rope` (1-D positions ``(T,)``) and :mod:`refpos.golden.cases.mrope` (M-RoPE
ids ``(3, T)``) build them the same way; what differs is passed in: the positions as stored, the position
each token's tolerance grows with (the token's largest position), and the exact tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import refpos
from refpos.golden.cases.common import In, Param, as_xp, call, to_np
from refpos.golden.exact import certify as cert
from refpos.golden.exact.entries import tolerance_rope
from refpos.golden.files.manifest import Case, Output

ExactTables = Callable[[], tuple[list, list]]


def cos_sin_case(case_id: str, description: str, shared: dict[str, Any], positions: np.ndarray,
                 token_positions: np.ndarray, tables: tuple[np.ndarray, np.ndarray], inv_freq: np.ndarray,
                 attention_factor: float, exact_tables: ExactTables) -> Case:
    """``A·cos`` and ``A·sin`` per pair ``(T, m)``; tolerance per token from its largest position."""
    cos, sin = tables
    unit = np.full(token_positions.size, float(attention_factor))  # (T,): |A·cos| <= A
    tolerance = tolerance_rope(token_positions, inv_freq, unit)
    return Case(case_id, "rope", "rope_cos_sin", description,
                {**shared, "call": {**call("rope_cos_sin", ["cos", "sin"], In("positions"), Param("rope"),
                                           Param("seq_len")), "reduce": "pairs"}},
                {"positions": positions},
                {"cos": Output(cos, tolerance, lambda: (exact_tables()[0], float(attention_factor))),
                 "sin": Output(sin, tolerance, lambda: (exact_tables()[1], float(attention_factor)))})


def apply_case(case_id: str, description: str, shared: dict[str, Any], positions: np.ndarray,
               token_positions: np.ndarray, rope: Any, params: dict[str, Any], seq_len: int | None,
               inv_freq: np.ndarray, attention_factor: float, x_name: str, x: np.ndarray,
               exact_tables: ExactTables) -> Case:
    r"""The rotated ``x`` ``(T, D)``; its tolerance scales with the token's largest rotated pair.

    The magnitude a token's error grows with is :math:`\max(A \max_j \lVert (x_{u_j}, x_{v_j}) \rVert,
    \max |x|)` (pass-through channels keep their own size).
    """
    y = to_np(refpos.apply_rope(as_xp(x), as_xp(positions), rope, seq_len=seq_len))
    u_in, v_in, _, _ = cert.pair_index(params)
    pair_norm = np.sqrt(x[:, u_in] ** 2 + x[:, v_in] ** 2).max(axis=-1)  # (T,)
    magnitude = np.maximum(float(attention_factor) * pair_norm, np.abs(x).max(axis=-1))

    def exact_y() -> tuple[np.ndarray, np.ndarray]:
        c, s = exact_tables()
        return cert.mp_apply(x, params, c, s)

    return Case(case_id, "rope", "apply_rope", description,
                {**shared, "call": call("apply_rope", ["y"], In("x"), In("positions"), Param("rope"),
                                        Param("seq_len"))},
                {"x": x, "positions": positions},
                {"y": Output(y, tolerance_rope(token_positions, inv_freq, magnitude), exact_y)},
                shared_inputs={"x": x_name})
