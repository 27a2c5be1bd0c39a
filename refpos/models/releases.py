r"""Releases: a family whose position code changed between transformers releases has one row per release range.

A family-table row is read from one transformers release (its ``release`` column, the row's ``source`` read from
that release's modeling file). When a later release changes the code — HY-V4's attention and indexer rotate with
``apply_rotary_pos_emb_interleave`` from 5.25 on, with ``rotate_half`` before — the row states the newest reading
and a ``versions`` sub-table states each earlier range's own columns, with their own source and release:

.. code-block:: toml

    [family.hy_v4]
    layout = "deinterleaved"
    source = "hy_v4/modeling_hy_v4.py: apply_rotary_pos_emb_interleave, HYV4Attention.forward"
    release = "5.25"
    versions = {"<5.25" = {layout = "half", source = "hy_v4/modeling_hy_v4.py: rotate_half", release = "5.24"}}

A range is ``"<X.Y"`` (releases before X.Y) or ``">=X.Y"``; the row itself holds for every release no range
names. Which row a config runs is chosen by the release that wrote it — the config's own ``transformers_version``
key, or the caller's ``transformers_version=`` (``--transformers-version``), which wins. A config that does not
say, for a family whose rows disagree, is refused by name (:func:`row_for` gives the reason): refpos does not guess
which code it ran.

Examples
--------
>>> from refpos.models.families import family_of
>>> hy = family_of("hy_v4")
>>> row_for(hy, "5.24.0")[0].layout, row_for(hy, "5.25.0")[0].layout
('half', 'deinterleaved')
>>> print(row_for(hy, None)[1])
hy_v4: its position code differs between transformers releases (<5.25: layout 'half'; otherwise (5.25 on):
layout 'deinterleaved'); the config has no transformers_version: state the release, ...
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

#: a release as configs write it (``5.25.0``, ``4.57.1``, ``5.26.0.dev0``): the major and minor numbers count
VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?(?:[.\-+]?\w+)*")
#: a range of a row's ``versions`` sub-table
RANGE = re.compile(r"(<|>=)(\d+)\.(\d+)")


def parse_version(name: str, value: Any) -> tuple[int, int]:
    """``(major, minor)`` of a release string; a ``TypeError``/``ValueError`` naming ``name`` otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a transformers release such as '5.25.0', got {type(value).__name__} "
                        f"{value!r}")
    found = VERSION.fullmatch(value.strip())
    if found is None:
        raise ValueError(f"{name} must be a transformers release such as '5.25.0', got {value!r}")
    return int(found.group(1)), int(found.group(2))


def check_range(where: str, text: str) -> tuple[str, tuple[int, int]]:
    """A range key (``"<5.25"``, ``">=5.25"``) as ``(operator, (major, minor))``."""
    found = RANGE.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(f"{where}: a versions range is '<X.Y' or '>=X.Y', got {text!r}")
    return found.group(1), (int(found.group(2)), int(found.group(3)))


def in_range(text: str, version: tuple[int, int]) -> bool:
    """True when ``version`` lies in the range ``text``."""
    operator, bound = check_range("versions", text)
    return version < bound if operator == "<" else version >= bound


def differs(row: Any) -> dict[str, str]:
    """The columns each range of ``row`` changes, as ``range -> "layout half"``-style text (for messages)."""
    out = {}
    for text, other in row.versions:
        changed = [f.name for f in fields(row) if f.name not in ("versions", "source", "release")
                   and getattr(other, f.name) != getattr(row, f.name)]
        out[text] = ", ".join(f"{name} {getattr(other, name)!r}" for name in changed) or "the same columns"
    return out


def row_for(row: Any, version: str | None, *, name: str = "transformers_version") -> tuple[Any, str | None]:
    """The row of ``row``'s family for the release ``version`` and, when the release cannot tell, the reason
    (the newest row is returned with it; a caller refuses what depends on it).

    ``version`` ``None``: the config says no release; a row without ``versions`` needs none.
    """
    if row is None or not row.versions:
        return row, None
    if version is None:
        ranges = "; ".join(f"{text}: {what}" for text, what in differs(row).items())
        newest = f"otherwise ({row.release} on): layout {row.layout!r}"
        return row, (f"{row.model_type}: its position code differs between transformers releases ({ranges}; "
                     f"{newest}); the config has no transformers_version: state the release, "
                     "transformers_version= (refpos positions / golden model / check --config: --transformers-version "
                     "X.Y) or the config's transformers_version key")
    parsed = parse_version(name, version)
    for text, other in row.versions:
        if in_range(text, parsed):
            return other, None
    return row, None


def release_of(config: Mapping[str, Any], given: str | None) -> str | None:
    """The release a config was written by: ``given`` (the caller's), else its ``transformers_version`` key."""
    if given is not None:
        parse_version("transformers_version", given)
        return given
    found = config.get("transformers_version")
    if found is not None:
        parse_version("transformers_version", found)
    return found


__all__ = ["RANGE", "VERSION", "check_range", "differs", "in_range", "parse_version", "release_of", "row_for"]
