"""Hypothesis strategies for relative position bias tables of windows (``window_bias`` of the adapter contract,
docs/bias-table.md): a form, a window and the arrays that form reads, as NumPy float64.

>>> from hypothesis import find
>>> from refpos.testing.strategies_bias_table import window_bias_cases
>>> case = find(window_bias_cases(forms=("beit",)), lambda c: c["window"] != c["table_window"])
>>> sorted(key for key, value in case.items() if value is not None)
['form', 'table', 'table_window', 'window']
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from refpos.encodings.bias_table import BIAS_FORMS as FORMS  # the forms of ``window_bias``

__all__ = ["FORMS", "window_bias_cases", "windows"]


def windows(max_side: int = 7, *, square: bool = False) -> st.SearchStrategy[list[int]]:
    """Windows ``[Wh, Ww]`` with sides 1 … ``max_side`` (both equal when ``square``)."""
    side = st.integers(1, max_side)
    return side.map(lambda s: [s, s]) if square else st.lists(side, min_size=2, max_size=2)


@st.composite
def window_bias_cases(draw: Any, forms: tuple[str, ...] = FORMS, max_side: int = 7, max_heads: int = 3,
                      max_hidden: int = 16) -> dict[str, Any]:
    """The keyword arguments of one ``window_bias`` call: ``form``, ``window`` and, by form, ``table`` (Swin:
    ``((2Wh − 1)(2Ww − 1), H)``; BEiT: a square ``table_window``'s rows plus three), ``w1`` ``(2, n)``, ``b1``,
    ``w2`` ``(n, H)`` and ``pretrained_window`` (Swin v2: ``None`` or a square window of side ≥ 2). Every key is
    present; those the form does not read are ``None``."""
    form = draw(st.sampled_from(forms))
    window = draw(windows(max_side, square=form == "swinv2"))
    heads = draw(st.integers(1, max_heads))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    case: dict[str, Any] = {"form": form, "window": window, "table": None, "table_window": None, "w1": None,
                            "b1": None, "w2": None, "pretrained_window": None}
    if form == "swin":
        case["table"] = rng.standard_normal(((2 * window[0] - 1) * (2 * window[1] - 1), heads))
    elif form == "beit":
        side = draw(st.integers(1, max_side))
        case["table_window"] = [side, side]
        case["table"] = rng.standard_normal(((2 * side - 1) ** 2 + 3, heads))
    else:
        hidden = draw(st.integers(1, max_hidden))
        case["w1"], case["b1"] = rng.standard_normal((2, hidden)), rng.standard_normal(hidden)
        case["w2"] = rng.standard_normal((hidden, heads)) / np.sqrt(hidden)
        pretrained = draw(st.one_of(st.none(), st.integers(2, max_side + 4)))
        case["pretrained_window"] = None if pretrained is None else [pretrained, pretrained]
    return case
