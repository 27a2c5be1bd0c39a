r"""The catalogued mistakes of fixed 2-D sin–cos embeddings, the kind's bound, and an identifier
(docs/sincos2d.md#mistakes).

**Bound.** A correct port may compute in float32 (``u = 2⁻²⁴``). Every entry is ``sin θ`` or ``cos θ`` of an angle
``θ = c·ω``; the port's angle carries

* the coordinate's rounding: a normalised count ``(c + o)/(c_last + ε)·s`` is four roundings (the sum, the
  division, the product, and ``s = 2π`` itself stored), ``4u·|θ|``; grid indices and counts are exact;
* the frequency's: ``ω = T^(−e)`` with the exponent ``e`` rounded (``u·e·ln T ≤ u·ln T`` relative) and the power
  (or ``exp``) within two ulps, ``(ln T + 2)·u·|θ|``;
* the angle's own product or division, ``u·|θ|``;

so ``|Δθ| ≤ (7 + ln T)·u·|θ|``, and ``sin``/``cos`` (1-Lipschitz) add their evaluation and storage, ``2u + u``.
With a margin of one ``u·|θ|`` and one ``u``: :math:`\beta = u\,\bigl((8 + \ln T)\,\theta_{max} + 4\bigr)` with
``θ_max`` the largest angle of a token, pixel or point (its largest coordinate: ω₀ = 1). A pixel of a column the
mask pads entirely has ``c_last = 0``: DETR's coordinate ``0/ε`` is 0, Deformable DETR's ``−0.5/ε·2π ≈ −3·10⁶``, where
a float32 angle has no correct digit and the bound says so.

A mistake is the same computation with one step changed: its output is matched within the bound of its own largest
angle and temperature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from refpos.encodings.sincos2d import TWO_PI, mask_coordinates
from refpos.encodings.sincos2d_variants import BUILDERS, SineVariant, sincos2d_variant
from refpos.mistake_match import KindMistake, as_float64, identify_output
from refpos.pairs import layout_permutation

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24


@dataclass(frozen=True)
class Sincos2dInputs:
    """One call of a variant: its name (or its record) and the builder's inputs (sizes, mask or coordinates;
    config keywords)."""

    variant: str | SineVariant
    inputs: dict[str, Any]
    #: keywords changed from the variant's (what a mistake does)
    changed: dict[str, Any] = field(default_factory=dict)

    @property
    def record(self) -> SineVariant:
        return self.variant if isinstance(self.variant, SineVariant) else sincos2d_variant(self.variant)

    def keywords(self) -> dict[str, Any]:
        """Everything the builder is called with."""
        return {**self.inputs, **self.record.parameters, **self.changed}

    def output(self) -> np.ndarray:
        return as_float64(BUILDERS[self.record.builder](**self.keywords()))

    def bound(self) -> np.ndarray:
        """The module docstring's ``β``, per token (grid), pixel (mask) or point (coordinates): ``(..., 1)``."""
        kw, builder = self.keywords(), self.record.builder
        temperature = kw.get("temperature", 10000.0)
        log_t = math.log(max(temperature) if isinstance(temperature, tuple) else temperature)
        if builder == "grid":
            theta = np.full((kw["cls_rows"] + kw["height"] * kw["width"], 1), max(kw["height"], kw["width"]) - 1.0)
        elif builder == "mask":
            y, x = (as_float64(c) for c in mask_coordinates(kw["mask"], normalize=kw["normalize"],
                                                            scale=kw.get("scale"), offset=kw.get("offset", 0.0),
                                                            eps=kw.get("eps", 1e-6)))
            theta = np.maximum(np.abs(y), np.abs(x))[..., None]
        else:
            theta = np.abs(as_float64(kw["coords"])).max(axis=-1, keepdims=True) * kw["scale"]
        return U32 * ((8.0 + log_t) * theta + 4.0)

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        return self.output(), self.bound()


def _changed(inputs: Sincos2dInputs, **changes: Any) -> tuple[np.ndarray, np.ndarray]:
    wrong = replace(inputs, changed={**inputs.changed, **changes})
    return wrong.output(), wrong.bound()


def _block_width(inputs: Sincos2dInputs) -> int:
    kw = inputs.keywords()
    return kw["dim"] // 2 if inputs.record.builder == "grid" else kw["num_features"]


