"""The page's section on the vision, audio and feature models (:mod:`survey.pixels`): their counts per encoding kind
(refpos's answer) and status, rendered by :func:`survey.table.render`."""

from __future__ import annotations

from typing import Any

from survey.pixels import NO_TOKEN_IDS, RUN_NOTE

#: the kinds of a row's answer that add no position: a row is filed under its other kinds where it has any
NO_POSITIONS = ("none", "no_attention")
#: what a row's answer holds that is no kind: refpos declining, a layer the survey has no claim for
NOT_KINDS = ("refused", "unknown", "other")


def is_pixel_row(row: dict[str, Any]) -> bool:
    """Whether the row is a model whose forward takes pixel values, audio or features: run on them, or not run
    because its forward takes no token ids."""
    return any(note.startswith(RUN_NOTE) for note in row["notes"]) or NO_TOKEN_IDS in row["cause"] or any(
        NO_TOKEN_IDS in note for note in row["notes"])


def kind_of(row: dict[str, Any]) -> str:
    """The row's encoding kind as refpos answers it: its kinds that add positions (joined by +), else ``none`` or
    ``no_attention``; ``not answered`` where it names no kind (a refusal, or a model the survey did not run, whose
    tower it does not ask about)."""
    claimed = [k for k in row["claimed"] if k not in NOT_KINDS]
    positional = [k for k in claimed if k not in NO_POSITIONS]
    if positional:
        return " + ".join(positional)
    return " + ".join(claimed) if claimed else "not answered"


def section(rows: list[dict[str, Any]], statuses: tuple[str, ...], release: str) -> list[str]:
    """The section's lines (none when no row is a pixel, audio or feature model)."""
    picked = [row for row in rows if is_pixel_row(row)]
    if not picked:
        return []
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row in picked:
        by_kind.setdefault(kind_of(row), []).append(row)
    ran = sum(any(n.startswith(RUN_NOTE) for n in row["notes"]) for row in picked)
    lines = ["", f"## Vision, audio and feature models by kind (transformers {release})", "",
             f"{len(picked)} model types whose forward takes pixel values, audio or features instead of token ids; "
             f"{ran} of them run on seeded inputs at their native size and at a size that forces resampling "
             "(`survey/pixels.py`), each position site's weights and what it adds recorded and compared with "
             "refpos's answer kind by kind, with that kind's catalogued mistakes (`refpos check`) as the wrong "
             "answers each must tell apart (`survey/pixel_kinds/`). The kind is refpos's answer (`none`: "
             "attention without positions, `no_attention`: no attention; exact there means no parameter, buffer or "
             "module of the model is named for positions and the forward ran: `survey/pixel_compare.py`).", "",
             "| kind (refpos) | " + " | ".join(statuses) + " | all |", "|---|" + "---|" * (len(statuses) + 1)]
    for kind in sorted(by_kind, key=lambda k: (-len(by_kind[k]), k)):
        found = [sum(row["status"] == status for row in by_kind[kind]) for status in statuses]
        lines.append(f"| {kind} | " + " | ".join(map(str, found)) + f" | {len(by_kind[kind])} |")
    return lines
