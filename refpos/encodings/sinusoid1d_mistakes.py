r"""The catalogued mistakes of the 1-D audio and time-series sinusoids, the kind's bound, and an identifier
(docs/sinusoid1d.md#mistakes).

**Bound.** A correct port may compute in float32 (``u = 2⁻²⁴``). The angle ``θ = p·s·ω_k`` of row ``p`` carries the
frequency's rounding — ``ω = exp(−k·Δ)`` or ``base^(−2k/d)`` with ``Δ`` or the exponent rounded (``u·ln(base)``
relative at most), the ``exp`` or power within two ulps, ``s·ω`` one more — and the product's, so
``|Δθ| ≤ (4 + ln base)·u·|p|·s`` (``θ ≤ |p|·s`` since ``ω ≤ 1``); ``sin``/``cos`` and the amplitude add ``4u``. With a
margin of ``4u·|p|·s``: per row ``β_p = |a|·u·((8 + ln base)·|p|·s + 4)``.

A **standardised** table (PatchTST) ``P' = (P − μ)/(10σ)`` of ``N`` entries within ``e`` each: the mean is off by
``δμ ≤ e + N·u·max|P|`` (a sum of ``N`` terms), the deviation by ``δσ/σ ≤ (e + δμ)/σ + N·u``, so
``|ΔP'| ≤ (e + δμ)/(10σ) + |P'|·δσ/σ`` with ``e`` the largest ``β_p``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from refpos.encodings.sinusoid1d import padded_positions, relative_positions, sinusoid_1d, standardized
from refpos.encodings.sinusoid1d_variants import SinusoidVariant, sinusoid1d_variant
from refpos.mistake_match import KindMistake, as_float64, identify_output

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24


@dataclass(frozen=True)
class Sinusoid1dInputs:
    """One call of a variant: its name (or its record), the width and :meth:`SinusoidVariant.build`'s inputs."""

    variant: str | SinusoidVariant
    dim: int
    inputs: dict[str, Any]
    #: steps a mistake changes: sinusoid_1d keywords, ``positions`` (an array), ``zero_row`` (bool),
    #: ``standardize`` (None, ``"unbiased"`` or ``"biased"``)
    changed: dict[str, Any] = field(default_factory=dict)

    @property
    def record(self) -> SinusoidVariant:
        return self.variant if isinstance(self.variant, SinusoidVariant) else sinusoid1d_variant(self.variant)

    def positions(self) -> np.ndarray:
        if "positions" in self.changed:
            return as_float64(self.changed["positions"]).astype(np.int64)
        source = self.record.positions
        if source == "given":
            return np.asarray(self.inputs["positions"], dtype=np.int64)
        if source == "relative":
            return as_float64(relative_positions(self.inputs["left"], self.inputs["right"], xp=np)).astype(np.int64)
        return as_float64(padded_positions(np.asarray(self.inputs["mask"]), self.inputs["padding_idx"],
                                           past=self.inputs.get("past", 0))).astype(np.int64)

    def keywords(self) -> dict[str, Any]:
        record = self.record
        amplitude = {"one": 1.0, "inverse_sqrt_dim": self.dim ** -0.5}.get(record.amplitude,
                                                                          self.inputs.get("amplitude"))
        options = {k: self.inputs[k] for k in record.config_keys if k in self.inputs}
        keywords = {"spacing": "paper", "layout": "concat", "first": "sin", "base": 10000.0, "amplitude": amplitude}
        return {**keywords, **record.parameters, **options, **{k: v for k, v in self.changed.items()
                                                                 if k in keywords or k == "frequency_scale"}}

    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        """The table and its per-row bound ``(..., T, 1)`` before any standardising."""
        kw, p = self.keywords(), self.positions()
        table = as_float64(sinusoid_1d(p, self.dim, **kw))
        if self.record.positions == "padded" and self.changed.get("zero_row", True):
            table = np.where(np.asarray(self.inputs["mask"], dtype=bool)[..., None], table, 0.0)  # padded: row 0
        scale = kw.get("frequency_scale", 1.0)
        bound = abs(kw["amplitude"]) * U32 * ((8 + math.log(kw["base"])) * np.abs(p) * scale + 4)
        return table, bound[..., None]

    def output(self) -> np.ndarray:
        return self.reference()[0]

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        table, bound = self._table()
        how = self.changed.get("standardize", "unbiased" if self.record.standardize else None)
        if how is None:
            return table, bound
        n, e = table.size, float(bound.max())
        if how == "unbiased":
            out = as_float64(standardized(table))
        else:
            out = (table - table.mean()) / (10 * table.std())
        sigma = table.std(ddof=1)
        d_mu = e + n * U32 * np.abs(table).max()
        d_sigma = (e + d_mu) / sigma + n * U32
        return out, np.asarray((e + d_mu) / (10 * sigma) + np.abs(out).max() * d_sigma)


