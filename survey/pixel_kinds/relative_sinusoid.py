r"""The ``sinusoid1d`` comparison of a relative table (``at = "relative"``): the sinusoid of signed distances a
Conformer's attention layers read (Transformer-XL's relative terms: wav2vec2-Conformer, Parakeet, Nemotron's
streaming encoder).

What is observed, at each input size:

* the position module's output ``(1, 2T − 1, d)``: a module site outside the layers, fed the ``T`` frames,
  whose output has ``d`` columns (``Wav2Vec2ConformerRelPositionalEmbedding``,
  ``ParakeetEncoderRelPositionalEncoding``), the table at distances ``left … −right`` with
  ``left = right = T − 1`` (the variant's inputs where refpos's record states them);
* the table each layer reads, where a position module of that layer records its input (wav2vec2-Conformer's
  ``linear_pos``, the projection of the table into the layer's relative keys): the same rows again.

Both are compared with refpos's table from the kind's ``refpos check`` target
(:mod:`refpos.encodings.sinusoid1d_mistakes`) within its bound, the table of a float32 port:
``β_p = |a|·u·((8 + ln base)·|p|·s + 4)`` per row ``p`` at ``u = 2⁻²⁴``. These models build the table in
float32 whatever dtype they run in (a float32 buffer, or angles taken ``.float()``), and a float64 value of a
float32 table differs from the exact one by that much. The kind's catalogued mistakes (sin and cos swapped, the
layout, the frequency spacing, the distances' order reversed, their sign dropped) are the wrong answers each
observation must tell apart.

The layer's other position-named weights (Transformer-XL's learned biases ``pos_bias_u`` and ``pos_bias_v`` of the
content and position terms) are weights of the attention that reads the table, not a table of positions: they are
accounted to the layer's record and not compared.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, check_target, graded, mistakes_of
from survey.pixels import PixelRun, Site

#: a path inside attention layer ``i``: ``….layers.{i}.…``
LAYER = re.compile(r"(^|\.)layers?\.(\d+)\.")


def _layer_of(path: str) -> int | None:
    match = LAYER.search(path + ".")
    return None if match is None else int(match.group(2))


def _spans(record: Any, frames: int) -> dict[str, int]:
    """``left`` and ``right`` of the table for ``frames`` keys: the record's, else ``T − 1`` each."""
    settings = dict(record.settings)
    return {"left": settings.get("left", frames - 1), "right": settings.get("right", frames - 1)}


def _position_module(record: Any, run: PixelRun) -> Site | None:
    """The module outside the layers, fed the frames, whose output is ``left + right + 1`` rows of ``record.dim``
    columns at every size."""
    def fits(capture: Any) -> bool:
        if capture.module_in is None or capture.module_out is None or capture.module_out.ndim != 3:
            return False
        spans = _spans(record, capture.module_in.shape[1])
        return capture.module_out.shape[1:] == (spans["left"] + spans["right"] + 1, record.dim)

    return next((site for site in run.sites if site.is_module and _layer_of(site.path) is None and site.captures
                 and all(map(fits, site.captures.values()))), None)


def _reference(record: Any, frames: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """refpos's check inputs, table and bound for ``frames`` keys (module docstring)."""
    from refpos.encodings.sinusoid1d_mistakes import Sinusoid1dInputs

    settings = {k: v for k, v in dict(record.settings).items() if k not in ("left", "right")}
    spans = _spans(record, frames)
    inputs = Sinusoid1dInputs(record.variant, record.dim, {**spans, **settings})
    reference, bound = check_target("sinusoid1d").reference(inputs)
    return inputs, np.asarray(reference, dtype=np.float64), np.asarray(bound, dtype=np.float64)


def compare_relative_sinusoid(record: Any, run: PixelRun, sites: list[Site]) -> Outcome:
    """One layer's relative table: the position module's output and the table the layer reads (module
    docstring)."""
    module = _position_module(record, run)
    if module is None:
        return Outcome("wrong", f"{record.stack} layer {record.index}: no position module whose output is a table "
                       f"of {record.dim} columns at distances T − 1 … −(T − 1) for T frames (sites: "
                       f"{', '.join(s.path for s in run.sites) or 'none'})")
    own = [s for s in sites if _layer_of(s.path) == record.index]
    cases = []
    for size, capture in module.captures.items():
        inputs, reference, bound = _reference(record, capture.module_in.shape[1])
        wrong = mistakes_of("sinusoid1d", inputs)
        cases.append((capture.module_out[0].astype(np.float64), reference, bound, wrong))
        for site in own:  # the table this layer reads (its projection's input)
            read = site.captures.get(size)
            if read is not None and read.module_in is not None:
                cases.append((read.module_in[0].astype(np.float64), reference, bound, wrong))
    return graded(cases, (module.path, *(s.path for s in own)),
                  f"{record.stack} layer {record.index} sinusoid1d ({module.path})")
