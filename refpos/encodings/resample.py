r"""Resampling as ``torch.nn.functional.interpolate`` computes it: the one resampler of every vision kind.

Every mode is **separable**: along each resampled axis the output is a fixed linear map of the input,
``y = W x`` with ``W`` an ``(out, in)`` matrix (:func:`resample_matrix`), and a 2-D resample applies the
row matrix and the column matrix in turn (:func:`interpolate`, ``Y = W_h X W_wᵀ``). What varies is how
``W`` is built; docs/grid.md#resampling writes out each rule, which PyTorch implements in
``aten/src/ATen/native/UpSample.h`` (``area_pixel_compute_scale``, ``area_pixel_compute_source_index``,
``guard_index_and_lambda``) and ``aten/src/ATen/native/cpu/UpSampleKernel.cpp`` (``HelperInterpLinear``,
``HelperInterpCubic``, ``_compute_indices_min_size_weights_aa``):

* **the step** ``r`` between the source coordinates of neighbouring outputs (:func:`resample_scale`):
  ``(n_in − 1)/(n_out − 1)`` with ``align_corners`` (0 for one output), else ``1/scale_factor`` when the
  caller gave a scale factor (and did not ask to recompute it), else ``n_in/n_out``;
* **the source coordinate** of output ``i``: ``r·i`` (``align_corners``) or ``r·(i + ½) − ½``;
* **linear** (``"linear"``, ``"bilinear"``): the two neighbours ``⌊s⌋, ⌊s⌋ + 1`` weighted ``1 − λ, λ``,
  ``λ = s − ⌊s⌋``; ``s`` below 0 is raised to 0 first, an index past the end is the last row; an axis
  whose length does not change is copied whatever the step;
* **cubic** (``"bicubic"``): four neighbours ``⌊s⌋ − 1 … ⌊s⌋ + 2`` weighted by Keys' cubic convolution
  with ``a = −0.75``, each index clamped into the table (so border rows take the weight of the taps
  beyond them);
* **antialiased** (``antialias=True``, bilinear and bicubic): every source row ``j`` weighted by a
  filter ``f((j + ½ − c)/σ)`` around ``c = r·(i + ½)``, widened ``σ = max(r, 1)`` times when shrinking,
  over the rows of the table only, and normalised to sum 1; the filter is the triangle ``max(0, 1 − |t|)``
  or Keys' cubic with ``a = −0.5`` (PIL's, not −0.75); an axis whose length does not change is copied;
* **nearest** (``"nearest"``): row ``min(⌊i·r⌋, n_in − 1)``, the product taken in float32 whatever the
  dtype (torch's ``nearest_neighbor_compute_source_index``), an unchanged length copied and a doubled
  one read at ``i // 2``.

``padding="zeros"`` (linear and cubic without antialias) gives a tap outside the table weight 0 instead of
clamping it, as ``torch.nn.functional.grid_sample(padding_mode="zeros")`` and transformers'
``vision_utils._interpolation_axis_taps_weights(padding="zeros")`` do.

The output size of the scale-factor form is ``⌊n_in·scale_factor⌋`` (:func:`resampled_size`), the product
taken in float64 as torch's Python code takes it. Indices and weights are computed in float64 and the
map applied in the input's dtype; the CPU kernels of torch are the anchor (refpos/tests/test_anchors_resample.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from refpos.backend import Array, array_namespace, get_xp
from refpos.validation import check_bool, check_choice, check_float, check_size, floating_array

#: the modes of ``torch.nn.functional.interpolate`` refpos computes
MODES = ("nearest", "linear", "bilinear", "bicubic")
#: how many trailing axes each mode resamples (``None``: as many as ``size`` or ``scale_factor`` names)
MODE_AXES = {"nearest": None, "linear": 1, "bilinear": 2, "bicubic": 2}
#: the modes torch antialiases
ANTIALIAS_MODES = ("bilinear", "bicubic")
#: what a tap outside the table reads: the border row (interpolate) or nothing (grid_sample's zeros)
PADDINGS = ("border", "zeros")
#: Keys' cubic convolution constant of torch's bicubic without antialias (OpenCV's)
CUBIC_A = -0.75
#: the same constant of the antialiased bicubic filter (PIL's)
CUBIC_A_ANTIALIAS = -0.5
#: the most rows one axis may have before or after resampling (a matrix of out × in float64 per axis)
MAX_AXIS = 2**16


def _check_axis_size(name: str, value: object) -> int:
    return check_size(name, value, maximum=MAX_AXIS, bytes_each=8 * MAX_AXIS, what="resampling weights")


def resampled_size(in_size: int, scale_factor: float) -> int:
    r"""The output length of the scale-factor form: :math:`\lfloor n_{in}\cdot s \rfloor` (float64 product).

    ``floor(16·(32/16)) = 32``, but ``floor(11·(15/11)) = 14``: the product of a quotient can round below
    the integer it stands for, which is why DINO-style code adds 0.1 to the target before dividing.

    >>> resampled_size(11, 15 / 11), resampled_size(11, 15.1 / 11)
    (14, 15)
    """
    in_size = _check_axis_size("in_size", in_size)
    scale_factor = check_float("scale_factor", scale_factor, positive=True)
    out = math.floor(in_size * scale_factor)
    if out < 1:
        raise ValueError(f"scale_factor {scale_factor} makes an axis of {in_size} rows empty (floor(in·s) = {out})")
    return _check_axis_size("the resampled size", out)


def resample_scale(in_size: int, out_size: int, *, align_corners: bool, scale_factor: float | None = None) -> float:
    r"""torch's step ``r`` between the source coordinates of neighbouring outputs (``area_pixel_compute_scale``).

    Notes
    -----
    .. math::
        r = \begin{cases} (n_{in} - 1)/(n_{out} - 1) & \text{align\_corners},\ n_{out} > 1 \\
        0 & \text{align\_corners},\ n_{out} = 1 \\
        1/s & \text{a scale factor } s \text{ given (not recomputed)} \\
        n_{in}/n_{out} & \text{otherwise} \end{cases}

    >>> resample_scale(16, 32, align_corners=False), resample_scale(16, 32, align_corners=True)
    (0.5, 0.4838709677419355)
    """
    in_size, out_size = _check_axis_size("in_size", in_size), _check_axis_size("out_size", out_size)
    if check_bool("align_corners", align_corners):
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale_factor is not None:
        return 1.0 / check_float("scale_factor", scale_factor, positive=True)
    return in_size / out_size


def _taps_matrix(xp: Any, in_size: int, taps: list[tuple[Array, Array]], padding: str) -> Array:
    r"""``W[i, j] = Σ_t w_t(i)·[idx_t(i) = j]``: tap ``t`` of output ``i`` reads row ``idx_t(i)``, weight ``w_t(i)``.

    ``border``: an index outside ``[0, n_in)`` is clamped into it (its weight joins the border row's);
    ``zeros``: it adds nothing.
    """
    rows = xp.arange(in_size, dtype=xp.int64)[None, :]  # (1, in)
    matrix = None
    for index, weight in taps:
        if padding == "zeros":
            weight = xp.where((index >= 0) & (index < in_size), weight, xp.zeros_like(weight))
        index = xp.clip(index, 0, in_size - 1)
        term = xp.where(index[:, None] == rows, weight[:, None], xp.zeros_like(weight)[:, None])  # (out, in)
        matrix = term if matrix is None else matrix + term
    return matrix


def cubic_kernel(t: Array, a: float, xp: Any) -> Array:
    r"""Keys' cubic convolution kernel :math:`k_a(t)` (``cubic_convolution1`` / ``2`` of torch's UpSample.h).

    .. math::
        k_a(t) = \begin{cases} ((a + 2)|t| - (a + 3))\,t^2 + 1 & |t| < 1 \\
        ((a|t| - 5a)|t| + 8a)|t| - 4a & 1 \le |t| < 2 \\ 0 & |t| \ge 2 \end{cases}
    """
    t = xp.abs(t)
    near = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    far = ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
    return xp.where(t < 1.0, near, xp.where(t < 2.0, far, xp.zeros_like(t)))


def triangle_kernel(t: Array, xp: Any) -> Array:
    r"""The linear filter :math:`\max(0, 1 - |t|)`."""
    return xp.maximum(1.0 - xp.abs(t), xp.zeros_like(t))


def _interpolating_matrix(xp: Any, in_size: int, out_size: int, r: float, *, cubic: bool, align_corners: bool,
                          padding: str) -> Array:
    """Linear (2 taps) or cubic (4 taps) interpolation without antialias: torch's ``compute_indices_weights``."""
    if not cubic and in_size == out_size:  # torch copies an axis whose length does not change, whatever r
        return xp.eye(in_size, dtype=xp.float64)
    i = xp.arange(out_size, dtype=xp.float64)
    # s_i = r·i (align_corners) or r·(i + ½) − ½; linear raises a negative s to 0 (interpolate's border only)
    source = r * i if align_corners else r * (i + 0.5) - 0.5
    if not cubic and padding == "border":
        source = xp.maximum(source, xp.zeros_like(source))
    # the left neighbour ⌊s⌋ (never past the last row) and the fraction λ = s − ⌊s⌋ in [0, 1]
    floor = xp.floor(source)
    if padding == "border":
        floor = xp.minimum(floor, xp.full_like(floor, in_size - 1))
    fraction = xp.clip(source - floor, 0.0, 1.0)
    left = xp.astype(floor, xp.int64)
    if cubic:
        # taps ⌊s⌋ − 1 … ⌊s⌋ + 2 at distances λ + 1, λ, 1 − λ, 2 − λ from s
        distances = (fraction + 1.0, fraction, 1.0 - fraction, 2.0 - fraction)
        taps = [(left + offset, cubic_kernel(distance, CUBIC_A, xp))
                for offset, distance in zip((-1, 0, 1, 2), distances, strict=True)]
    else:
        right = left + 1 if padding == "zeros" else xp.where(left < in_size - 1, left + 1, left)
        taps = [(left, 1.0 - fraction), (right, fraction)]
    return _taps_matrix(xp, in_size, taps, padding)


