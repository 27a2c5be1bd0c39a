r"""The ``decomposed`` comparison: SAM's and ViTDet's per-axis tables read at each query–key offset, observed as
the logits the attention's softmax is fed with the key projection zero and every query the constant ``c``
(:mod:`survey.pixel_logits`).

Then ``q·kᵀ·scale = 0`` exactly and the logits of the first window (or of the whole grid, in a global layer) are
the terms ``c_h·R_h[idx(y, y')] + c_h·R_w[idx(x, x')]`` of each head ``h``, ``c_h`` the head's slice of the query
bias (heads in order, ``C`` channels each). The reference is the kind's ``refpos check decomposed`` target on
``attn = 0``, ``q = c`` at every patch and the layer's recorded ``rel_pos_h`` and ``rel_pos_w``, over the layer's
grid: its window, or the image's patch grid (the record's; at a resampled size the patches of the native size's
patch the image holds); its bound the terms' at the run's unit roundoff
(:func:`refpos.encodings.decomposed_mistakes.decomposed_tolerance`: the resampling, the stored tables, the ``C``
products and their sums). Adding the terms to the zero scores is exact, so nothing is added. Each catalogued mistake
that these inputs can show is computed from the same inputs and must be told apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, absent, check_target, graded, image_patch_grid, unrecorded
from survey.pixels import PixelRun, Site


def _tables(site: Site, sites: list[Site]) -> tuple[list[Site], np.ndarray, np.ndarray] | None:
    """The sites of ``site``'s attention module and its ``rel_pos_h``, ``rel_pos_w`` (float64)."""
    siblings = [s for s in sites if s.owner == site.owner]
    found = {name.rsplit(".", 1)[-1][-1]: p.astype(np.float64) for s in siblings for name, p in s.params.items()
             if p.ndim == 2 and name.rsplit(".", 1)[-1] in ("rel_pos_h", "rel_pos_w")}
    return (siblings, found["h"], found["w"]) if set(found) == {"h", "w"} else None


def _grid(record: Any, run: PixelRun, size: str, native_keys: int | None = None) -> tuple[int, int]:
    """The grid a layer attends over at ``size``: its window, or the patch grid of the image fed (the record's at
    the native size; at another, as many patches of the native size's patch as the image holds per side). A
    composite fed at another tower's image size (Unlimited-OCR's vision model, at its CLIP encoder's) attends over
    another grid at the native size than the record's: where the ``native_keys`` its global layer attends to are
    not the record's grid, the native grid is the image's patch grid of that many patches (the record's grid is
    then told by its tables' rows, :func:`_tables_fit`)."""
    if record.windowed:
        return record.grid
    base_grid = record.grid
    if native_keys is not None and native_keys != record.grid[0] * record.grid[1]:
        base_grid = image_patch_grid(native_keys, run.shapes["native"]) or record.grid
    if size == "native":
        return base_grid
    native, shape = run.shapes["native"][-2:], run.shapes[size][-2:]
    return tuple(grid * side // base for grid, side, base in zip(base_grid, shape, native, strict=True))


def _tables_fit(record: Any, rel_pos_h: np.ndarray, rel_pos_w: np.ndarray) -> bool:
    """Whether a layer's tables have the ``2g − 1`` rows per axis of the record's grid ``g`` (its window, or the
    native patch grid a global layer's tables are trained on)."""
    return (rel_pos_h.shape[0], rel_pos_w.shape[0]) == (2 * record.grid[0] - 1, 2 * record.grid[1] - 1)


def compare_decomposed(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One layer's decomposed terms: the next attention whose logits were recorded and that holds ``rel_pos_h``
    and ``rel_pos_w`` (module docstring)."""
    from refpos.check.kinds.decomposed import DecomposedLogits
    from refpos.encodings.decomposed_mistakes import DecomposedInputs, decomposed_tolerance

    site = next((s for s in sites if any(c.logits is not None for c in s.captures.values())
                 and _tables(s, sites) is not None), None)
    if site is None:
        inline = next((s for s in sites if "rel_pos" in s.path.rsplit(".", 1)[-1]), None)
        if inline is not None:
            return unrecorded(inline, sites, "the terms are added")
        return absent(run, f"no decomposed tables rel_pos_h, rel_pos_w for {record.stack} layer {record.index}")
    siblings, rel_pos_h, rel_pos_w = _tables(site, sites)
    paths = tuple(s.path for s in siblings)
    check = check_target("decomposed")
    cases = []
    for size, capture in site.captures.items():
        if capture.logits is None:
            continue
        width, heads = capture.logits.shape[-1], record.n_heads
        native = site.captures.get("native")
        keys = None if native is None or native.logits is None else native.logits.shape[-1]
        grid = _grid(record, run, size, keys)
        if grid != _grid(record, run, size) and not _tables_fit(record, rel_pos_h, rel_pos_w):
            return Outcome("wrong", f"{site.owner}: tables of {rel_pos_h.shape[0]} and {rel_pos_w.shape[0]} rows "
                           f"are not those of refpos's grid {record.grid}", paths)
        if (width != grid[0] * grid[1] or capture.logits.shape[0] < heads
                or capture.query.size != heads * record.head_dim):
            return Outcome("wrong", f"{site.owner}: logits {capture.logits.shape} at the {size} size (query of "
                           f"{capture.query.size}) are not {heads} heads of {record.head_dim} over a "
                           f"{'window' if record.windowed else 'patch grid'} of {grid}", paths)
        query = capture.query.astype(np.float64).reshape(heads, 1, record.head_dim)
        terms = DecomposedInputs(np.broadcast_to(query, (heads, width, record.head_dim)), rel_pos_h, rel_pos_w,
                                 grid, grid)
        inputs = DecomposedLogits(np.broadcast_to(np.float64(0.0), (heads, width, width)), terms)
        rows = capture.logit_rows
        wrong = {}
        for name in check.mistakes:  # each full (H, N, N), kept at the recorded rows only
            output = check.wrong(inputs, name)
            wrong[name] = None if output is None else np.asarray(output)[:, rows]
        reference = terms.terms()[:, rows]
        cases.append((capture.logits[:heads].astype(np.float64), reference, decomposed_tolerance(terms, run.dtype),
                      wrong))
    if not cases:
        return Outcome("not reached", f"{site.owner}: no logits recorded", paths)
    return graded(cases, paths, f"{site.owner} decomposed (the logits with the key projection zero)")
