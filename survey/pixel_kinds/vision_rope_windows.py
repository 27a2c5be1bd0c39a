r"""The ``vision_rope`` comparison of a tower whose layers rotate at positions of their own: SAM 3's ViT, whose
windowed layers rotate each window's patches at their place in the window and whose global layers rotate every
patch of the config's grid at its row and column times ``window_size / G`` (the record's ``window``, or its
``grid`` and ``scale``: :func:`refpos.models.kinds.vision_rope.tower_windows`).

Each layer holds its positions in a buffer (``layers.<i>.position_ids``, ``(N, 2)`` in the order ``(w, h)``, float32)
that its rotary module turns into the cos and sin tables, so a layer is judged twice:

* **its positions**: the buffer against the record's
  (:meth:`~refpos.models.kinds.vision_rope.VisionRopeLayer.patch_positions`), within
  :math:`3\epsilon\,|p|` (the scale ``window_size / G`` rounded to float32, the product, the store; a window's
  integer positions are exact). Wrong answers: the row and column swapped, positions from 1, a global layer's patch
  indices unscaled;
* **its rotation**, at every rotary call the run kept whose tokens are the layer's (the run keeps the first call of
  each query shape at each size: the first windowed layer's, whose first window it records, and the first global
  layer's, the whole grid): the query and key
  after against :func:`refpos.rope.vision.apply_vision_rope` of the query and key before at the record's
  positions, within the bound of :mod:`survey.pixel_kinds.vision_rope`, the coordinate's relative error
  :math:`2\epsilon` carried as :math:`2/(K + 1)` more of the ``K + 1`` roundings the bound counts. Wrong
  answers: Qwen2-VL's, Pixtral's, Step 3.5's and Kimi K2.5's forms at the patch indices (and Llama 4's, where the
  layer scales them: at a window's integer positions it is SAM 3's own), the row and column swapped, positions
  from 1, θ = 10000 where the claim's differs, and no rotation.

A layer none of whose calls was kept is judged by its buffer alone: every layer's rotary module is the same code
(``Sam3ViTRotaryEmbedding`` on the layer's buffer), whose rotation the compared layers show.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.rope.vision import VisionRope, apply_vision_rope
from survey.pixel_kinds.base import Outcome, graded
from survey.pixel_kinds.vision_rope import FORMS, claim_and_bound, rotary_calls
from survey.pixels import PixelRun
from survey.rotation import RULE_ROUNDINGS

EPS32 = 2.0**-24
#: the float32 roundings of a scaled coordinate (the scale, the product) and of its store
BUFFER_ROUNDINGS = 3


def buffer_of(record: Any, run: PixelRun) -> tuple[np.ndarray, str] | None:
    """``((N, 2) positions (h, w), site path)`` of the layer's position buffer among the run's sites (the one path
    ending in ``layers.<index>.position_ids``), or ``None``."""
    suffix = f"layers.{record.index}.position_ids"
    found = [(site.path, value) for site in run.sites if site.path.endswith(suffix)
             for name, value in site.params.items() if name.endswith(suffix) and value.ndim == 2
             and value.shape[-1] == 2]
    if len(found) != 1:
        return None
    path, value = found[0]
    return np.asarray(value, dtype=np.float64)[:, ::-1].copy(), path  # stored (w, h)


def _buffer_case(record: Any, own: np.ndarray, stored: np.ndarray) -> tuple:
    """The positions case of the module docstring."""
    wrong = {"row and column swapped": own[:, ::-1].copy(), "positions from 1": own + 1.0,
             "patch indices, not scaled": None if record.window or record.scale == 1.0 else own / record.scale}
    return stored, own, BUFFER_ROUNDINGS * EPS32 * np.abs(own), wrong


def call_mutants(rope: VisionRope, positions: np.ndarray, scaled: bool) -> dict[str, tuple[VisionRope, np.ndarray]]:
    """The rotation's wrong answers of the module docstring, each ``(rope, positions)``."""
    index = np.rint(positions / positions[1, 1]).astype(np.int64) if len(positions) > 1 else \
        np.zeros_like(positions, dtype=np.int64)  # the patch indices (positions[1] = (0, scale))
    out = {f"the {form} form at the patch indices": (VisionRope(form, rope.head_dim, rope.theta), index)
           for form in FORMS if scaled or form != "llama4"}
    out["row and column swapped"] = (rope, positions[:, ::-1].copy())
    out["positions from 1"] = (rope, positions + 1.0)
    if rope.theta != 10000.0:
        out["θ = 10000"] = (VisionRope(rope.kind, rope.head_dim, 10000.0), positions)
    return out


def compare_windows(record: Any, run: PixelRun, accounted: tuple[str, ...]) -> Outcome:
    """A layer's positions buffer and its kept rotary calls against the record (module docstring)."""
    rope: VisionRope = record.rope
    own = record.patch_positions()  # the window's places, or the fixed grid's scaled
    buffer = buffer_of(record, run)
    if buffer is None:
        return Outcome("not reached", f"{record.stack} layer {record.index}: no position buffer "
                       f"layers.{record.index}.position_ids among the run's sites", accounted)
    stored, path = buffer
    accounted += (path,)
    cases = [_buffer_case(record, own, stored)]
    observed = rotary_calls(run, rope.head_dim)
    if isinstance(observed, str):
        status, _, cause = observed.partition(": ")
        return Outcome(status, cause if status == "wrong" else f"{record.stack}: {cause}", accounted)
    scaled = record.scale != 1.0
    relative = 2.0 / (RULE_ROUNDINGS + 1) if scaled else 0.0  # 2ε of the coordinate as more roundings
    for _, _, x, y in observed:
        if x.shape[0] != len(own):
            continue  # another layer kind's call
        claim, bound = claim_and_bound(rope, x, own, np.zeros((0, rope.head_dim // 2)), relative)
        wrong = {name: np.asarray(apply_vision_rope(x, at, form))
                 for name, (form, at) in call_mutants(rope, own, scaled).items()}
        wrong["no rotation"] = x
        cases.append((y, claim, bound, wrong))
    label = f"{record.stack} layer {record.index} vision_rope({rope.kind}, " + (
        f"window {record.window})" if record.window else f"grid {record.grid} × {record.scale:.6g})")
    return graded(cases, accounted, label)
