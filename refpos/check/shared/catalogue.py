"""The catalogue of known mistakes: one id per mistake, shared by ``refpos check`` and the spec suite.

The entries are data, in ``refpos/data/mistakes.toml`` (one table per id). Each :class:`Mistake` holds its
id (what ``refpos check`` prints in a diagnosis, and what a mutant of ``spec_tests/mutants/`` declares it
implements), its family, a one-line description, one concrete example, the page section of docs/ that
documents it, whether ``refpos check`` names it, and, where no spec-suite mutant implements it, why not.
``spec_tests/test_meta.py`` fails when a mutant names an id that is not catalogued, or when an entry has
neither a mutant nor a reason.

To add a mistake, add a table to ``mistakes.toml``; nothing else is needed for the catalogue.
``refpos check`` reports only catalogued ids (:func:`known`), so a diagnosis cannot name a mistake that
is not here.

Examples
--------
>>> BY_ID["layout_swap"].family, BY_ID["layout_swap"].doc
('rope', 'docs/diagnosis.md#layout_swap')
>>> [m.id for m in family("t5")]
['t5_sign_flip', 't5_direction', 't5_rounding']
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from importlib import resources


@dataclass(frozen=True)
class Mistake:
    """One known mistake.

    ``diagnosed``: ``refpos check`` names it when a candidate matches. ``no_mutant``: why no mutant of the
    spec suite implements it (empty when one does).
    """

    id: str
    family: str
    description: str
    example: str
    doc: str
    diagnosed: bool = True
    no_mutant: str = ""


_REQUIRED = ("family", "description", "example", "doc")
_OPTIONAL = {"diagnosed": bool, "no_mutant": str}


def _entry(mistake_id: str, table: dict) -> Mistake:
    """One table of ``mistakes.toml`` as a :class:`Mistake`; a ``ValueError`` naming what is wrong."""
    where = f"refpos/data/mistakes.toml [{mistake_id}]"
    if not isinstance(table, dict):
        raise ValueError(f"{where}: must be a table")
    unknown = set(table) - set(_REQUIRED) - set(_OPTIONAL)
    missing = [key for key in _REQUIRED if not (isinstance(table.get(key), str) and table[key].strip())]
    if unknown or missing:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}, missing or empty {missing}; keys are "
                         f"{[f.name for f in fields(Mistake) if f.name != 'id']}")
    for key, kind in _OPTIONAL.items():
        if key in table and not isinstance(table[key], kind):
            raise ValueError(f"{where}: {key} must be a {kind.__name__}, got {table[key]!r}")
    if not table["doc"].startswith("docs/") or "#" not in table["doc"]:
        raise ValueError(f"{where}: doc must name a page of docs/ and an anchor on it, got {table['doc']!r}")
    return Mistake(id=mistake_id, **table)


def load(text: str | None = None) -> tuple[Mistake, ...]:
    """The entries of ``mistakes.toml`` (or of ``text`` in its format), in file order."""
    if text is None:
        text = resources.files("refpos").joinpath("data", "mistakes.toml").read_text(encoding="utf-8")
    return tuple(_entry(mistake_id, table) for mistake_id, table in tomllib.loads(text).items())


#: every catalogued mistake, in the order of ``mistakes.toml``
MISTAKES: tuple[Mistake, ...] = load()
#: id -> entry
BY_ID: dict[str, Mistake] = {m.id: m for m in MISTAKES}


def known(mistake_id: str) -> str:
    """``mistake_id`` itself if it is catalogued, else a ``KeyError`` naming the catalogue."""
    if mistake_id not in BY_ID:
        raise KeyError(f"{mistake_id!r} is not a mistake of refpos.check.shared.catalogue (refpos/data/mistakes.toml)")
    return mistake_id


def family(name: str) -> tuple[Mistake, ...]:
    """The entries of one family (``"rope"``, ``"alibi"``, ``"t5"``, ``"sinusoid"``, ``"any"``, ...)."""
    return tuple(m for m in MISTAKES if m.family == name)
