"""The registry of RoPE scaling rules: one :class:`RopeRule` record per ``rope_type``.

* :data:`RULES` — ``rope_type`` -> :class:`RopeRule` (keys, validation, float64 and mpmath formulas,
  attention factor, Hypothesis draw, docs anchor); :data:`ROPE_TYPES` its keys; :func:`rule_of`.
* :data:`PARAMETERS` — every key a rule may read (:class:`Parameter`): the fields of
  :class:`refpos.RopeConfig` beyond the head geometry.
* :class:`Float64` — the arithmetic the reference evaluates the formulas in (``refpos.golden.exact.certify`` has the
  exact one).

How to add a rule: :mod:`refpos.rope.rules.registry`.
"""

from refpos.rope.rules.parameters import DYNAMIC_RULES, NTK_RULES, PARAMETERS, Parameter
from refpos.rope.rules.record import Arithmetic, DrawContext, FactorRule, Float64, RopeRule
from refpos.rope.rules.registry import PLAIN, ROPE_TYPES, RULES, TYPE_ALIASES, config_keys, docs_table, rule_of

__all__ = [
    "DYNAMIC_RULES",
    "NTK_RULES",
    "PARAMETERS",
    "PLAIN",
    "ROPE_TYPES",
    "RULES",
    "TYPE_ALIASES",
    "Arithmetic",
    "DrawContext",
    "FactorRule",
    "Float64",
    "Parameter",
    "RopeRule",
    "config_keys",
    "docs_table",
    "rule_of",
]
