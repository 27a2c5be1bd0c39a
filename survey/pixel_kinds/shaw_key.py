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

A table one module outside the layers gathers once for every layer (SpeechT5's ``SpeechT5RelativePositionalEncoding``
hands the rows to each layer's attention) is held by no attention module: its capture's calls
(:func:`survey.keyed_runs.record_fed_logits`) hold the logits of each attention module fed its output, in call
order, and layer ``i`` of the record is compared with the ``i``-th, as above.

A bias per head (``term = "bias"``, Phi-4-multimodal's audio encoder) reads no query: the encoder adds the table's
bias to its boolean streaming window and hands the sum to every attention as its ``attention_mask``, recorded as it
is fed, one call per attention module in call order (:func:`survey.keyed_runs.record_fed_masks`). Layer ``i``'s is
compared with refpos's bias of the recorded table plus the window (:mod:`refpos.encodings.shaw_key_bias`), within the
kind's bound of the one-hot queries plus ``u·|e|`` (the window added); the wrong answers are the kind's catalogued
mistakes of the one-hot queries, each plus the window, and the wrong windows
(:data:`refpos.encodings.shaw_key_bias.WINDOW_MISTAKES`: none added, chunks one frame shorter or longer, one chunk
fewer or more seen before), each wherever it differs.
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
    found = [p for s in siblings for p in s.params.values() if p.ndim == 2 and p.shape[1] == record.table_width]
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


def _shared(record: Any, run: PixelRun) -> tuple[Site, np.ndarray] | None:
    """A module site outside the layers holding a table of the record's head width, whose captures hold the logits
    of the attention modules fed its output (module docstring), and its table."""
    from survey.pixel_kinds.relative_sinusoid import _layer_of

    for site in run.sites:
        tables = [p for p in site.params.values() if p.ndim == 2 and p.shape[1] == record.table_width]
        if site.is_module and _layer_of(site.path) is None and tables and any(
                c.calls for c in site.captures.values()):
            return site, tables[0].astype(np.float64)
    return None


def _case(record: Any, run: PixelRun, table: np.ndarray, logits: np.ndarray, logit_rows: np.ndarray,
          query: np.ndarray, where: str, size: str) -> tuple | Outcome:
    """One size's ``(observed, reference, bound, wrong answers)`` of the recorded ``logits`` of queries ``query``,
    or the outcome that makes the layer wrong."""
    from refpos.encodings.shaw_key import attended
    from refpos.encodings.shaw_key_mistakes import ShawKeyInputs

    heads, dim = record.n_heads, record.head_dim
    size_c = logits.shape[-1]
    if query.size != heads * dim or (record.block is not None and size_c != record.block):
        return Outcome("wrong", f"{where}: logits {logits.shape} at the {size} size (query of {query.size}) are not "
                       f"{heads} heads of {dim} in blocks of {record.block}")
    logits = logits.astype(np.float64)
    if record.block is None and logits.shape[0] > heads:  # a batch of one: more matrices are blocks
        return Outcome("wrong", f"{where}: {logits.shape[0]} matrices of {size_c} × {size_c} at the {size} size, "
                       f"blocks of {heads} heads, where refpos attends over the whole sequence")
    if record.block is None:
        frames, observed = size_c, logits[:heads]
        masked = observed <= MASKED
        observed = np.where(masked, 0.0, observed)
    else:
        laid = _blocks(logits, heads)
        if laid is None:
            return Outcome("wrong", f"{where}: {logits.shape[0]} matrices, fewer than {heads} heads")
        observed, masked = _full(*laid)
        frames = laid[1]
    rows = logit_rows if record.block is None else np.arange(frames)
    inputs = ShawKeyInputs(np.broadcast_to(query.astype(np.float64).reshape(heads, 1, dim), (heads, frames, dim)),
                           table, record.left, record.right, record.offset, record.sign, record.block)
    expected = np.broadcast_to(~attended(frames, record.block)[rows], masked.shape)
    if not np.array_equal(masked, expected):
        at = np.argwhere(masked != expected)[0]
        return Outcome("wrong", f"{where}: the pairs masked at the {size} size are not those refpos does not attend "
                       f"(first at {tuple(int(i) for i in at)})")
    check = check_target("shaw_key")
    wrong = {}
    for name in check.mistakes:
        output = check.wrong(inputs, name)
        wrong[name] = None if output is None else np.asarray(output)[:, rows]
    return observed, inputs.output()[:, rows], inputs.bound(run.dtype)[:, rows], wrong


def _graded(record: Any, run: PixelRun, table: np.ndarray, observed: list[tuple], where: str,
            paths: tuple[str, ...]) -> Outcome:
    """The layer's outcome over its recorded ``(size, logits, rows, query)``; a table of other rows than the
    record's is wrong."""
    if table.shape[0] != record.rows:
        return Outcome("wrong", f"{where}: a table of {table.shape[0]} rows, refpos's of {record.rows}", paths)
    cases = []
    for size, logits, rows, query in observed:
        case = _case(record, run, table, logits, rows, query, where, size)
        if isinstance(case, Outcome):
            return Outcome(case.status, case.cause, paths)
        cases.append(case)
    if not cases:
        return Outcome("not reached", f"{where}: no logits recorded", paths)
    return graded(cases, paths, f"{where} shaw_key (the logits with the key projection zero)")


def _graded_bias(record: Any, run: PixelRun, table: np.ndarray, calls: dict[str, Any], where: str,
                 paths: tuple[str, ...]) -> Outcome:
    """A bias per head: the additive mask each size's attention was fed ``(1, H, T, T)`` against the table's bias plus
    the window (module docstring)."""
    from refpos.encodings.shaw_key_bias import streaming_window, wrong_windows
    from refpos.encodings.shaw_key_mistakes import ShawKeyInputs
    from survey.pixel_kinds.base import unit

    if table.shape[0] != record.rows:
        return Outcome("wrong", f"{where}: a table of {table.shape[0]} rows, refpos's of {record.rows}", paths)
    check = check_target("shaw_key")
    cases = []
    for size, call in calls.items():
        observed = call.output.astype(np.float64).reshape(-1, *call.output.shape[-2:])
        heads, frames = record.n_heads, observed.shape[-1]
        if observed.shape[0] != heads or (record.block is not None and frames > record.block):
            return Outcome("wrong", f"{where}: an additive mask {call.output.shape} at the {size} size, not {heads} "
                           f"heads of one block", paths)
        inputs = ShawKeyInputs(np.broadcast_to(np.eye(heads)[:, None, :], (heads, frames, heads)), table, record.left,
                               record.right, record.offset, record.sign, record.block, 1.0)
        window = 0.0 if record.window is None else streaming_window(frames, *record.window, record.block)
        reference = inputs.output() + window
        bound = inputs.bound(run.dtype) + unit(run) * np.abs(reference)  # the bias gathered, the window added
        wrong = {}
        for name in check.mistakes:
            output = check.wrong(inputs, name)
            wrong[name] = None if output is None else np.asarray(output) + window
        if record.window is not None:
            wrong |= {name: inputs.output() + other for name, other in
                      wrong_windows(frames, record.window, record.block).items()}
        cases.append((observed, reference, bound, wrong))
    if not cases:
        return Outcome("not reached", f"{where}: no additive mask recorded", paths)
    return graded(cases, paths, f"{where} shaw_key bias (the additive mask each attention is fed)")


def compare_shaw_key(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One layer's key terms: the next attention whose logits were recorded and that holds a table of the record's
    head width, else the logits of the layer's attention fed a table gathered outside the layers; a table of other
    rows than the record's is wrong (module docstring)."""
    site = next((s for s in sites if any(c.logits is not None for c in s.captures.values())
                 and _table(record, s, sites) is not None), None)
    if site is None:
        shared = _shared(record, run)
        if shared is not None:
            module, table = shared
            calls = {size: capture.calls[record.index] for size, capture in module.captures.items()
                     if record.index < len(capture.calls)}
            modules = ", ".join(sorted({c.module for c in calls.values()}))
            where = f"{module.path} read by {record.stack} layer {record.index} ({modules})"
            if record.term == "bias":
                return _graded_bias(record, run, table, calls, where, (module.path,))
            observed = [(size, call.output, np.arange(call.output.shape[-2]), call.input)
                        for size, call in calls.items()]
            return _graded(record, run, table, observed, where, (module.path,))
        inline = next((s for s in sites if any(p.ndim == 2 and p.shape[1] == record.table_width
                                                for p in s.params.values())), None)
        if inline is not None:
            return unrecorded(inline, sites, "the terms are added")
        return absent(run, f"no table of {record.rows} × {record.table_width} for {record.stack} layer "
                      f"{record.index}")
    siblings, table = _table(record, site, sites)
    observed = [(size, c.logits, c.logit_rows, c.query) for size, c in site.captures.items() if c.logits is not None]
    return _graded(record, run, table, observed, site.owner, tuple(s.path for s in siblings))


__all__ = ["compare_shaw_key"]