def _antialiased_matrix(xp: Any, in_size: int, out_size: int, r: float, *, cubic: bool) -> Array:
    r"""torch's antialiased weights (``_compute_indices_min_size_weights_aa``), shrinking or growing.

    .. math:: W_{ij} = \frac{f\big((j - c_i + \tfrac12)/\sigma\big)}{\sum_{j'} f\big((j' - c_i + \tfrac12)/\sigma\big)},
        \qquad c_i = r\,(i + \tfrac12),\quad \sigma = \max(r, 1),\quad j, j' \in [0, n_{in})

    torch sums over the window ``[⌊c − σ·w/2 + ½⌋, ⌊c + σ·w/2 + ½⌋)`` (``w`` the filter's width, 2 or 4),
    which holds exactly the rows where ``f`` is not 0; the sum over every row of the table is the same. An
    axis whose length does not change is copied (``W = I``), even when a scale factor sets ``r ≠ 1``.
    """
    if in_size == out_size:  # torch's separable passes skip an axis whose length does not change, whatever r
        return xp.eye(in_size, dtype=xp.float64)
    centre = r * (xp.arange(out_size, dtype=xp.float64) + 0.5)  # (out,)
    inverse = 1.0 / r if r >= 1.0 else 1.0
    rows = xp.arange(in_size, dtype=xp.float64)
    t = ((rows[None, :] - centre[:, None]) + 0.5) * inverse  # (out, in), torch's order of operations
    weights = cubic_kernel(t, CUBIC_A_ANTIALIAS, xp) if cubic else triangle_kernel(t, xp)
    return weights / xp.sum(weights, axis=1, keepdims=True)


