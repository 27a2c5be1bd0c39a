r"""Cross-attention without positions: the family row's ``cross_attention`` column and the records it gives.

A decoder layer of an encoder–decoder model (Dia's decoder), or a byte stack beside a patch stack (BLT's local
encoder and decoder), may attend twice: a self-attention over its own tokens, which rotates (a RoPE record of the
stack), and a cross-attention whose queries are projected from one sequence's states and whose keys and values from
another's, with no rotation and no bias from positions. refpos states that second attention as a record of its own,
at the sub-site ``<stack>.cross`` with the same index as the layer it sits in (:class:`CrossAttention`): attention
without positions (``kind`` ``"none"``), naming what its queries and keys are projected from.

The row's column (every key but ``keys`` optional)::

    cross_attention = {keys = "encoder", queries = "tokens"}                # every layer
    cross_attention = {keys = "patches", all_key = "cross_attn_all_layers", all_default = true, alone = "first"}

``keys`` / ``queries``
    what the keys (and values) and the queries are projected from (words the summary and ``describe`` show).
``every_key`` / ``every_default``
    layer ``i`` has one when ``i % n == 0``, ``n`` the config key's value (Idefics' ``cross_layer_interval``).
``all_key`` / ``all_default`` / ``alone``
    a bool config key: true, every layer has one; false, only the ``"first"`` or the ``"last"`` layer (BLT), or
    ``"none"`` (T5Gemma's ``is_decoder``: its encoder and decoder are one config class).

Examples
--------
>>> facts = read_cross("example", {"keys": "patches", "all_key": "cross_attn_all_layers", "alone": "last"})
>>> facts.layers({"cross_attn_all_layers": False}, 4), facts.layers({"cross_attn_all_layers": True}, 3)
([3], [0, 1, 2])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from refpos.models.records import LayerRecord, NoPositions

#: the suffix of a stack's cross-attention sub-site
CROSS = ".cross"
_KEYS = {"keys", "queries", "every_key", "every_default", "all_key", "all_default", "alone"}


@dataclass(frozen=True)
class CrossFacts:
    """Which layers of a stack hold a cross-attention, and what it reads (the module docstring's column)."""

    keys: str
    queries: str = "tokens"
    every_key: str | None = None
    every_default: int = 1
    all_key: str | None = None
    all_default: bool = True
    alone: str = "first"

    def layers(self, cfg: Mapping[str, Any], n: int) -> list[int]:
        """The indices (of ``n`` layers) whose layer holds a cross-attention under config ``cfg``."""
        if self.every_key is not None:
            every = cfg.get(self.every_key, self.every_default)
            if isinstance(every, bool) or not isinstance(every, int) or every < 1:
                raise ValueError(f"{self.every_key} must be an int >= 1, got {every!r}")
            return [i for i in range(n) if i % every == 0]
        if self.all_key is not None:
            every_layer = cfg.get(self.all_key, self.all_default)
            if not isinstance(every_layer, bool):
                raise TypeError(f"{self.all_key} must be a bool, got {type(every_layer).__name__} {every_layer!r}")
            if not every_layer:
                return [] if n == 0 or self.alone == "none" else [0 if self.alone == "first" else n - 1]
        return list(range(n))

    @property
    def config_keys(self) -> tuple[str, ...]:
        """The config keys the column reads."""
        return tuple(key for key in (self.every_key, self.all_key) if key)


def read_cross(where: str, table: Any) -> CrossFacts:
    """A :class:`CrossFacts` from a row's ``cross_attention`` table; a ``ValueError`` naming what is wrong."""
    if not isinstance(table, Mapping) or "keys" not in table or set(table) - _KEYS:
        raise ValueError(f"{where}: cross_attention takes keys (required), queries, every_key, every_default, "
                         f"all_key, all_default, alone; got {table!r}")
    strings = ("keys", "queries", "every_key", "all_key", "alone")
    wrong = [k for k in strings if k in table and not (isinstance(table[k], str) and table[k])]
    wrong += [k for k in ("every_default",) if k in table and (isinstance(table[k], bool) or not isinstance(
        table[k], int) or table[k] < 1)]
    wrong += [k for k in ("all_default",) if k in table and not isinstance(table[k], bool)]
    wrong += ["alone"] if table.get("alone", "first") not in ("first", "last", "none") else []
    wrong += ["every_key"] if "every_key" in table and "all_key" in table else []
    if wrong:
        raise ValueError(f"{where}: cross_attention.{wrong[0]} holds a value outside its rule set "
                         f"({table[wrong[0]]!r})")
    return CrossFacts(**dict(table))


@dataclass(frozen=True)
class CrossAttention(NoPositions):
    r"""A layer's cross-attention: queries from ``queries``' states, keys and values from ``keys``', no positions.

    Its ``stack`` is ``<stack>.cross`` and its ``index`` that of the layer it sits in; it reads no input and
    adds nothing to the logits: :math:`q = W_q h_i`, :math:`k = W_k s_j`, the same whatever positions the tokens
    have (the scores :math:`q \cdot k` are changed by no position).
    """

    keys: str = "encoder"
    queries: str = "tokens"
    kind: ClassVar[str] = "none"

    @property
    def label(self) -> str:
        return "none"

    def params(self) -> dict[str, Any]:
        return {**super().params(), "cross": True, "queries": self.queries, "keys": self.keys}


def cross_records(view: Any, family: Any, stack: str, layers: list[LayerRecord]) -> list[LayerRecord]:
    """The cross-attention records of stack ``stack`` whose layers are ``layers``, where the family's row states
    a ``cross_attention`` and the stack is its decoder (or its only stack); none otherwise.

    See Also
    --------
    CrossFacts.layers : which layers hold one.
    """
    facts = getattr(family, "cross_attention", None)
    if facts is None or stack not in ("decoder",) or not layers:
        return []
    for key in facts.config_keys:
        if key in view.raw:
            view.mark(key)
    n = max(layer.index for layer in layers) + 1
    return [CrossAttention(stack + CROSS, i, None, keys=facts.keys, queries=facts.queries)
            for i in facts.layers(view.raw, n)]


__all__ = ["CROSS", "CrossAttention", "CrossFacts", "cross_records", "read_cross"]
