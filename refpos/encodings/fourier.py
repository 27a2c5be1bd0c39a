r"""Fourier features of coordinates: SAM's random Gaussian features and Perceiver's linear bands
(docs/fourier.md#the-math).

* :func:`fourier_features` — SAM's prompt encoder (``PositionEmbeddingRandom``, transformers
  ``SamPositionalEmbedding``): coordinates ``c ∈ [0, 1]ⁿ`` mapped to ``[−1, 1]``, times a given Gaussian matrix
  ``G`` ``(n, m)`` and 2π, then ``[sin | cos]``: ``2m`` channels of magnitude at most 1. The point and box
  prompts are pixel positions shifted to the pixel centre and divided by the input size
  (:func:`pixel_centre_coordinates`); the dense embedding of the image is the same map on the centres of the
  embedding grid (:func:`grid_centre_coordinates`).
* :func:`perceiver_fourier_features` — Perceiver's ``generate_fourier_features``: positions on a linear grid in
  ``[−1, 1]`` (:func:`linear_positions`), ``K`` bands ``f_k`` evenly spaced from 1 to half the resolution of each
  axis, ``[positions | sin(π f x) | cos(π f x)]``.

Which model uses which is :data:`FOURIER_VARIANTS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from refpos.backend import Array, array_namespace, get_xp
from refpos.validation import (
    MAX_WIDTH,
    check_bool,
    check_float,
    check_memory,
    check_size,
    element_count,
    floating_array,
)


def _check_coordinates(coords: Any, name: str = "coords") -> Any:
    coords = floating_array(coords, name=name)
    if coords.ndim < 1 or coords.shape[-1] < 1:
        raise ValueError(f"{name} must have shape (..., n) with n >= 1, got {tuple(coords.shape)}")
    xp = array_namespace(coords)
    if coords.size and not bool(xp.all(xp.isfinite(coords))):
        raise ValueError(f"{name} must be finite")
    return coords


def fourier_features(coords: Array, gaussian: Array) -> Array:
    r"""SAM's random Fourier features of coordinates in ``[0, 1]``: shape ``(..., 2m)``.

    Parameters
    ----------
    coords : real floating array ``(..., n)``
        Coordinates in the model's order (SAM: ``(x, y)``), normalised to ``[0, 1]`` (values outside are encoded
        as they are: the map is defined on every real number).
    gaussian : real floating array ``(n, m)``
        The fixed matrix ``G`` (transformers ``positional_embedding``: ``scale · randn(2, m)``; row 0 multiplies x).

    Notes
    -----
    .. math::
        \varphi = 2\pi\,(2c - 1)\,G, \qquad P = \bigl[\sin\varphi_0 \dots \sin\varphi_{m-1} \;|\;
        \cos\varphi_0 \dots \cos\varphi_{m-1}\bigr]

    Every channel lies in ``[−1, 1]`` and each pair has unit norm, ``sin² φ_j + cos² φ_j = 1``.

    See Also
    --------
    pixel_centre_coordinates, grid_centre_coordinates

    References
    ----------
    .. [1] Tancik et al., "Fourier Features Let Networks Learn High Frequency Functions in Low Dimensional
       Domains", 2020.
    .. [2] Kirillov et al., "Segment Anything", 2023; facebookresearch/segment-anything
       ``segment_anything/modeling/prompt_encoder.py``, ``PositionEmbeddingRandom._pe_encoding``; transformers
       ``models/sam/modeling_sam.py``, ``SamPositionalEmbedding.forward``.

    Examples
    --------
    >>> import numpy as np
    >>> fourier_features(np.array([[0.5, 0.75]]), np.array([[1.0], [1.0]])).round(12).tolist()
    [[0.0, -1.0]]
    """
    coords = _check_coordinates(coords)
    gaussian = floating_array(gaussian, name="gaussian")
    xp = array_namespace(coords, gaussian)
    n = coords.shape[-1]
    if gaussian.ndim != 2 or gaussian.shape[0] != n:
        raise ValueError(f"gaussian must have shape ({n}, m) for coords with n = {n}, got {tuple(gaussian.shape)}")
    m = gaussian.shape[1]
    check_memory("the Fourier features and their angles, float64", 3 * element_count(coords) // n * m * 8,
                 f"{element_count(coords) // n} points of {m} frequencies")
    centred = 2.0 * xp.astype(coords, xp.float64) - 1.0  # (..., n) in [−1, 1]
    phases = 2.0 * math.pi * (centred @ xp.astype(gaussian, xp.float64))  # (..., m)
    return xp.concat([xp.sin(phases), xp.cos(phases)], axis=-1)  # (..., 2m)


def pixel_centre_coordinates(points: Array, image_size: tuple[int, int]) -> Array:
    r"""SAM's prompt points in pixels → the coordinates :func:`fourier_features` reads, shape ``(..., 2)``.

    Parameters
    ----------
    points : real floating array ``(..., 2)``
        ``(x, y)`` in pixels of the resized input image (box corners are two such points).
    image_size : (int, int)
        ``(H, W)`` of the input image (SAM: ``(1024, 1024)``).

    Notes
    -----
    .. math:: c = \Bigl(\frac{x + 0.5}{W},\ \frac{y + 0.5}{H}\Bigr)

    transformers ``SamPromptEncoder._embed_points`` adds the 0.5 (the pixel centre), the positional embedding
    divides by ``input_shape``.
    """
    points = _check_coordinates(points, "points")
    if points.shape[-1] != 2:
        raise ValueError(f"points must have shape (..., 2) (x, y), got {tuple(points.shape)}")
    height, width = _check_size_pair("image_size", image_size)
    xp = array_namespace(points)
    scale = xp.asarray([1.0 / width, 1.0 / height], dtype=xp.float64)
    return (xp.astype(points, xp.float64) + 0.5) * scale


def grid_centre_coordinates(height: int, width: int, *, xp: Any = None) -> Array:
    r"""The centres of an ``height × width`` grid as SAM's dense embedding reads them: shape ``(H, W, 2)``.

    Notes
    -----
    .. math:: c_{i,j} = \Bigl(\frac{j + 0.5}{W},\ \frac{i + 0.5}{H}\Bigr)

    transformers ``SamModel.get_image_wide_positional_embeddings``: ``(cumsum(ones) − 0.5) / size``, stacked
    ``(x, y)``.
    """
    xp = get_xp(xp)
    height, width = _check_size_pair("(height, width)", (height, width))
    ys = (xp.arange(height, dtype=xp.float64) + 0.5) / height  # (H,)
    xs = (xp.arange(width, dtype=xp.float64) + 0.5) / width  # (W,)
    grid_y, grid_x = xp.meshgrid(ys, xs, indexing="ij")  # (H, W) each
    return xp.stack([grid_x, grid_y], axis=-1)


def _check_size_pair(name: str, sizes: Any) -> tuple[int, int]:
    if not isinstance(sizes, tuple | list) or len(sizes) != 2:
        raise TypeError(f"{name} must be a pair of ints (H, W), got {sizes!r}")
    return tuple(check_size(f"{name}[{i}]", s, maximum=2**20, bytes_each=16, what="coordinates")
                 for i, s in enumerate(sizes))  # type: ignore[return-value]


def linear_positions(index_dims: Sequence[int], *, output_range: tuple[float, float] = (-1.0, 1.0),
                     xp: Any = None) -> Array:
    r"""Perceiver's positions of an N-D grid: shape ``(*index_dims, N)``, ``N = len(index_dims)``.

    Notes
    -----
    Axis ``a`` takes ``n_a`` evenly spaced values from ``lo`` to ``hi`` (both included; one value: ``lo``):

    .. math:: x_{a,i} = lo + i\,\frac{hi - lo}{n_a - 1}

    transformers ``models/perceiver/modeling_perceiver.py``, ``build_linear_positions`` (``meshgrid(…, "ij")``).
    """
    xp = get_xp(xp)
    if not isinstance(index_dims, tuple | list) or not index_dims:
        raise TypeError(f"index_dims must be a non-empty list of ints, got {index_dims!r}")
    dims = [check_size(f"index_dims[{i}]", n, maximum=2**20, bytes_each=8, what="positions")
            for i, n in enumerate(index_dims)]
    lo, hi = (check_float(f"output_range[{i}]", v) for i, v in enumerate(output_range))
    check_memory("the position grid, float64", math.prod(dims) * len(dims) * 8, f"index_dims {dims}")
    axes = [lo + xp.arange(n, dtype=xp.float64) * ((hi - lo) / max(n - 1, 1)) for n in dims]
    return xp.stack(xp.meshgrid(*axes, indexing="ij"), axis=-1)


def perceiver_bands(num_bands: int, max_resolution: Sequence[int], *, xp: Any = None) -> Array:
    r"""Perceiver's frequency bands, shape ``(N, K)``: ``f_{a,k} = 1 + k·(r_a/2 − 1)/(K − 1)`` (one band: 1)."""
    xp = get_xp(xp)
    num_bands = check_size("num_bands", num_bands, maximum=MAX_WIDTH, bytes_each=8, what="bands")
    resolution = [check_float(f"max_resolution[{i}]", r, positive=True) for i, r in enumerate(max_resolution)]
    k = xp.arange(num_bands, dtype=xp.float64)  # (K,)
    step = 1.0 / max(num_bands - 1, 1)
    return xp.stack([1.0 + k * ((r / 2.0 - 1.0) * step) for r in resolution], axis=0)


