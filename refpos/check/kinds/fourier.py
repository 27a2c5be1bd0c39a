"""``refpos check fourier``: random Fourier features from a call of ``fourier_features`` (SAM's, of coordinates in
[0, 1]), ``sam_prompt_features`` (SAM's prompt encoder on pixel points: refpos's own call, the composition with
the pixel centres) or ``perceiver_fourier_features`` (Perceiver's bands), against :mod:`refpos.encodings.fourier`
within the bound of a float32 port (:meth:`refpos.encodings.fourier_mistakes.FourierInputs.bound`), the mistake named by
:func:`~refpos.encodings.fourier_mistakes.identify_fourier` (docs/fourier.md#mistakes).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.encodings.fourier_mistakes import FOURIER_MISTAKES, FourierInputs, identify_fourier


def fourier_features(coords: Any, gaussian: Any) -> FourierInputs:
    """The inputs of a ``fourier_features`` call."""
    return FourierInputs("sam", np.asarray(coords, dtype=np.float64), np.asarray(gaussian, dtype=np.float64))


def perceiver_fourier_features(positions: Any, num_bands: int, max_resolution: list[int], concat_pos: bool = True,
                               sine_only: bool = False) -> FourierInputs:
    """The inputs of a ``perceiver_fourier_features`` call."""
    return FourierInputs("perceiver", np.asarray(positions, dtype=np.float64), perceiver={
        "num_bands": num_bands, "max_resolution": list(max_resolution), "concat_pos": concat_pos,
        "sine_only": sine_only})


def sam_prompt_features(points: Any, image_size: list[int], gaussian: Any) -> FourierInputs:
    """The inputs of SAM's prompt encoder on pixel points ``(x, y)`` of an image ``(H, W)``:
    ``fourier_features(pixel_centre_coordinates(points, image_size), gaussian)``
    (:func:`refpos.encodings.fourier.pixel_centre_coordinates`: ``((x + 0.5)/W, (y + 0.5)/H)``)."""
    return FourierInputs("sam_prompts", np.asarray(points, dtype=np.float64), np.asarray(gaussian, dtype=np.float64),
                         image_size=tuple(image_size))


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """SAM's features of points in [0, 1] and of pixel points of a 480 × 640 image (G of float32 values), and
    Perceiver's of a 4 × 5 grid with 6 bands."""
    rng = np.random.default_rng(1)
    gaussian = rng.standard_normal((2, 16)).astype(np.float32).astype(np.float64)  # a float32 model's G
    grid = np.stack(np.meshgrid(np.linspace(-1, 1, 4), np.linspace(-1, 1, 5), indexing="ij"), axis=-1).reshape(20, 2)
    return [("fourier_features", {"coords": rng.random((5, 2)), "gaussian": gaussian}),
            ("sam_prompt_features", {"points": np.floor(rng.random((5, 2)) * np.array([640, 480])),
                                     "image_size": [480, 640], "gaussian": gaussian}),
            ("perceiver_fourier_features", {"positions": grid, "num_bands": 6, "max_resolution": [4, 5]})]


FOURIER_CHECK = KindCheck(
    kind="fourier", calls=(fourier_features, sam_prompt_features, perceiver_fourier_features),
    reference=FourierInputs.reference, identify=identify_fourier,
    mistakes={m.name: m.description for m in FOURIER_MISTAKES}, wrong=partial(mistake_output, FOURIER_MISTAKES),
    examples=_examples)

__all__ = ["FOURIER_CHECK", "fourier_features", "perceiver_fourier_features", "sam_prompt_features"]
