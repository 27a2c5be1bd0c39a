"""refpos.check.shared.catalogue: the one catalogue of known mistakes, its file format, and refpos check's use of it.

(The spec suite's side, that every mutant names a catalogued id and every entry has a mutant or a reason,
is spec_tests/test_meta.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from refpos.check.shared import catalogue

CHECK = Path(catalogue.__file__).resolve().parents[1]
#: mistake ids in the code of refpos check: known("id"), and the ("id", "evidence", builder) rows of its
#: mutants (a snake-case name with an underscore, then a string of words: not a flag, as in
#: request.need("q_len", "--q-len"))
ID_IN_CODE = re.compile(r'known\("([a-z0-9_]+)"\)|\(\s*"([a-z0-9]+_[a-z0-9_]+)",\s*f?"(?!-)[^"\n]* ')


def _ids_in_check_code() -> set[str]:
    found = set()
    for path in CHECK.rglob("*.py"):
        for match in ID_IN_CODE.finditer(path.read_text(encoding="utf-8")):
            found.add(match.group(1) or match.group(2))
    return found


def test_every_entry_is_complete_and_ids_are_unique():
    assert len(catalogue.MISTAKES) == len(catalogue.BY_ID) >= 30
    for m in catalogue.MISTAKES:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", m.id), m.id
        assert m.family and m.description and m.example and m.doc.startswith("docs/"), m


def test_the_code_of_refpos_check_names_exactly_the_diagnosed_entries():
    """known("id") in refpos/check, the definitions of refpos.check.rope.rope_mistakes, each of which refpos check
    evaluates for a RoPE (or M-RoPE) candidate, and the mistakes of the vision and audio kinds' targets
    (refpos.check.kinds: ``<kind>_<name>``)."""
    from refpos.check.kinds import KIND_CHECKS, catalogue_id
    from refpos.check.rope.rope_mistakes import ROPE_MISTAKES

    kinds = {catalogue_id(check.kind, name) for check in KIND_CHECKS for name in check.mistakes}
    in_code = _ids_in_check_code() | set(ROPE_MISTAKES) | kinds
    diagnosed = {m.id for m in catalogue.MISTAKES if m.diagnosed}
    assert in_code == diagnosed, f"in the code only: {in_code - diagnosed}; catalogue only: {diagnosed - in_code}"


def test_an_uncatalogued_id_cannot_be_reported():
    assert catalogue.known("layout_swap") == "layout_swap"
    with pytest.raises(KeyError, match=r"mistakes\.toml"):
        catalogue.known("rope_layout_swapped")


def test_family():
    assert {m.id for m in catalogue.family("alibi")} >= {"alibi_closed_form_slopes", "alibi_bias_form"}
    assert catalogue.family("no such family") == ()


GOOD = '[x]\nfamily = "rope"\ndescription = "d"\nexample = "e"\ndoc = "docs/diagnosis.md#layout_swap"\n'


@pytest.mark.parametrize(("text", "match"), [
    (GOOD.replace('example = "e"\n', ""), "missing or empty \\['example'\\]"),
    (GOOD + 'colour = "red"\n', "unknown keys \\['colour'\\]"),
    (GOOD.replace('"docs/diagnosis.md#layout_swap"', '"diagnosis.md"'), "doc must name a page of docs/"),
    (GOOD + 'diagnosed = "no"\n', "diagnosed must be a bool"),
    (GOOD.replace('description = "d"', 'description = "  "'), "missing or empty \\['description'\\]"),
])
def test_a_bad_table_is_named(text, match):
    with pytest.raises(ValueError, match=match):
        catalogue.load(text)


def test_a_duplicated_id_is_a_toml_error():
    import tomllib

    with pytest.raises(tomllib.TOMLDecodeError):
        catalogue.load(GOOD + GOOD)


def test_the_format_round_trips():
    (entry,) = catalogue.load(GOOD + 'no_mutant = "why"\ndiagnosed = false\n')
    assert entry == catalogue.Mistake("x", "rope", "d", "e", "docs/diagnosis.md#layout_swap", diagnosed=False,
                                      no_mutant="why")