def _nearest_matrix(xp: Any, in_size: int, out_size: int, scale_factor: float | None) -> Array:
    """torch's legacy nearest: row ``min(⌊i·r⌋, n_in − 1)`` with ``i·r`` rounded to float32."""
    if out_size == in_size:
        index = xp.arange(out_size, dtype=xp.int64)
    elif out_size == 2 * in_size:
        index = xp.arange(out_size, dtype=xp.int64) // 2
    else:
        # r in float32: 1/scale_factor (a float64 quotient rounded) or n_in/n_out (a float32 quotient)
        step = xp.asarray(1.0 / scale_factor, dtype=xp.float32) if scale_factor is not None else \
            xp.asarray(in_size, dtype=xp.float32) / xp.asarray(out_size, dtype=xp.float32)
        product = xp.arange(out_size, dtype=xp.float32) * step  # float32 product, as torch's floorf reads it
        index = xp.minimum(xp.astype(xp.floor(product), xp.int64), xp.full((out_size,), in_size - 1, dtype=xp.int64))
    ones = xp.ones((out_size,), dtype=xp.float64)
    return _taps_matrix(xp, in_size, [(index, ones)], "border")


def resample_matrix(in_size: int, out_size: int, *, mode: str, align_corners: bool = False, antialias: bool = False,
                    scale_factor: float | None = None, padding: str = "border", xp: Any = None) -> Array:
    r"""The ``(out_size, in_size)`` float64 matrix ``W`` of one axis: ``y = W x`` resamples ``x`` along it.

    ``mode`` is one of :data:`MODES` (``"linear"`` and ``"bilinear"`` share the per-axis rule).
    ``scale_factor`` is the factor the caller gave torch (``None``: the size form, or a recomputed
    factor); it sets the step ``r = 1/scale_factor`` (:func:`resample_scale`) and leaves ``out_size`` to the
    caller (:func:`resampled_size`). The module docstring states each rule.

    Notes
    -----
    Without antialias, ``W_{ij} = Σ_t w_t(λ_i)·[\mathrm{clamp}(⌊s_i⌋ + o_t) = j]``
    (linear: ``o = 0, 1``, ``w = 1 − λ, λ``; cubic: ``o = −1 … 2``, ``w = k_{−0.75}(λ + 1), k(λ), k(1 − λ), k(2 − λ)``);
    with antialias, the normalised filter weights of :func:`_antialiased_matrix`.

    See Also
    --------
    interpolate : the matrices applied along the trailing axes.
    refpos.encodings.resample_bounds.resample_error_bound : how far a correct port in another dtype may be.

    References
    ----------
    PyTorch, ``aten/src/ATen/native/UpSample.h`` (``area_pixel_compute_scale``, ``area_pixel_compute_source_index``)
    and ``aten/src/ATen/native/cpu/UpSampleKernel.cpp`` (``HelperInterpLinear``, ``HelperInterpCubic``,
    ``_compute_indices_min_size_weights_aa``); R. Keys, "Cubic convolution interpolation for digital image
    processing", IEEE Trans. ASSP 29 (1981).

    Examples
    --------
    >>> import numpy as np
    >>> np.asarray(resample_matrix(2, 4, mode="bilinear")).tolist()
    [[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]]
    """
    mode = check_choice("mode", mode, MODES)
    in_size, out_size = _check_axis_size("in_size", in_size), _check_axis_size("out_size", out_size)
    align_corners, antialias = check_bool("align_corners", align_corners), check_bool("antialias", antialias)
    padding = check_choice("padding", padding, PADDINGS)
    xp = get_xp(xp)
    if mode == "nearest":
        if align_corners or antialias or padding != "border":
            raise ValueError("mode 'nearest' takes no align_corners, antialias or padding (torch refuses them)")
        return _nearest_matrix(xp, in_size, out_size, scale_factor)
    if antialias and mode not in ANTIALIAS_MODES:
        raise ValueError(f"antialias is torch's for modes {ANTIALIAS_MODES} only, not {mode!r}")
    if antialias and padding != "border":
        raise ValueError("padding 'zeros' is a rule of interpolation without antialias")
    r = resample_scale(in_size, out_size, align_corners=align_corners, scale_factor=scale_factor)
    if antialias:
        return _antialiased_matrix(xp, in_size, out_size, r, cubic=mode == "bicubic")
    return _interpolating_matrix(xp, in_size, out_size, r, cubic=mode == "bicubic", align_corners=align_corners,
                                 padding=padding)


