r"""A family row the caller states: ``model_positions(assume=…)``, ``--assume KEY=VALUE`` and ``--assume-file``.

A ``model_type`` the family table does not know is resolved only as far as its config states
(:func:`refpos.model_positions`); what its code fixes — the encoding, the pair layout, which keys hold the base,
the rotated span or the length, which layers rotate — the caller states as the columns of a family-table row
(:mod:`refpos.models.families`, :mod:`refpos.models.facts`), read and checked by the code that reads the table's
rows, with the provenance ``"stated by the caller"``:

* the columns themselves: ``{"encoding": "rope", "layout": "interleaved", "rope": {"theta_key":
  "rope_embedding_base"}}`` (a nested table as in ``families.toml``, or its dotted keys ``"rope.theta_key"``);
* a family to start from: ``{"family": "glm"}`` borrows that row's table, and the other columns stated override
  it (a stated ``encoding`` drops the row's switch and per-stack encodings; a stated fact sub-table is merged into
  the row's, fact by fact).

On the command line each ``--assume KEY=VALUE`` is one column (``KEY`` dotted into the fact tables, ``VALUE`` a
TOML value, or a bare word read as a string: ``--assume rope.theta=5e6 --assume layout=half``); ``--assume-file
row.toml`` reads the columns from a TOML file that holds one row's keys at its top level (what a
``[family.<model_type>]`` table of ``families.toml`` holds, without ``source``).

Examples
--------
>>> row = stated_row("my_llm", {"family": "glm", "rope.theta_key": "base_freq"})
>>> row.layout, row.rope.partial_rotary_factor, row.rope.theta_key, row.source
('interleaved', 0.5, 'base_freq', 'stated by the caller')
>>> assume_pairs(["encoding=alibi", "alibi.dtype=bfloat16"])
{'encoding': 'alibi', 'alibi': {'dtype': 'bfloat16'}}
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

from refpos.inputs import InputError, read_text
from refpos.models.families import ALIASES, COLUMNS, ROW_TABLES, STATED, Family, read_row
from refpos.models.kinds.registry import FACT_KINDS

#: what ``assume`` takes: a family to borrow, and every column of a family-table row but its source
ASSUMABLE: tuple[str, ...] = ("family", *(c for c in COLUMNS if c != "source"))
#: the columns a stated ``encoding`` replaces in a borrowed row
_ENCODING_COLUMNS = ("encoding", "switch", "encoder", "decoder", "predictor", "spatial", "temporal")
#: the largest row file read (a row is a few hundred bytes)
MAX_ROW_BYTES = 64 * 1024


def nested(assume: Mapping[str, Any]) -> dict[str, Any]:
    """``assume`` with its dotted keys as nested tables: ``{"rope.theta_key": "x"}`` → ``{"rope": {"theta_key":
    "x"}}``; a ``TypeError`` for a key that is not a string, a ``ValueError`` for a key given twice."""
    out: dict[str, Any] = {}
    for key, value in assume.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"assume keys must be non-empty strings (columns of a family row), got {key!r}")
        *outer, last = key.split(".")
        table = out
        for part in outer:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ValueError(f"assume: {key!r} goes inside {part!r}, which is stated as a value")
        if isinstance(value, Mapping):
            value = nested(value)
            if isinstance(table.get(last), dict):
                value = {**table[last], **value}
        elif last in table:
            raise ValueError(f"assume: {key!r} is stated twice")
        table[last] = value
    return out


def stated_row(model_type: str, assume: Mapping[str, Any], where: str = "assume") -> Family:
    """The family row ``assume`` states for ``model_type`` (module docstring), read by the family table's row
    reader; a ``ValueError`` naming ``where`` and what is wrong.

    See Also
    --------
    refpos.models.families.read_row : the reader of the table's rows, which reads this one.
    refpos.model_positions : takes the same mapping as ``assume=``.
    """
    table = nested(assume)
    unknown = sorted(set(table) - set(ASSUMABLE))
    if unknown:
        raise ValueError(f"{where} takes {list(ASSUMABLE)}, got {unknown}" + (
            " (the source of a stated row is the caller)" if "source" in unknown else ""))
    base = table.pop("family", None)
    if base is not None:
        if not isinstance(base, str) or ALIASES.get(base, base) not in ROW_TABLES:
            raise ValueError(f"{where} family={base!r} is not a model_type of the family table")
        row = dict(ROW_TABLES[ALIASES.get(base, base)])
        if "encoding" in table:
            row = {k: v for k, v in row.items() if k not in _ENCODING_COLUMNS}
        for kind in FACT_KINDS:  # a stated fact sub-table is merged into the borrowed one, fact by fact
            if isinstance(row.get(kind), dict) and isinstance(table.get(kind), dict):
                table[kind] = {**row[kind], **table[kind]}
        table = {**row, **table}
    return read_row(model_type, {**table, "source": STATED}, where=where)


def assume_value(text: str) -> Any:
    """A ``--assume`` value: a TOML value (``5e6``, ``true``, ``["ntk_alpha"]``, ``{chatglm2 = "divide"}``,
    ``"half"``), else the text itself as a string (``half``, ``glm``)."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def assume_pairs(values: list[str]) -> dict[str, Any]:
    """``--assume KEY=VALUE`` values as a nested table (:func:`nested`); a malformed one is a ``ValueError``."""
    pairs: dict[str, Any] = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"--assume takes KEY=VALUE with KEY one of {list(ASSUMABLE)} (dotted into a fact table: "
                             f"rope.theta_key), got {text!r}")
        if key in pairs:
            raise ValueError(f"--assume {key} given twice")
        pairs[key] = assume_value(value)
    return nested(pairs)


def read_row_file(path: str) -> dict[str, Any]:
    """The columns of a row file (``--assume-file``): a TOML file holding one row's keys at its top level, read as
    :mod:`refpos.inputs` reads a file (a regular file, at most :data:`MAX_ROW_BYTES`, UTF-8)."""
    try:
        text = read_text(path, what="row file", max_bytes=MAX_ROW_BYTES)
    except InputError as exc:
        raise ValueError(f"--assume-file: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"--assume-file: {path} is not TOML ({exc})") from None


__all__ = ["ASSUMABLE", "MAX_ROW_BYTES", "assume_pairs", "assume_value", "nested", "read_row_file", "stated_row"]
