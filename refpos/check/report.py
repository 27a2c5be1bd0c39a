"""The lines ``refpos check`` prints for what a failing candidate computed, whatever its target: the pairs of a
RoPE or sinusoid candidate (:mod:`refpos.check.rope.identify_text`), the slopes of ALiBi heads, the map of a
bucket table, the rows a learned candidate read (:mod:`refpos.check.tables`)."""

from __future__ import annotations

from typing import Any

from refpos.check.rope.identify_text import identification_lines
from refpos.check.tables.alibi import alibi_lines
from refpos.check.tables.buckets import bucket_lines
from refpos.check.tables.learned import learned_lines


def report_lines(result: dict[str, Any]) -> list[str]:
    """The identification lines of any check's result (RoPE and sinusoid pairs, ALiBi heads, bucket maps, the
    rows a learned candidate read)."""
    if "rows_read" in result:
        return learned_lines(result["rows_read"])
    if "pairs" in result:
        return identification_lines(result)
    if "heads" in result:
        return alibi_lines(result)
    if "bucket_map" in result:
        return bucket_lines(result, result.get("target", ""))
    return []


__all__ = ["report_lines"]
