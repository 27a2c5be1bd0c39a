r"""The ``shaw_key`` comparison: a speech encoder's table of clipped frame distances read by each query, observed as
the logits each attention's softmax is fed with the key projection zero and every query one seeded vector ``c``
(:mod:`survey.pixel_logits`; Granite Speech hands them to ``scaled_dot_product_attention`` as its ``attn_mask``).

Then ``q·kᵀ·scale = 0`` exactly and the softmax input is the terms ``σ c_h·E[clip(s(j − i), −L, R) + o]`` of each
head ``h`` (``c_h`` its slice of the query bias), ``-∞`` (the dtype's most negative value, or its minimum) at the pairs
not attended. A blocked layer folds its blocks into the batch: the recorded matrices are ``c × c`` blocks, heads
inside blocks, the last block padded to ``c`` frames with its padded keys masked. The frames ``T`` are told by the
last kept block: ``c`` per earlier block plus the keys its first query attends to. The blocks are laid on the
diagonal of a ``T × T`` matrix, 0 off the blocks (more matrices than heads, in a run of one input, are blocks: a
record of one block is then wrong); which pairs are masked must be exactly the pairs refpos does not
attend (the padded keys, and nothing else), and the terms at the attended pairs are compared with the kind's
``refpos check shaw_key`` target on ``q = c`` at every frame and the layer's recorded table, within the terms' bound
at the run's unit roundoff (:meth:`refpos.encodings.shaw_key_mistakes.ShawKeyInputs.bound`). Adding the terms to the
zero scores is exact, so nothing is added. Each catalogued mistake these inputs can show (the other sign of the
distance, the clip exchanged, narrower or wider by one, the offset by one, no scale, blocks one frame shorter or
longer, no blocks) is computed from the same inputs and must be told apart. Where more blocks ran than were kept
(:data:`survey.pixel_logits.MATRICES`), the kept whole blocks are compared: blocks attend independently.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, absent, check_target, graded, unrecorded
from survey.pixels import PixelRun, Site

#: a logit below this is a masked pair (float32's most negative value is −3.4e38; the terms are of order 1)
MASKED = -1e30


def _table(record: Any, site: Site, sites: list[Site]) -> tuple[list[Site], np.ndarray] | None:
    """The sites of ``site``'s attention module and its table ``(rows, d)`` of the record's head width (float64)."""
    siblings = [s for s in sites if s.owner == site.owner]
    found = [p for s in siblings for p in s.params.values() if p.ndim == 2 and p.shape[1] == record.head_dim]
    return (siblings, found[0].astype(np.float64)) if found else None


def _blocks(logits: np.ndarray, heads: int) -> tuple[np.ndarray, int] | None:
    """The recorded ``(M, c, c)`` matrices as ``(blocks, H, c, c)`` whole blocks and the frames ``T`` they hold."""
    count = logits.shape[0] // heads
    if count == 0:
        return None
    blocks = logits[:count * heads].reshape(count, heads, *logits.shape[1:])
    frames = (count - 1) * logits.shape[-1] + int(np.sum(blocks[-1, 0, 0] > MASKED))
    return blocks, frames


def _full(blocks: np.ndarray, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """The blocks laid on the diagonal of ``(H, T, T)`` (0 off the blocks, the padded frames cut), and the mask of the
    pairs recorded masked."""
    count, heads, size = blocks.shape[0], blocks.shape[1], blocks.shape[-1]
    padded = np.zeros((heads, count * size, count * size))
    for b in range(count):
        padded[:, b * size:(b + 1) * size, b * size:(b + 1) * size] = blocks[b]
    full = padded[:, :frames, :frames]
    masked = full <= MASKED
    inside = np.kron(np.eye(count, dtype=bool), np.ones((size, size), dtype=bool))[:frames, :frames]
    return np.where(masked | ~inside, 0.0, full), masked | ~inside


def compare_shaw_key(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One layer's key terms: the next attention whose logits were recorded and that holds a table of the record's
    head width; a table of other rows than the record's is wrong (module docstring)."""
    from refpos.encodings.shaw_key import attended
    from refpos.encodings.shaw_key_mistakes import ShawKeyInputs

    site = next((s for s in sites if any(c.logits is not None for c in s.captures.values())
                 and _table(record, s, sites) is not None), None)
    if site is None:
        inline = next((s for s in sites if any(p.ndim == 2 and p.shape[1] == record.head_dim
                                                for p in s.params.values())), None)
        if inline is not None:
            return unrecorded(inline, sites, "the terms are added")
        return absent(run, f"no table of {record.rows} × {record.head_dim} for {record.stack} layer {record.index}")
    siblings, table = _table(record, site, sites)
    paths = tuple(s.path for s in siblings)
    if table.shape[0] != record.rows:
        return Outcome("wrong", f"{site.owner}: a table of {table.shape[0]} rows, refpos's of {record.rows}", paths)
    check = check_target("shaw_key")
    cases = []
    for size, capture in site.captures.items():
        if capture.logits is None:
            continue
        heads, dim = record.n_heads, record.head_dim
        size_c = capture.logits.shape[-1]
        if capture.query.size != heads * dim or (record.block is not None and size_c != record.block):
            return Outcome("wrong", f"{site.owner}: logits {capture.logits.shape} at the {size} size (query of "
                           f"{capture.query.size}) are not {heads} heads of {dim} in blocks of {record.block}", paths)
        logits = capture.logits.astype(np.float64)
        if record.block is None and logits.shape[0] > heads:  # a batch of one: more matrices are blocks
            return Outcome("wrong", f"{site.owner}: {logits.shape[0]} matrices of {size_c} × {size_c} at the {size} "
                           f"size, blocks of {heads} heads, where refpos attends over the whole sequence", paths)
        if record.block is None:
            frames, observed = size_c, logits[:heads]
            masked = observed <= MASKED
            observed = np.where(masked, 0.0, observed)
        else:
            laid = _blocks(logits, heads)
            if laid is None:
                return Outcome("wrong", f"{site.owner}: {logits.shape[0]} matrices, fewer than {heads} heads", paths)
            observed, masked = _full(*laid)
            frames = laid[1]
        rows = capture.logit_rows if record.block is None else np.arange(frames)
        inputs = ShawKeyInputs(np.broadcast_to(capture.query.astype(np.float64).reshape(heads, 1, dim),
                                               (heads, frames, dim)), table, record.left, record.right,
                               record.offset, record.sign, record.block)
        expected = np.broadcast_to(~attended(frames, record.block)[rows], masked.shape)
        if not np.array_equal(masked, expected):
            where = np.argwhere(masked != expected)[0]
            return Outcome("wrong", f"{site.owner}: the pairs masked at the {size} size are not those refpos does "
                           f"not attend (first at {tuple(int(i) for i in where)})", paths)
        wrong = {}
        for name in check.mistakes:
            output = check.wrong(inputs, name)
            wrong[name] = None if output is None else np.asarray(output)[:, rows]
        cases.append((observed, inputs.output()[:, rows], inputs.bound(run.dtype)[:, rows], wrong))
    if not cases:
        return Outcome("not reached", f"{site.owner}: no logits recorded", paths)
    return graded(cases, paths, f"{site.owner} shaw_key (the logits with the key projection zero)")


__all__ = ["compare_shaw_key"]
