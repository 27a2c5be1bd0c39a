"""The registry: every scaling rule refpos computes, by ``rope_type`` (:data:`RULES`), and what is derived from it.

To add a rule, write its :class:`~refpos.rope.rules.record.RopeRule` (in a module of this package, beside its
formulas), add any new key to :data:`~refpos.rope.rules.parameters.PARAMETERS`, and list the record in
:data:`RULES`. :class:`refpos.RopeConfig`'s fields and validation, :func:`refpos.rope_frequencies`, the config
resolver's rope-dict keys, the mpmath certificate, both Hypothesis strategy modules, the adapter contract's key
list and the docs table (docs/extrapolation.md#the-rules) follow from it; the spec suite draws the new rule in
every test that draws every rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from refpos.rope.rules.llama3 import LLAMA3
from refpos.rope.rules.longrope import LONGROPE
from refpos.rope.rules.ntk import DYNAMIC, NTK
from refpos.rope.rules.parameters import PARAMETERS
from refpos.rope.rules.plain import DEFAULT, LINEAR, PROPORTIONAL
from refpos.rope.rules.record import RopeRule
from refpos.rope.rules.step import DYNAMIC_STEP
from refpos.rope.rules.yarn import YARN, YARN_LOG
from refpos.validation import check_choice


def _registry(*rules: RopeRule) -> Mapping[str, RopeRule]:
    for rule in rules:
        unknown = [p for p in rule.parameters if p not in PARAMETERS]
        if unknown:
            raise ValueError(f"rule {rule.name!r} reads keys that are not in PARAMETERS: {unknown}")
        if (rule.factor is not None) != ("factor" in rule.parameters):
            raise ValueError(f"rule {rule.name!r}: a factor rule goes with the key 'factor', and only with it")
    return MappingProxyType({rule.name: rule for rule in rules})


#: ``rope_type`` -> its rule, in the order the docs list them
RULES: Mapping[str, RopeRule] = _registry(DEFAULT, LINEAR, NTK, DYNAMIC, DYNAMIC_STEP, YARN, YARN_LOG, LLAMA3,
                                         LONGROPE, PROPORTIONAL)
#: every ``rope_type`` refpos computes
ROPE_TYPES: tuple[str, ...] = tuple(RULES)
#: another ``rope_type`` spelling a config may use -> the rule's name (e.g. Phi-3's "su")
TYPE_ALIASES: Mapping[str, str] = MappingProxyType({alias: rule.name for rule in RULES.values()
                                                   for alias in rule.aliases})
#: the ``rope_type`` of plain RoPE (no scaling)
PLAIN = DEFAULT.name


def rule_of(rope_type: object) -> RopeRule:
    """The rule of ``rope_type``: a ``TypeError``/``ValueError`` naming ``rope_type`` and the known types."""
    return RULES[check_choice("rope_type", rope_type, ROPE_TYPES)]


def config_keys() -> Mapping[str, frozenset[str]]:
    """``rope_type`` -> the keys of a model's rope dict its rule reads (besides ``rope_type``, ``rope_theta``)."""
    return MappingProxyType({name: rule.config_keys for name, rule in RULES.items()})


def docs_table() -> str:
    """The Markdown table of docs/extrapolation.md#the-rules: one row per rule, from its record."""
    rows = ["| `rope_type` | ω | A | keys | transformers | section |", "|---|---|---|---|---|---|"]
    for rule in RULES.values():
        keys = ", ".join(f"`{p}`" for p in rule.parameters) or "—"
        page, anchor = rule.doc.removeprefix("docs/").split("#")
        rows.append(f"| `{rule.name}` | {rule.omega} | {rule.attention} | {keys} | "
                    f"{'`' + rule.transformers.split(' ')[0] + '`' if rule.transformers else '—'} | "
                    f"[{anchor}]({page}#{anchor}) |")
    return "\n".join(rows)
