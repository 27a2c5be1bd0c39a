"""The rule registry (refpos.rope.rules): one record per rope_type, and every consumer derived from it.

* each record builds its example configuration, and refuses it without each key it requires, naming the key;
* the key lists of the config reader, the adapter contract and RopeConfig are the registry's;
* the float64 formulas (the reference) and the same formulas in exact arithmetic (the golden certificates)
  agree to float64 rounding: the certificate is the reference's formula, evaluated exactly;
* the docs table is the one the records generate.

Tolerance of the arithmetic comparison: one evaluation of a closed formula in float64 against the exact
value of the same operations: a few ulps per operation, amplified by at most the exponent of a power
(θ^(2j/d) with ln θ ≤ 14): rtol 1e-13.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from refpos.golden.exact.certify import Exact, mp_attention_factor, mp_inv_freq
from refpos.models.hf_files import ROPE_KEYS
from refpos.rope.config import RopeConfig
from refpos.rope.params import PARAM_KEYS
from refpos.rope.rules import PARAMETERS, RULES, docs_table
from refpos.rope.scaling import rope_frequencies

ROOT = Path(__file__).resolve().parents[2]
RTOL = 1e-13  # see the module docstring


def example(name: str, **changes) -> RopeConfig:
    return RopeConfig(rope_type=name, head_dim=64, **{**RULES[name].example, **changes})


@pytest.mark.parametrize("name", RULES)
def test_every_record_builds_its_example_and_requires_its_keys(name):
    rule = RULES[name]
    rope = example(name)
    assert rope.rope_type == name
    for key, _ in rule.required:
        if key in rule.example:
            kwargs = {k: v for k, v in rule.example.items() if k != key}
            with pytest.raises(ValueError, match=key):
                RopeConfig(rope_type=name, head_dim=64, **kwargs)


@pytest.mark.parametrize("name", RULES)
def test_a_key_of_another_rule_is_refused(name):
    foreign = next(p for p in PARAMETERS.values() if p.name not in RULES[name].parameters and p.default is None)
    with pytest.raises(ValueError, match=f"{foreign.name}=.*not used by rope_type '{name}'"):
        example(name, **{foreign.name: 1.0})


def test_the_key_lists_are_the_registry_s():
    assert {name: set(keys) for name, keys in ROPE_KEYS.items()} == {
        name: {p for p in rule.parameters if PARAMETERS[p].in_config} for name, rule in RULES.items()}
    assert set(PARAMETERS) <= PARAM_KEYS  # every key of every rule is a key of the adapter contract
    assert set(PARAMETERS) <= {f for f in RopeConfig.__dataclass_fields__}


@pytest.mark.parametrize("name", RULES)
@pytest.mark.parametrize("seq_len", [None, 4097, 200_000])
def test_the_certificate_evaluates_the_reference_formula(name, seq_len):
    rope = example(name)
    inv, a = rope_frequencies(rope, seq_len=seq_len, xp="numpy")
    params = rope.to_params()
    exact = np.array([float(w) for w in mp_inv_freq(params, seq_len)])
    np.testing.assert_allclose(np.asarray(inv), exact, rtol=RTOL, atol=0)
    assert a == pytest.approx(float(mp_attention_factor(params, seq_len)), rel=RTOL)


def test_the_exact_arithmetic_is_not_the_float64_one():
    """The check above can fail: float64's θ^(−2j/d) is off the exact value by rounding, visible at 30 digits."""
    rope = example("default")
    w64 = np.asarray(rope_frequencies(rope, xp="numpy")[0])
    exact = RULES["default"].inv_freq(rope, None, Exact())
    assert any(Exact.real(float(w)) != e for w, e in zip(w64, exact, strict=True))


def test_the_docs_table_is_the_registry_s():
    text = (ROOT / "docs" / "extrapolation.md").read_text(encoding="utf-8")
    marker = "<!-- generated: refpos.rope.rules.docs_table() -->\n"
    table = text.split(marker, 1)[1].split("\n\n", 1)[0]
    assert table == docs_table(), "docs/extrapolation.md#the-rules: paste refpos.rope.rules.docs_table():\n" + (
        docs_table())


@pytest.mark.parametrize("name", RULES)
def test_every_rule_names_a_docs_section_that_exists(name):
    page, anchor = RULES[name].doc.split("#")
    text = (ROOT / page).read_text(encoding="utf-8")
    headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    assert anchor in headings or f'id="{anchor}"' in text, RULES[name].doc
