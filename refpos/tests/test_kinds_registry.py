"""The registry of encoding kinds (refpos.models.kinds): one record per kind, asked for every piece.

For every record and every piece of :data:`refpos.models.kinds.record.PIECES`: the piece is there and works, or
the record says why the kind has none (``absent``). What "works" means per piece:

* ``facts``: the defaults pass their own check; the example's facts are read from a family-table sub-table;
  an unknown key is refused naming the kind;
* ``build`` and ``example``: the example config builds records of the kind, one per layer, each its ``record``
  class and JSON-ready;
* ``check``: the ``refpos check`` target is one the command dispatches (its table of targets is the
  registry's);
* ``golden``: the committed goldens hold cases under the prefix;
* ``contract`` and ``spec``: the reference adapter implements each function and the spec module calls it;
* ``draw``: Hypothesis draws parameters from it;
* ``doc``: the page has the section.

The family table accepts exactly the kinds marked ``in_table`` as a row's encoding, and the docs table is the
registry's.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.golden.manifest import load_manifest
from refpos.models import families
from refpos.models.kinds import KINDS, Stack
from refpos.models.kinds.record import PIECES
from refpos.models.kinds.registry import TABLE_KINDS, check_targets, docs_table
from refpos.models.layers import SCHEDULE
from refpos.models.records import LayerRecord
from refpos.models.view import ConfigView
from refpos.testing import adapter

ROOT = Path(__file__).resolve().parents[2]


def _row(kind_name: str) -> families.Family:
    return families.Family("example", families.STATED, "half")


def _stack(kind) -> Stack:
    facts = kind.read_facts("example", kind.example.get("facts", {})) if kind.facts else None
    view = ConfigView(kind.example["config"])
    return Stack(view, "decoder", "single", _row(kind.name), facts, SCHEDULE)


def unexplained(kind, piece: str) -> str | None:
    """What is wrong with ``kind``'s ``piece``: missing without a reason, or present and said absent."""
    has = kind.piece(piece) is not None
    if not has and not kind.absent.get(piece):
        return f"kind {kind.name!r} has no {piece} and does not say why (absent={{...}})"
    if has and piece in kind.absent:
        return f"kind {kind.name!r} has a {piece} and says it has none"
    return None


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("piece", PIECES)
def test_every_kind_has_every_piece_or_says_why(name, piece):
    assert unexplained(KINDS[name], piece) is None


def test_a_missing_piece_is_caught():
    """The question above fails a record that drops a piece silently, or keeps one it says it lacks."""
    alibi = KINDS["alibi"]
    assert "has no check" in unexplained(dataclasses.replace(alibi, check=None), "check")
    assert unexplained(dataclasses.replace(alibi, check=None, absent={"check": "why"}), "check") is None
    assert "says it has none" in unexplained(dataclasses.replace(alibi, absent={"check": "why"}), "check")


@pytest.mark.parametrize("name", [n for n, k in KINDS.items() if k.facts is not None])
def test_facts_are_read_and_checked(name):
    kind = KINDS[name]
    kind.read_facts("example", kind.example.get("facts", {}))
    with pytest.raises(ValueError, match=f"example: {name} takes"):
        kind.read_facts("example", {"no_such_fact": 1})


@pytest.mark.parametrize("name", [n for n, k in KINDS.items() if k.build is not None])
def test_the_example_builds_records_of_the_kind(name):
    kind = KINDS[name]
    records = kind.build(_stack(kind))
    assert records and all(isinstance(r, kind.record) and isinstance(r, LayerRecord) for r in records)
    assert {r.kind for r in records} == {name}
    assert [r.index for r in records] == list(range(len(records)))
    json.dumps([r.describe() for r in records])
    read = {name for record in records for _, source in record.reads for name in source}
    assert read <= set(kind.reads), (read, kind.reads)  # the kind's reads list every input its records read
    assert all(record.reads for record in records) or kind.hook == "none"  # a layer with positions says whence


def test_the_check_targets_are_the_registry_s():
    from refpos.cli.check_config import TARGET_KINDS

    assert dict(TARGET_KINDS) == dict(check_targets())


@pytest.mark.parametrize("name", [n for n, k in KINDS.items() if k.golden is not None])
def test_the_goldens_hold_cases_of_the_kind(name):
    manifest = load_manifest(ROOT / "golden")
    prefix = KINDS[name].golden + "/"
    assert any(case["id"].startswith(prefix) for case in manifest["cases"]), prefix


@pytest.mark.parametrize("name", [n for n, k in KINDS.items() if k.contract])
def test_the_contract_functions_exist_and_the_spec_calls_them(name):
    kind = KINDS[name]
    text = (ROOT / kind.spec).read_text(encoding="utf-8")
    for function in kind.contract:
        assert callable(getattr(adapter, function, None)), f"refpos.testing.adapter has no {function}"
        assert function in text, f"{kind.spec} never calls {function}"


@pytest.mark.parametrize("name", [n for n, k in KINDS.items() if k.draw is not None])
def test_the_draw_draws(name):
    @given(st.data())
    def draws(data):
        params = KINDS[name].draw(data.draw, st)
        assert isinstance(params, dict) and params

    draws()


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_names_a_docs_section_that_exists(name):
    page, anchor = KINDS[name].doc.split("#")
    text = (ROOT / page).read_text(encoding="utf-8")
    headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    assert anchor in headings or f'id="{anchor}"' in text, KINDS[name].doc


def test_the_family_table_takes_the_table_kinds():
    """A row may name every kind marked ``in_table`` with its example's facts, and no other."""
    assert set(TABLE_KINDS) == {n for n, k in KINDS.items() if k.in_table}
    source = {"source": "x/modeling_x.py: f", "layout": "half"}
    for name in TABLE_KINDS:
        facts = {name: dict(KINDS[name].example["facts"])} if KINDS[name].facts else {}
        assert families.read_row("x", {**source, "encoding": name, **facts}).positions.encoding == name
    with pytest.raises(ValueError, match="encoding holds a value outside its rule set"):
        families.read_row("x", {**source, "encoding": "mrope"})
    with pytest.raises(ValueError, match=r"learned\.table"):  # a kind whose defaults do not hold needs its sub-table
        families.read_row("x", {**source, "encoding": "learned"})


def test_the_docs_table_is_the_registry_s():
    text = (ROOT / "docs" / "families.md").read_text(encoding="utf-8")
    marker = "<!-- generated: refpos.models.kinds.registry.docs_table() -->\n"
    assert marker in text, "docs/families.md#encoding-kinds: add the generated table"
    table = text.split(marker, 1)[1].split("\n\n", 1)[0]
    assert table == docs_table(), "docs/families.md#encoding-kinds: paste docs_table():\n" + docs_table()
