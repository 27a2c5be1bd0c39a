"""Golden cases of the 1-D audio and time-series sinusoids (docs/sinusoid1d.md), one per form transformers models
add to the text sinusoid.

* ``sinusoid1d/whisper-…``: Whisper's table (tensor2tensor, ``[sin | cos]``) at probe positions up to 1499;
* ``sinusoid1d/musicgen-…``: ``[cos | sin]``; ``sinusoid1d/canary-…``: the paper's ω divided by √d;
* ``sinusoid1d/espnet-relative-…``: the interleaved table at the distances 39 … −39;
* ``sinusoid1d/timesfm-…``: timescales 2 … 5000 (base 2500, ω times 2);
* ``sinusoid1d/fairseq-padded-…``: :func:`refpos.encodings.sinusoid1d.padded_sinusoid` of a padded batch.

Exact values: mpmath at :data:`refpos.golden.certify.DIGITS` digits. Tolerance: the kind's bound per row
(refpos/encodings/sinusoid1d_mistakes.py) through :func:`refpos.golden.angle_entries.angle_entry`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.sinusoid1d_mistakes import Sinusoid1dInputs
from refpos.golden import certify as cert
from refpos.golden.angle_entries import angle_entry
from refpos.golden.cases import In, call
from refpos.golden.manifest import Case, Output

#: Whisper's probe positions: the first rows, powers of two and the last of its 1500 frames
WHISPER_PROBES = np.array([0, 1, 2, 3, 7, 8, 255, 256, 257, 1023, 1024, 1498, 1499], dtype=np.int64)


def mp_sinusoid(positions: np.ndarray, dim: int, spacing: str, layout: str, first: str, base: float,
                frequency_scale: float, amplitude: float) -> np.ndarray:
    """Exact rows ``a·(sin, cos)`` (or ``(cos, sin)``) of ``p·s·ω_k`` (docs/sinusoid1d.md#the-math)."""
    mp = cert.mp
    half = dim // 2
    omega = [mp.mpf(base) ** (-mp.mpf(2 * k) / dim) if spacing == "paper"
             else mp.exp(-k * mp.log(mp.mpf(base)) / max(half - 1, 1)) for k in range(half)]
    out = np.empty((*positions.shape, dim), dtype=object)
    for index in np.ndindex(positions.shape):
        for k, w in enumerate(omega):
            c, s = mp.cos_sin(mp.mpf(int(positions[index])) * mp.mpf(frequency_scale) * w)
            u, v = (s, c) if first == "sin" else (c, s)
            cols = (2 * k, 2 * k + 1) if layout == "interleaved" else (k, k + half)
            out[(*index, cols[0])], out[(*index, cols[1])] = mp.mpf(amplitude) * u, mp.mpf(amplitude) * v
    return out


def _row_entry(bound: np.ndarray, amplitude: float) -> dict[str, Any]:
    rows = np.asarray(bound, dtype=np.float64).reshape(-1, bound.shape[-2])
    return angle_entry(rows.max(axis=0), magnitude=amplitude)


def sinusoid1d_cases() -> list[Case]:
    """Every 1-D audio and time-series sinusoid case."""
    cases = []
    for name, variant, dim, inputs in [
        ("whisper-d64", "whisper", 64, {"positions": WHISPER_PROBES}),
        ("musicgen-d32", "musicgen", 32, {"positions": np.arange(0, 400, 37)}),
        ("canary-d64", "canary", 64, {"positions": np.arange(0, 512, 51)}),
        ("espnet-relative-l40-d32", "espnet_relative", 32, {"left": 39, "right": 39}),
        ("timesfm-d32-timescales-2-5000", "timesfm", 32, {"positions": np.arange(0, 100, 9), "base": 2500.0,
                                                          "frequency_scale": 2.0}),
    ]:
        case = Sinusoid1dInputs(variant, dim, inputs)
        kw, positions = case.keywords(), case.positions()
        table, bound = case.reference()
        settings = [dim, kw["spacing"], kw["layout"], kw["first"], kw["base"], kw.get("frequency_scale", 1.0),
                    kw["amplitude"]]
        cases.append(Case(
            f"sinusoid1d/{name}", "sinusoid1d", "sinusoid_1d",
            f"1-D sinusoid of {positions.size} positions from {int(positions[0])} to {int(positions[-1])}, dim {dim}, "
            f"{kw['spacing']} spacing, {kw['layout']}, {kw['first']} first, amplitude {kw['amplitude']:.6g}, ω times "
            f"{settings[5]:g} ({variant}; docs/sinusoid1d.md#the-math)",
            {"call": call("sinusoid_1d", ["table"], In("positions"), *settings)}, {"positions": positions},
            {"table": Output(table, _row_entry(bound, kw["amplitude"]),
                             lambda p=positions, s=settings: (mp_sinusoid(p, *s), 1.0))}))
    mask = np.ones((2, 10), dtype=bool)
    mask[0, 7:] = False
    mask[1, :2] = False
    case = Sinusoid1dInputs("fairseq_padded", 32, {"mask": mask, "padding_idx": 1})
    table, bound = case.reference()
    positions = case.positions()
    exact = lambda: (np.where(mask[..., None], mp_sinusoid(positions, 32, "tensor2tensor", "concat", "sin",  # noqa: E731
                                                            10000.0, 1.0, 1.0), cert.mp.mpf(0)), 1.0)
    cases.append(Case(
        "sinusoid1d/fairseq-padded-d32", "sinusoid1d", "padded_sinusoid",
        "fairseq's sinusoid of a batch padded on the right and on the left, padding_idx 1: real steps from 2, padded "
        "steps the zero row (Speech2Text; docs/sinusoid1d.md#the-math)",
        {"call": call("padded_sinusoid", ["table"], In("mask"), 32, 1, 0)}, {"mask": mask},
        {"table": Output(table, _row_entry(bound, 1.0), exact)}))
    return cases
