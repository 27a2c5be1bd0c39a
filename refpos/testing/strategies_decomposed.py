"""Public hypothesis strategies for decomposed relative positions (the contract of ``spec_tests/README.md``).

>>> from hypothesis import given
>>> from refpos.testing import strategies_decomposed as dst
>>> @given(dst.decomposed_inputs())
... def test_my_terms(case):
...     assert case["q"].shape[-2] == case["q_size"][0] * case["q_size"][1]
>>> test_my_terms()
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from refpos.testing.strategies import seeded_normal


@st.composite
def decomposed_inputs(draw: st.DrawFn, max_side: int = 6, channels: int = 4) -> dict[str, Any]:
    """Arguments of the contract's ``add_decomposed_rel_pos``: logits, queries, two tables, the grids."""
    q_size = [draw(st.integers(1, max_side)), draw(st.integers(1, max_side))]
    k_size = [draw(st.integers(1, max_side)), draw(st.integers(1, max_side))]
    rows = [draw(st.integers(1, 2 * max_side + 3)) for _ in range(2)]
    n_q, n_k = q_size[0] * q_size[1], k_size[0] * k_size[1]
    tables = [draw(seeded_normal((n, channels))) for n in rows]
    return {"attn": draw(seeded_normal((2, n_q, n_k))), "q": draw(seeded_normal((2, n_q, channels))),
            "rel_pos_h": tables[0], "rel_pos_w": tables[1], "q_size": q_size, "k_size": k_size}