def _when(test: Any, **changes: Any) -> Any:
    """The mistake that changes ``changes`` (values may be functions of the inputs) where ``test(inputs)`` holds."""
    def compute(inputs: Sinusoid1dInputs) -> tuple[np.ndarray, np.ndarray] | None:
        if not test(inputs):
            return None
        values = {k: v(inputs) if callable(v) else v for k, v in changes.items()}
        return replace(inputs, changed={**inputs.changed, **values}).reference()
    return compute


def _param(inputs: Sinusoid1dInputs, key: str) -> Any:
    return inputs.keywords()[key]


def _padded(inputs: Sinusoid1dInputs) -> bool:
    return inputs.record.positions == "padded"


SINUSOID1D_MISTAKES: tuple[KindMistake, ...] = (
    KindMistake("sin_cos_swapped", "the pair written (cos, sin) where the model writes (sin, cos), or the reverse "
                "(Musicgen's [cos | sin])",
                _when(lambda i: True, first=lambda i: "cos" if _param(i, "first") == "sin" else "sin")),
    KindMistake("layout_swapped", "sines and cosines interleaved where they are concatenated, or the reverse",
                _when(lambda i: True, layout=lambda i: "interleaved" if _param(i, "layout") == "concat"
                      else "concat")),
    KindMistake("increment_over_half_dim", "Whisper's log-timescale increment ln(base)/(d/2 − 1) taken over d/2: the "
                "paper's frequencies", _when(lambda i: _param(i, "spacing") == "tensor2tensor", spacing="paper")),
    KindMistake("increment_over_half_dim_minus_one", "the paper's base^(−2k/d) computed with Whisper's increment "
                "over d/2 − 1", _when(lambda i: _param(i, "spacing") == "paper", spacing="tensor2tensor")),
    KindMistake("amplitude_missing", "Canary's 1/√d (or SpeechT5's α) left out",
                _when(lambda i: _param(i, "amplitude") != 1.0, amplitude=1.0)),
    KindMistake("frequency_scale_inverted", "TimesFM's min_timescale dividing ω instead of multiplying it",
                _when(lambda i: _param(i, "frequency_scale") != 1.0 if "frequency_scale" in i.keywords() else False,
                      frequency_scale=lambda i: 1.0 / _param(i, "frequency_scale"))),
    KindMistake("relative_order_reversed", "a relative table listed from −right up to left instead of left down to "
                "−right", _when(lambda i: i.record.positions == "relative" and i.positions().size > 1,
                                positions=lambda i: i.positions()[::-1])),
    KindMistake("relative_sign_dropped", "the negative distances encoded as positive ones (sin not negated)",
                _when(lambda i: i.record.positions == "relative" and bool((i.positions() < 0).any()),
                      positions=lambda i: np.abs(i.positions()))),
    KindMistake("padding_ignored", "positions from the step index: padding_idx + 1 + t, the mask's cumulative sum "
                "ignored", _when(lambda i: _padded(i) and not bool(np.all(np.asarray(i.inputs["mask"]))),
                                 positions=lambda i: i.inputs["padding_idx"] + i.inputs.get("past", 0) + 1
                                 + np.broadcast_to(np.arange(np.shape(i.inputs["mask"])[-1]),
                                                   np.shape(i.inputs["mask"])))),
    KindMistake("padding_offset_missing", "fairseq's positions counted from 0 (the text convention) instead of "
                "padding_idx + 1", _when(_padded, positions=lambda i: np.maximum(
                    i.positions() - i.inputs["padding_idx"] - 1, 0))),
    KindMistake("padding_row_not_zero", "padded steps read the sinusoid of padding_idx instead of the zero row",
                _when(lambda i: _padded(i) and not bool(np.all(np.asarray(i.inputs["mask"]))), zero_row=False)),
    KindMistake("not_standardized", "PatchTST's table used without its standardisation",
                _when(lambda i: i.record.standardize, standardize=None)),
    KindMistake("std_biased", "PatchTST's deviation with 1/N (NumPy's default) instead of torch's 1/(N − 1)",
                _when(lambda i: i.record.standardize, standardize="biased")),
)


def identify_sinusoid1d(candidate: Any, inputs: Sinusoid1dInputs) -> str | None:
    """The catalogued mistake ``candidate`` matches, or ``None`` (a correct port, or an output no mistake explains)."""
    return identify_output(candidate, inputs.reference(), SINUSOID1D_MISTAKES, inputs)