def _per_block(inputs: Sincos2dInputs, change: Any) -> tuple[np.ndarray, np.ndarray]:
    """The reference with ``change`` applied to each block of channels (one axis or coordinate)."""
    out, bound = inputs.reference()
    width = _block_width(inputs)
    blocks = out[..., : out.shape[-1] // width * width].reshape(*out.shape[:-1], -1, width)
    return change(blocks).reshape(out.shape), bound


def _layout(inputs: Sincos2dInputs) -> str:
    return {"grid": "concat", "mask": "interleaved"}.get(inputs.record.builder) or inputs.keywords()["layout"]


def _sin_cos_swapped(inputs: Sincos2dInputs) -> tuple[np.ndarray, np.ndarray]:
    width, layout = _block_width(inputs), _layout(inputs)
    swap = (np.arange(width) ^ 1) if layout == "interleaved" else np.roll(np.arange(width), width // 2)
    return _per_block(inputs, lambda b: b[..., swap])


def _other_layout(inputs: Sincos2dInputs) -> tuple[np.ndarray, np.ndarray] | None:
    if inputs.record.builder == "coordinates":
        return _changed(inputs, layout="concat" if _layout(inputs) == "interleaved" else "interleaved")
    layout = _layout(inputs)
    perm = np.asarray(layout_permutation(_block_width(inputs), layout, "concat" if layout == "interleaved"
                                         else "interleaved", xp=np))
    return _per_block(inputs, lambda b: b[..., perm])


def _axes_swapped(inputs: Sincos2dInputs) -> tuple[np.ndarray, np.ndarray] | None:
    builder, kw = inputs.record.builder, inputs.keywords()
    if builder == "grid":
        return _changed(inputs, axes="yx" if kw["axes"] == "xy" else "xy")
    if builder == "mask":
        return _per_block(inputs, lambda b: b[..., ::-1, :])
    if kw["coords"].shape[-1] < 2:
        return None
    return _changed(inputs, swap_xy=not kw["swap_xy"])


def _when(test: Any, make: Any) -> Any:
    """``make(inputs)`` where ``test(keywords, builder)`` holds, else ``None``."""
    return lambda inputs: make(inputs) if test(inputs.keywords(), inputs.record.builder) else None


def _is(*builders: str) -> Any:
    return lambda kw, b: b in builders


SINCOS2D_MISTAKES: tuple[KindMistake, ...] = (
    KindMistake("axes_swapped", "the two axes' channel blocks exchanged: x before y (DETR, anchors) or y before x",
                _axes_swapped),
    KindMistake("flatten_swapped", "a grid's tokens listed column by column instead of row by row, or the reverse",
                _when(_is("grid"), lambda i: _changed(i, flatten="row_major" if i.keywords()["flatten"]
                                                      == "column_major" else "column_major"))),
    KindMistake("sin_cos_swapped", "cosine where the sine goes in each pair: [cos | sin] or (cos, sin)",
                _sin_cos_swapped),
    KindMistake("layout_swapped", "sines and cosines interleaved where they are concatenated, or the reverse",
                _other_layout),
    KindMistake("cls_row_missing", "the class token's zero row left out of the table",
                _when(lambda kw, b: b == "grid" and kw["cls_rows"] > 0, lambda i: _changed(i, cls_rows=0))),
    KindMistake("frequencies_over_full_dim", "MAE's ω_j = T^(−j/(dim/4)) spaced over dim/2 instead (the half-dimension "
                "per axis forgotten)", _when(_is("grid"), lambda i: _changed(
                    i, temperature=math.sqrt(i.keywords().get("temperature", 10000.0))))),
    KindMistake("temperature_default", "the temperature of the config ignored: 10000 used",
                _when(lambda kw, b: kw.get("temperature", 10000.0) not in (10000, (10000, 10000)),
                      lambda i: _changed(i, temperature=10000.0))),
    KindMistake("temperature_axes_swapped", "DAB-DETR's per-axis temperatures exchanged: T_x on y, T_y on x",
                _when(lambda kw, b: isinstance(kw.get("temperature"), tuple) and len(set(kw["temperature"])) == 2,
                      lambda i: _changed(i, temperature=tuple(reversed(i.keywords()["temperature"]))))),
    KindMistake("not_normalized", "the mask's counts used as they are: normalize and scale missing",
                _when(lambda kw, b: b == "mask" and kw["normalize"],
                      lambda i: _changed(i, normalize=False, scale=None, offset=0.0))),
    KindMistake("scale_missing", "coordinates normalised to [0, 1] or left there, the 2π scale missing",
                _when(lambda kw, b: b in ("mask", "coordinates") and kw.get("normalize", True)
                      and kw.get("scale") not in (1.0,), lambda i: _changed(i, scale=1.0))),
    KindMistake("scale_added", "SAM 2's pointer offsets multiplied by 2π, which it does not do",
                _when(lambda kw, b: b == "coordinates" and kw["scale"] == 1.0, lambda i: _changed(i, scale=TWO_PI))),
    KindMistake("offset_missing", "Deformable DETR's −0.5 left out of the counts before normalising",
                _when(lambda kw, b: b == "mask" and kw.get("offset", 0.0) != 0.0, lambda i: _changed(i, offset=0.0))),
    KindMistake("offset_added", "Deformable DETR's −0.5 taken from the counts of a model that does not",
                _when(lambda kw, b: b == "mask" and kw["normalize"] and kw.get("offset", 0.0) == 0.0,
                      lambda i: _changed(i, offset=-0.5))),
    KindMistake("zero_based_counts", "counts from 0 (arange(H)) instead of the cumulative sum's 1",
                _when(lambda kw, b: b == "mask" and kw["normalize"],
                      lambda i: _changed(i, offset=i.keywords().get("offset", 0.0) - 1.0))),
    KindMistake("mask_ignored", "positions from the pixel index: the padding mask's cumulative sum ignored",
                _when(lambda kw, b: b == "mask" and not bool(np.all(as_float64(kw["mask"]))),
                      lambda i: _changed(i, mask=np.ones(as_float64(i.inputs["mask"]).shape, dtype=bool)))),
    KindMistake("frequencies_paired", "SAM 2's doubled frequencies T^(−2⌊k/2⌋/(W/2)) replaced by DETR's T^(−2k/W)",
                _when(lambda kw, b: b == "coordinates" and kw["rule"] == "doubled",
                      lambda i: _changed(i, rule="paired"))),
)


def identify_sincos2d(candidate: Any, inputs: Sincos2dInputs) -> str | None:
    """The catalogued mistake ``candidate`` (an output of ``inputs``' variant) matches, or ``None``: ``None`` for a
    correct port (within the module docstring's bound of refpos) and for an output no mistake explains."""
    return identify_output(candidate, inputs.reference(), SINCOS2D_MISTAKES, inputs)
