r"""The catalogued mistakes of Fourier features, the kind's bound, and an identifier (docs/fourier.md#mistakes).

**Bound of SAM's features.** A correct port may compute in float32 (``u = 2⁻²⁴``). A prompt coordinate
``(x + 0.5)/W`` is two roundings, and ``2c − 1`` two more: at most ``6u`` for ``c ∈ [0, 1]`` (coordinates given in
``[0, 1]`` have only the last two). The product with ``G`` (``n`` rows) adds ``(n + 1)·u`` of ``Σ_i |(2c−1)_i G_ij|``,
and ``2π`` (stored, then multiplied) two more ulps: per channel

.. math:: |\Delta\varphi_j| \le 2\pi\,(n + 9)\,u\,\textstyle\sum_i |G_{ij}|

(taking ``|2c − 1| ≤ 1``); ``sin``/``cos`` add their evaluation and storage, ``3u``. With one ``u`` of margin:
``β = u·(2π·(n + 9)·max_j Σ_i |G_ij|·max(1, max|2c − 1|) + 4)``, one bound for the output.

**Bound of Perceiver's features.** The bands ``1 + k·(r/2 − 1)/(K − 1)`` (``torch.linspace``: three roundings) and
the positions (``linspace(−1, 1)``: three roundings, absolute ``3u``) carry ``3u`` each; the product with the band,
with π (stored) and the product: ``|Δθ| ≤ π·f_max·(3u·x_max + 3u + 3u·x_max + 3u) ≤ 12u·π·f_max`` for
``|x| ≤ 1``; ``sin``/``cos`` add ``3u``, the positions copied ``3u``: ``β = u·(12π·f_max·max(1, x_max) + 4)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from refpos.encodings.fourier import (
    fourier_features,
    perceiver_bands,
    perceiver_fourier_features,
    pixel_centre_coordinates,
)
from refpos.mistake_match import KindMistake, as_float64, identify_output

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24
#: what a call computes: SAM's features of given coordinates, of prompt points, or Perceiver's
INPUT_FORMS = ("sam", "sam_prompts", "perceiver")


@dataclass(frozen=True)
class FourierInputs:
    """One call: ``form`` ``"sam"`` (``coords`` in [0, 1], ``gaussian``), ``"sam_prompts"`` (``coords`` are pixel
    points, ``image_size`` (H, W), ``gaussian``) or ``"perceiver"`` (``coords`` the positions ``(M, N)``,
    ``num_bands``, ``max_resolution``, ``concat_pos``, ``sine_only``)."""

    form: str
    coords: np.ndarray
    gaussian: np.ndarray | None = None
    image_size: tuple[int, int] | None = None
    perceiver: dict[str, Any] = field(default_factory=dict)
    #: the steps a mistake changes -> their wrong value: ``centre`` (0.5), ``two_pi``, ``recentre`` (2c − 1),
    #: ``swap_size`` (H, W exchanged), ``pi`` and ``axis_major`` (Perceiver)
    changed: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.form not in INPUT_FORMS:
            raise ValueError(f"form must be one of {INPUT_FORMS}, got {self.form!r}")

    def output(self) -> np.ndarray:
        step = {"centre": 0.5, "two_pi": 2 * math.pi, "recentre": True, "pi": math.pi, "axis_major": True,
                "swap_size": False, **self.changed}
        if self.form == "perceiver":
            return _perceiver(self.coords, step["pi"], step["axis_major"], **self.perceiver)
        coords = as_float64(self.coords)
        if self.form == "sam_prompts":
            h, w = self.image_size if not step["swap_size"] else self.image_size[::-1]
            coords = as_float64(pixel_centre_coordinates(coords + (step["centre"] - 0.5), (h, w)))
        if step["recentre"] and step["two_pi"] == 2 * math.pi:
            return as_float64(fourier_features(coords, self.gaussian))
        phases = step["two_pi"] * ((2.0 * coords - 1.0 if step["recentre"] else coords) @ self.gaussian)
        return np.concatenate([np.sin(phases), np.cos(phases)], axis=-1)

    def bound(self) -> np.ndarray:
        if self.form == "perceiver":
            bands = as_float64(perceiver_bands(self.perceiver["num_bands"], self.perceiver["max_resolution"], xp=np))
            x_max = max(1.0, float(np.abs(as_float64(self.coords)).max(initial=0.0)))
            return np.asarray(U32 * (12 * math.pi * float(bands.max()) * x_max + 4))
        g = np.abs(as_float64(self.gaussian)).sum(axis=0).max()
        coords = as_float64(self.coords) if self.form == "sam" else \
            as_float64(pixel_centre_coordinates(self.coords, self.image_size))
        extent = max(1.0, float(np.abs(2 * coords - 1).max(initial=0.0)))
        return np.asarray(U32 * (2 * math.pi * (self.gaussian.shape[0] + 9) * g * extent + 4))

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        return self.output(), self.bound()


def _perceiver(positions: Any, pi: float, axis_major: bool, *, num_bands: int, max_resolution: Any,
               concat_pos: bool, sine_only: bool) -> np.ndarray:
    if pi == math.pi and axis_major:
        return as_float64(perceiver_fourier_features(as_float64(positions), num_bands, max_resolution,
                                                     concat_pos=concat_pos, sine_only=sine_only))
    x = as_float64(positions)
    bands = as_float64(perceiver_bands(num_bands, max_resolution, xp=np))  # (N, K)
    per = x[:, :, None] * bands  # (M, N, K)
    angles = pi * (per if axis_major else np.swapaxes(per, 1, 2)).reshape(x.shape[0], -1)
    return np.concatenate(([x] if concat_pos else []) + [np.sin(angles)] + ([] if sine_only else [np.cos(angles)]),
                          axis=-1)


def _changed(inputs: FourierInputs, **changes: Any) -> tuple[np.ndarray, np.ndarray]:
    wrong = replace(inputs, changed={**inputs.changed, **changes})
    return wrong.output(), inputs.bound()


def _swap_halves(inputs: FourierInputs) -> tuple[np.ndarray, np.ndarray] | None:
    out, bound = inputs.reference()
    if inputs.form == "perceiver":
        if inputs.perceiver["sine_only"]:
            return None
        lead = as_float64(inputs.coords).shape[1] if inputs.perceiver["concat_pos"] else 0  # the copied positions
        body = out[:, lead:]
        return np.concatenate([out[:, :lead], np.roll(body, body.shape[1] // 2, axis=1)], axis=1), bound
    return np.roll(out, out.shape[-1] // 2, axis=-1), bound


def _interleaved(inputs: FourierInputs) -> tuple[np.ndarray, np.ndarray] | None:
    if inputs.form == "perceiver":
        return None
    out, bound = inputs.reference()
    m = out.shape[-1] // 2
    return np.stack([out[..., :m], out[..., m:]], axis=-1).reshape(out.shape), bound


def _sam(make: Any) -> Any:
    return lambda inputs: make(inputs) if inputs.form != "perceiver" else None


FOURIER_MISTAKES: tuple[KindMistake, ...] = (
    KindMistake("recentring_missing", "coordinates used in [0, 1]: the 2c − 1 that maps them to [−1, 1] missing",
                _sam(lambda i: _changed(i, recentre=False))),
    KindMistake("two_pi_missing", "the phases c·G without the factor 2π", _sam(lambda i: _changed(i, two_pi=1.0))),
    KindMistake("pi_missing", "Perceiver's phases f·x without the factor π",
                lambda i: _changed(i, pi=1.0) if i.form == "perceiver" else None),
    KindMistake("sin_cos_swapped", "[cos | sin] instead of [sin | cos]", _swap_halves),
    KindMistake("interleaved_layout", "sines and cosines interleaved where SAM concatenates them", _interleaved),
    KindMistake("xy_swapped", "the coordinates given (y, x): G's rows read the wrong axis",
                _sam(lambda i: (replace(i, coords=as_float64(i.coords)[..., ::-1]).output(), i.bound()))),
    KindMistake("pixel_centre_missing", "prompt points used without SAM's + 0.5 (the pixel centre)",
                lambda i: _changed(i, centre=0.0) if i.form == "sam_prompts" else None),
    KindMistake("image_size_swapped", "x divided by the height and y by the width",
                lambda i: _changed(i, swap_size=True) if i.form == "sam_prompts" and i.image_size[0] != i.image_size[1]
                else None),
    KindMistake("bands_band_major", "Perceiver's features listed band by band instead of axis by axis",
                lambda i: _changed(i, axis_major=False) if i.form == "perceiver" and as_float64(i.coords).shape[1] > 1
                else None),
)


def identify_fourier(candidate: Any, inputs: FourierInputs) -> str | None:
    """The catalogued mistake ``candidate`` matches, or ``None`` (a correct port, or an output no mistake explains)."""
    return identify_output(candidate, inputs.reference(), FOURIER_MISTAKES, inputs)