def perceiver_fourier_features(positions: Array, num_bands: int, max_resolution: Sequence[int], *,
                               concat_pos: bool, sine_only: bool) -> Array:
    r"""Perceiver's Fourier position encoding of positions ``(M, N)``: ``(M, N·(1 or 2)·K [+ N])``.

    Parameters
    ----------
    positions : real floating array ``(M, N)``
        Usually :func:`linear_positions` flattened to ``(prod(index_dims), N)``.
    num_bands : int
        ``K``.
    max_resolution : sequence of N numbers
        The resolution of each axis; its bands end at half of it (the Nyquist frequency).
    concat_pos : bool
        Whether the positions themselves come first.
    sine_only : bool
        Whether the cosines are left out.

    Notes
    -----
    .. math::
        P = \bigl[\,x \;|\; \sin(\pi f_{a,k} x_a)_{a,k} \;|\; \cos(\pi f_{a,k} x_a)_{a,k}\,\bigr]

    with ``(a, k)`` flattened axis-major (axis 0's K bands first) and :func:`perceiver_bands` ``f``.

    References
    ----------
    .. [1] Jaegle et al., "Perceiver: General Perception with Iterative Attention", 2021; transformers
       ``models/perceiver/modeling_perceiver.py``, ``generate_fourier_features``.
    """
    positions = _check_coordinates(positions, "positions")
    if positions.ndim != 2:
        raise ValueError(f"positions must have shape (M, N), got {tuple(positions.shape)}")
    concat_pos, sine_only = check_bool("concat_pos", concat_pos), check_bool("sine_only", sine_only)
    xp = array_namespace(positions)
    m, n = positions.shape
    if not isinstance(max_resolution, tuple | list) or len(max_resolution) != n:
        raise ValueError(f"max_resolution must hold one resolution per axis ({n}), got {max_resolution!r}")
    bands = perceiver_bands(num_bands, max_resolution, xp=xp)  # (N, K)
    check_memory("the Perceiver features, float64", 3 * m * n * bands.shape[1] * 8, f"{m} positions")
    positions = xp.astype(positions, xp.float64)
    angles = math.pi * xp.reshape(positions[:, :, None] * bands, (m, -1))  # (M, N·K), axis-major
    parts = ([positions] if concat_pos else []) + [xp.sin(angles)] + ([] if sine_only else [xp.cos(angles)])
    return xp.concat(parts, axis=-1)


