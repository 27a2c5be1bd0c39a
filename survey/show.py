"""``python -m survey show TYPE``: one model type's comparison, layer by layer, for checking a verdict by hand."""

from __future__ import annotations

from survey import catalogue
from survey.run import survey_one


def show(name: str) -> str:
    types = {t.name: t for t in catalogue.model_types()}
    if name not in types:
        raise SystemExit(f"{name!r} is not a model type of the installed transformers")
    row = survey_one(types[name])
    lines = [f"{row.model_type}: {row.status} ({row.file}, built at strength {row.strength or '-'}, "
             f"{row.seconds:.1f} s)",
             f"  transformers showed: {', '.join(row.observed) or '-'}",
             f"  refpos: {row.layers or ', '.join(row.claimed) or '-'}",
             f"  cause: {row.cause or '-'}"]
    lines += [f"  note: {note}" for note in row.notes]
    if row.verdict is not None:
        for r in row.verdict.layers:
            error = "" if r.error is None else f" max|Δ| {r.error:.3g}"
            where = "stack" if r.index < 0 else f"layer {r.index}"
            lines.append(f"  {r.stack} {where} [{r.claim}]: {r.status}{error} {r.cause}")
    return "\n".join(lines)
