"""``refpos check bias_table``: a window's relative position bias (Swin, Swin v2, BEiT) from a call of
``window_bias``, against :mod:`refpos.encodings.bias_table` within the bound of a float32 port per table row
(:func:`refpos.encodings.bias_table_mistakes.bias_table_bound`), the mistake named by
:func:`~refpos.encodings.bias_table_mistakes.identify_bias_table` (docs/bias-table.md#mistakes-refpos-check-names).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck
from refpos.encodings.bias_table_mistakes import (
    BIAS_TABLE_MISTAKES,
    BiasTableInputs,
    bias_table_bound,
    identify_bias_table,
)


def _window(value: Any) -> tuple[int, int] | None:
    return None if value is None else tuple(value)


def _array(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=np.float64)


def window_bias(form: str, window: list[int], table: Any = None, table_window: list[int] | None = None,
                w1: Any = None, b1: Any = None, w2: Any = None, pretrained_window: list[int] | None = None
                ) -> BiasTableInputs:
    """The inputs of a ``window_bias`` call (``w1``, ``b1``, ``w2``: Swin v2's MLP)."""
    mlp = None if w1 is None and b1 is None and w2 is None else (_array(w1), _array(b1), _array(w2))
    return BiasTableInputs(form, _window(window), table=_array(table), table_window=_window(table_window), mlp=mlp,
                           pretrained_window=_window(pretrained_window))


def _wrong(inputs: BiasTableInputs, name: str) -> np.ndarray | None:
    mistake = next(m for m in BIAS_TABLE_MISTAKES if m.name == name)
    wrong = mistake.compute(inputs) if inputs.form in mistake.forms else None
    return None if wrong is None else wrong[0]


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """A Swin window, a BEiT table resampled to a non-square window, Swin v2 in a pretrained window's units."""
    rng = np.random.default_rng(37)
    return [("window_bias", {"form": "swin", "window": [4, 6], "table": rng.standard_normal((77, 3))}),
            ("window_bias", {"form": "beit", "window": [7, 6], "table": rng.standard_normal((84, 3)),
                             "table_window": [5, 5]}),
            ("window_bias", {"form": "swinv2", "window": [12, 12], "w1": rng.standard_normal((2, 64)),
                             "b1": rng.standard_normal(64), "w2": 0.2 * rng.standard_normal((64, 3)),
                             "pretrained_window": [8, 8]})]


BIAS_TABLE_CHECK = KindCheck(
    kind="bias_table", calls=(window_bias,),
    reference=lambda inputs: (inputs.reference(), bias_table_bound(inputs)),
    identify=identify_bias_table, mistakes={m.name: m.description for m in BIAS_TABLE_MISTAKES}, wrong=_wrong,
    examples=_examples)

__all__ = ["BIAS_TABLE_CHECK", "window_bias"]