def _per_axis(name: str, value: Any, n_axes: int) -> tuple[Any, ...]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != n_axes:
            raise ValueError(f"{name} must name {n_axes} axes, got {len(value)} entries")
        return tuple(value)
    return (value,) * n_axes


def _axes_of(mode: str, size: Any, scale_factor: Any) -> int:
    """How many trailing axes are resampled: the mode's, or (nearest) as many as size or scale_factor name."""
    name, given = ("size", size) if size is not None else ("scale_factor", scale_factor)
    named = len(given) if isinstance(given, Sequence) and not isinstance(given, str) else None
    if MODE_AXES[mode] is None:
        if named is None or named < 1:
            raise ValueError(f"mode 'nearest' resamples as many axes as {name} names: give a tuple")
        return named
    if named is not None and named != MODE_AXES[mode]:
        raise ValueError(f"{name} must name the {MODE_AXES[mode]} axes mode {mode!r} resamples, got {named}")
    return MODE_AXES[mode]


def interpolate(x: Array, size: int | Sequence[int] | None = None, *, mode: str,
                scale_factor: float | Sequence[float] | None = None, align_corners: bool = False,
                antialias: bool = False, recompute_scale_factor: bool = False, padding: str = "border") -> Array:
    r"""``x`` resampled along its trailing axes as ``torch.nn.functional.interpolate`` resamples them.

    ``x`` ``(..., n_1, …, n_k)``: ``"linear"`` resamples the last axis, ``"bilinear"`` and ``"bicubic"``
    the last two (torch's ``N, C`` are any leading axes here), ``"nearest"`` as many as ``size`` names.
    Exactly one of ``size`` (an int for every axis, or one per axis) and ``scale_factor`` (likewise) is
    given. With a scale factor the output has ``⌊n·s⌋`` rows (:func:`resampled_size`) and the step is
    ``1/s``, unless ``recompute_scale_factor`` (then ``n/⌊n·s⌋``, as for that size).

    Notes
    -----
    .. math:: Y = W^{(1)} \cdots W^{(k)} X, \qquad W^{(a)} = \mathrm{resample\_matrix}(n_a, n'_a)
        \text{ applied along axis } a

    See Also
    --------
    resample_matrix : the map of one axis.
    refpos.encodings.grid.resample_position_table : a position table resampled to a patch grid.

    References
    ----------
    PyTorch, ``torch/nn/functional.py``: ``interpolate`` (the output size ``floor(n·s)`` and the scale factors
    passed to the kernels); the kernels as in :func:`resample_matrix`.

    Examples
    --------
    >>> import numpy as np
    >>> grid = np.arange(4.0).reshape(2, 2)
    >>> np.asarray(interpolate(grid, (3, 3), mode="bilinear", align_corners=True)).tolist()
    [[0.0, 0.5, 1.0], [1.0, 1.5, 2.0], [2.0, 2.5, 3.0]]
    """
    x = floating_array(x, name="x")
    xp = array_namespace(x)
    mode = check_choice("mode", mode, MODES)
    if (size is None) == (scale_factor is None):
        raise ValueError("give exactly one of size and scale_factor")
    if check_bool("recompute_scale_factor", recompute_scale_factor) and size is not None:
        raise ValueError("recompute_scale_factor is for the scale_factor form, not an explicit size")
    n_axes = _axes_of(mode, size, scale_factor)
    if x.ndim < n_axes:
        raise ValueError(f"x must have at least {n_axes} axes for mode {mode!r}, got shape {tuple(x.shape)}")
    in_sizes = tuple(x.shape[x.ndim - n_axes:])
    if size is not None:
        out_sizes = tuple(_check_axis_size("size", s) for s in _per_axis("size", size, n_axes))
        factors: tuple[float | None, ...] = (None,) * n_axes
    else:
        factors = tuple(check_float("scale_factor", s, positive=True)
                        for s in _per_axis("scale_factor", scale_factor, n_axes))
        out_sizes = tuple(resampled_size(n, s) for n, s in zip(in_sizes, factors, strict=True))
        if recompute_scale_factor:
            factors = (None,) * n_axes
    for axis, (n_in, n_out, factor) in enumerate(zip(in_sizes, out_sizes, factors, strict=True)):
        matrix = resample_matrix(n_in, n_out, mode=mode, align_corners=align_corners, antialias=antialias,
                                 scale_factor=factor, padding=padding, xp=xp)  # (n_out, n_in)
        position = x.ndim - n_axes + axis
        moved = xp.moveaxis(x, position, -1)  # (..., n_in): the resampled axis last
        x = xp.moveaxis(xp.matmul(moved, xp.matrix_transpose(xp.astype(matrix, x.dtype))), -1, position)
    return x
