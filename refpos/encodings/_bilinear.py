r"""Bilinear resampling of the last two axes of an array, as torch's ``interpolate(mode="bilinear")`` computes it
for an output size (not a scale factor), without antialiasing.

A private helper of :mod:`refpos.encodings.bias_table` (BEiT resamples its relative bias table to the window of
the input). Output pixel ``i`` of an axis of ``n_in`` input and ``n_out`` output pixels reads the source
coordinate

.. math::
    s_i = \begin{cases} \max\!\big(\tfrac{n_{in}}{n_{out}}\,(i + \tfrac12) - \tfrac12,\; 0\big) &
    \text{half-pixel centres (align\_corners=False)} \\
    i\,\tfrac{n_{in} - 1}{n_{out} - 1} & \text{align\_corners=True} \ (0 \text{ when } n_{out} = 1) \end{cases}

between input pixels ``j = min(⌊s⌋, n_in − 1)`` and ``j + 1`` (``j`` itself at the last pixel) with weights
``1 − λ`` and ``λ = s − j``. The two axes are applied one after the other, the last axis first, which is the
order of torch's CPU kernel: ``(x₀₀·w₀ + x₀₁·w₁)·h₀ + (x₁₀·w₀ + x₁₁·w₁)·h₁``.

References
----------
PyTorch, aten/src/ATen/native/UpSample.h: ``area_pixel_compute_scale``, ``area_pixel_compute_source_index``,
``guard_index_and_lambda``; aten/src/ATen/native/cpu/UpSampleKernel.cpp: ``cpu_upsample_linear``.
"""

from __future__ import annotations

from refpos.backend import Array, array_namespace


def _axis_weights(n_in: int, n_out: int, align_corners: bool, xp) -> tuple[Array, Array, Array, Array]:
    """``(j0, j1, w0, w1)`` of one axis: the two input pixels each output pixel reads and their weights."""
    i = xp.arange(n_out, dtype=xp.float64)
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        source = scale * i
    else:
        source = (n_in / n_out) * (i + 0.5) - 0.5  # half-pixel centres
        source = xp.maximum(source, xp.zeros_like(source))
    j0 = xp.minimum(xp.astype(xp.floor(source), xp.int64), xp.full((n_out,), n_in - 1, dtype=xp.int64))
    lam = xp.clip(source - xp.astype(j0, xp.float64), 0.0, 1.0)
    j1 = j0 + xp.astype(j0 < n_in - 1, xp.int64)  # the last pixel reads itself twice
    return j0, j1, 1.0 - lam, lam


def bilinear_resize(x: Array, size: tuple[int, int], *, align_corners: bool) -> Array:
    """``x`` ``(..., H_in, W_in)`` resampled to ``(..., H_out, W_out)`` (``size``), bilinear, no antialias."""
    xp = array_namespace(x)
    h_out, w_out = size
    h_in, w_in = x.shape[-2], x.shape[-1]
    j0, j1, w0, w1 = _axis_weights(w_in, w_out, align_corners, xp)
    rows = xp.take(x, j0, axis=-1) * w0 + xp.take(x, j1, axis=-1) * w1  # (..., H_in, W_out)
    i0, i1, h0, h1 = _axis_weights(h_in, h_out, align_corners, xp)
    return xp.take(rows, i0, axis=-2) * h0[:, None] + xp.take(rows, i1, axis=-2) * h1[:, None]  # (..., H_out, W_out)