#: variant name -> (the function, the inputs it is called with, the transformers model types, the source)
FOURIER_VARIANTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "sam_prompts": MappingProxyType({
        "function": "fourier_features(pixel_centre_coordinates(points, (input_image_size,) * 2), G)",
        "inputs": "point prompts and box corners in pixels of the resized input; G = positional_embedding (2, m)",
        "models": ("sam", "sam_hq", "sam2", "sam2_video", "sam3_tracker", "sam3_tracker_video", "edgetam",
                   "edgetam_video"),
        "source": "transformers models/sam/modeling_sam.py: SamPromptEncoder._embed_points, _embed_boxes",
    }),
    "sam_image_grid": MappingProxyType({
        "function": "fourier_features(grid_centre_coordinates(*image_embedding_size), G)",
        "inputs": "the image embedding grid (64 × 64 for SAM); the channels of the result go first in the model",
        "models": ("sam", "sam_hq", "sam2", "sam2_video", "sam3_tracker", "sam3_tracker_video", "edgetam",
                   "edgetam_video"),
        "source": "transformers models/sam/modeling_sam.py: SamModel.get_image_wide_positional_embeddings",
    }),
    "perceiver": MappingProxyType({
        "function": "perceiver_fourier_features(linear_positions(index_dims) reshaped (M, N), num_bands, "
                    "max_resolution, concat_pos=…, sine_only=…)",
        "inputs": "the index grid of the input (image 224 × 224, flow patches, audio and video of the "
                  "multimodal model); num_bands, max_resolution, concat_pos, sine_only of the preprocessor",
        "models": ("perceiver",),
        "source": "transformers models/perceiver/modeling_perceiver.py: PerceiverFourierPositionEncoding",
    }),
})
