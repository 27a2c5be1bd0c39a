r"""A document model's box positions in the survey: the ``bbox`` it is fed, and refpos's box-tables claim
(:mod:`refpos.models.kinds.box_tables`) checked against the table lookups its run recorded.

**Feeding.** A text model whose forward takes ``bbox`` and whose config states ``max_2d_position_embeddings``
(LayoutLM, LiLT, LayoutLMv3) is run with the boxes :func:`boxes_for` makes of that row count and the probe's
tokens: seeded, every corner, height and width a row of its table, ``x0 < x1`` and ``y0 < y1``, the x and the y
corners, the heights and the widths all different, and no coordinate counting up with the tokens (which would
read as a 1-D position table, :func:`survey.observed.position_lookups`). They are a function of the rows and the
token count alone: the judge makes them again from the claim's record, so the store keeps no copy.

**Checking** (:func:`check_boxes`, once per stack, claimed at index −1 as the stack's input): the rows each table
was read at in run A (the ``torch.nn.functional.embedding`` calls on the weights of the record's four modules)
against the rows refpos's record reads at the same boxes (:meth:`~refpos.models.kinds.box_tables.BoxTablesLayer.
reads_at`), table by table, as multisets of index arrays. That is the whole comparison: once every table is read
at the same rows, the sum of the rows refpos reads and the sum transformers' lookups returned are the same
vectors added, so comparing them would measure nothing; no error is reported. What transformers' float32 sum of
the six rows does is pinned by ``refpos/tests/test_anchors_layoutlm.py`` (within ``5u·Σ|rows|·(1 + 6u)``). A
wrong claim (the survey's mutants: each catalogued mistake of
:data:`refpos.encodings.box_tables_mistakes.MISTAKE_READS`) reads other rows, and is a mismatch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.claims import LayerClaim, LayerResult

#: the config key of the box tables' rows (a model whose config lacks it is not fed boxes)
ROWS_KEY = "max_2d_position_embeddings"


def boxes_for(rows: int, tokens: int, seed: int = 11) -> np.ndarray:
    """Boxes ``(1, tokens, 4)`` of ``(x0, y0, x1, y1)`` for tables of ``rows`` rows (module docstring): each
    extent below half the table, each corner below the other half."""
    if rows < 8:
        raise ValueError(f"{ROWS_KEY} must be at least 8 to hold boxes of distinct corners, got {rows}")
    rng = np.random.default_rng(seed)
    half = rows // 2
    for _ in range(100):
        x0, y0 = rng.integers(0, half, tokens), rng.integers(0, half, tokens)
        w, h = rng.integers(1, half, tokens), rng.integers(1, half, tokens)
        out = np.stack([x0, y0, x0 + w, y0 + h], axis=-1).astype(np.int64)
        columns = [out[:, i] for i in range(4)] + [h, w]
        counting = any(np.all(np.diff(c) == 1) for c in columns) if tokens > 1 else False
        if not counting and (tokens == 1 or (not np.array_equal(x0, y0) and not np.array_equal(w, h))):
            return out[None]
    raise ValueError(f"no boxes of distinct corners fit tables of {rows} rows for {tokens} tokens")


def box_inputs(model: Any, config: Any, tokens: int) -> dict[str, Any]:
    """``{"bbox": tensor}`` where ``model``'s forward takes ``bbox`` and ``config`` states :data:`ROWS_KEY`, else
    ``{}``."""
    import inspect

    import torch

    rows = getattr(config, ROWS_KEY, None)
    if "bbox" not in inspect.signature(model.forward).parameters or not isinstance(rows, int):
        return {}
    return {"bbox": torch.as_tensor(boxes_for(rows, tokens))}


def resized(bbox: Any, tokens: int) -> Any:
    """``bbox`` ``(1, T, 4)`` for ``tokens`` tokens: its boxes repeated or cut (a case of another length)."""
    import torch

    return torch.as_tensor(np.resize(bbox.numpy(), (1, tokens, 4)))


def _result(claim: LayerClaim, status: str, error: float | None = None, cause: str = "") -> LayerResult:
    return LayerResult(claim.stack, claim.index, claim.kind, status, error, cause)


def _observed(run: Any, modules: dict[str, str]) -> dict[str, list[Any]]:
    """Table -> the lookups of its module's weight in ``run``."""
    return {table: [lk for lk in run.lookups if module in lk.table.split(".")] for table, module in modules.items()}


def _as_sorted(indices: list[np.ndarray]) -> list[tuple[int, ...]]:
    return sorted(tuple(np.asarray(i).reshape(-1).tolist()) for i in indices)


def check_boxes(claim: LayerClaim, probe: Any) -> LayerResult:
    """refpos's box-tables claim against run A's lookups (module docstring)."""
    record, reads_at = claim.params["record"], claim.params["reads"]
    tokens = int(np.asarray(probe.positions).size)
    bbox = boxes_for(record.rows, tokens)
    seen = _observed(probe.a, record.modules())
    if not any(seen.values()):
        return _result(claim, "mismatch", None, f"transformers reads none of the box tables {record.modules()}")
    try:
        reads = reads_at(bbox)
    except ValueError as exc:
        return _result(claim, "mismatch", None, f"refpos's box rows at the boxes fed: {exc}")
    for table, lookups in seen.items():
        mine = [np.asarray(i).reshape(-1) for i in reads.get(table, ())]
        theirs = [lk.indices.reshape(-1) for lk in lookups]
        if _as_sorted(mine) != _as_sorted(theirs):
            return _result(claim, "mismatch", None, f"{record.modules()[table]}: transformers reads rows "
                           f"{[list(t) for t in _as_sorted(theirs)]}, refpos {[list(t) for t in _as_sorted(mine)]}")
    return _result(claim, "exact")


__all__ = ["ROWS_KEY", "box_inputs", "boxes_for", "check_boxes", "resized"]
