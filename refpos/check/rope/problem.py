"""The problem a RoPE diagnosis works on: the inputs, the resolved reference and its tolerance.

:func:`rope_problem` evaluates the reference of ``apply_rope(x, positions, rope)`` once, with the per-element
size its tolerance scales with (:func:`pair_magnitude`); :func:`fit` is the question every entry of the
catalogue asks of a mutant (:mod:`refpos.check.rope.diagnosis`): is the candidate within that tolerance of it?
:func:`round_to` rounds to bfloat16 / float16, as the bf16 variants of :mod:`refpos.check.rope.rope_mistakes` do.

Everything here works on NumPy arrays (``refpos check`` reads ``.npy`` files).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.shared.arrays import np_ns
from refpos.golden.exact import tolerance as tol
from refpos.golden.exact.compare import compare
from refpos.golden.exact.ulp import ulp


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float64 values to bfloat16 or float16 (nearest even), returned as float64."""
    if dtype == "float16":
        with np.errstate(over="ignore"):  # beyond 65504 -> inf, as a float16 cast does
            return np.asarray(values, dtype=np.float64).astype(np.float16).astype(np.float64)
    bits = np.asarray(values, dtype=np.float64).astype(np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32).astype(np.float64)


@dataclasses.dataclass
class RopeProblem:
    """Everything the RoPE catalogue needs: inputs, the resolved config, the reference and its tolerance."""

    x: np.ndarray  # (..., T, D)
    positions: np.ndarray  # broadcast to x.shape[:-1]
    rope: Any  # RopeConfig
    seq_len: int  # the effective L (HF: max(position) + 1 when not given)
    dtype: str
    inv_freq: np.ndarray
    attention_factor: float
    reference: np.ndarray
    magnitude: np.ndarray  # per element: A·‖pair‖ on rotated channels, |x| elsewhere
    channels: tuple[list[int], list[int], list[int], list[int]]
    token_index: np.ndarray  # the T-axis index of every row (positions ignored: 0 … T−1)
    min_position: int  # over every row of the check, not only these
    max_position: int

    def atol(self, dtype: str | None = None) -> np.ndarray:
        return np.asarray(tol.rope_tolerance(dtype or self.dtype, self.positions, self.inv_freq,
                                             reference=self.reference, magnitude=self.magnitude))

    def apply(self, rope: Any = None, *, positions: np.ndarray | None = None, seq_len: int | None = None,
              frequencies: tuple[np.ndarray, float] | None = None) -> np.ndarray:
        import refpos

        y = refpos.apply_rope(self.x, self.positions if positions is None else positions,
                              self.rope if rope is None else rope,
                              seq_len=self.seq_len if seq_len is None else seq_len, frequencies=frequencies)
        return np.asarray(to_numpy(y))


def pair_magnitude(x: np.ndarray, channels: tuple[Any, Any, Any, Any], attention_factor: float) -> np.ndarray:
    """Per element: ``A·‖pair‖`` on the channels a pair is written to, ``|x|`` on the others (the size the
    tolerance scales with). ``channels``: ``(u_in, v_in, u_out, v_out)``, index lists or slices."""
    u_in, v_in, u_out, v_out = channels
    if all(isinstance(c, slice) for c in channels):  # a span [start, stop): |x| only on the channels outside it
        start, stop = u_in.start, v_in.stop
        magnitude = np.empty(x.shape)
        np.abs(x[..., :start], out=magnitude[..., :start])
        np.abs(x[..., stop:], out=magnitude[..., stop:])
    else:
        magnitude = np.abs(np.asarray(x, dtype=np.float64))
    pair = _pair_size(x, u_in, v_in, attention_factor)  # (..., T, m)
    magnitude[..., u_out] = pair
    magnitude[..., v_out] = pair
    return magnitude


def _pair_size(x: np.ndarray, u_in: Any, v_in: Any, attention_factor: float) -> np.ndarray:
    r""":math:`A\sqrt{u^2 + v^2}` of every pair, ``(..., T, m)``."""
    pair = np.square(x[..., u_in])  # (..., T, m)
    pair += np.square(x[..., v_in])
    np.sqrt(pair, out=pair)
    pair *= attention_factor
    return pair


def rotated_tolerance(dtype: str, positions: np.ndarray, inv_freq: np.ndarray, x: np.ndarray,
                      channels: tuple[Any, Any, Any, Any], attention_factor: float,
                      reference: np.ndarray) -> np.ndarray:
    """The atol of every element of ``apply_rope(x)``: :func:`refpos.golden.exact.tolerance.rope_tolerance` of
    the rotated values, sized by :func:`pair_magnitude`.

    ``positions`` ``(..., T)``, ``x`` and ``reference`` ``(..., T, D)``; returns ``(..., T, D)``. In float32
    and float64 the tolerance depends on the pair's size only, not on the output's value: it is then
    computed once per pair and written to both of its channels (:func:`_tolerance_per_pair`, the same
    numbers in half the work; tested equal).
    """
    if dtype in ("float32", "float64") and all(isinstance(c, slice) for c in channels):
        return _tolerance_per_pair(dtype, positions, inv_freq, x, channels, attention_factor)
    return np.asarray(tol.rope_tolerance(dtype, positions, inv_freq, reference=reference,
                                         magnitude=pair_magnitude(x, channels, attention_factor)))


def _tolerance_per_pair(dtype: str, positions: np.ndarray, inv_freq: np.ndarray, x: np.ndarray,
                        channels: tuple[slice, slice, slice, slice], attention_factor: float) -> np.ndarray:
    """:func:`rotated_tolerance` for float32/float64 and a contiguous span of pairs: one value per pair."""
    u_in, v_in, u_out, v_out = channels
    start, stop = u_in.start, v_in.stop
    at = positions[..., None]  # (..., T, 1): one bound per position, broadcast over the channels
    angle = np.asarray(tol.angle_error_bound(dtype, at, inv_freq))  # (..., T, 1): |p|·rate, once per block

    def rule(size: np.ndarray) -> np.ndarray:
        if not np.isfinite(size.max(initial=0.0)):  # an infinite or NaN size: the general rule's NaN and inf
            return np.asarray(tol.rope_tolerance(dtype, at, inv_freq, magnitude=size))
        return _finite_rule(dtype, angle, size)

    atol = np.empty(x.shape)  # (..., T, D)
    per_pair = rule(_pair_size(x, u_in, v_in, attention_factor))  # (..., T, m)
    atol[..., u_out] = per_pair
    atol[..., v_out] = per_pair
    for outside in (slice(0, start), slice(stop, x.shape[-1])):  # channels that are not rotated: |x|
        if outside.stop > outside.start:
            atol[..., outside] = rule(np.abs(x[..., outside]))
    return atol


def _finite_rule(dtype: str, angle: np.ndarray, size: np.ndarray) -> np.ndarray:
    r""":func:`refpos.golden.exact.tolerance.rope_tolerance` for float32/float64 and finite sizes, in place.

    The rule is :math:`\mathrm{atol} = (|p|\,r)\,m + (\rho\,m + f) + k\,\mathrm{ulp}_{32}(m)` with the storage
    coefficients :math:`(\rho, k, f)` = (0, 4, 0) in float32 and (10⁻¹³, 0, 0) in float64
    (:func:`refpos.golden.exact.forms.storage_coefficients`). For a finite ``m`` the terms that are zero add
    exact zeros, so leaving them out keeps every bit (tested equal); the one result array is written in place.
    """
    relative, path_ulps, floor = tol.storage_coefficients(dtype, None)
    atol = np.multiply(angle, size)  # (|p|·r)·m, the phase term
    stored = relative * size + floor if relative or floor else None  # ρ·m + f
    if path_ulps:  # + k·ulp₃₂(m): a power of two times k, exact
        spacing = ulp(size, "float32")
        spacing *= path_ulps
        stored = spacing if stored is None else stored + spacing
    if stored is not None:
        atol += stored
    return atol


def rope_problem(x: np.ndarray, positions: np.ndarray, rope: Any, seq_len: int | None, dtype: str, *,
                 token_index: np.ndarray | None = None, min_position: int | None = None,
                 max_position: int | None = None) -> RopeProblem:
    """Resolve the reference of ``apply_rope(x, positions, rope, seq_len)`` and its tolerance for ``dtype``.

    ``x`` may be a sample of the rows of a larger check (``refpos check`` diagnoses on a sample): then
    ``token_index`` gives each row's T-axis index and ``min_position``/``max_position`` the range of
    all the positions (default: these rows are all of them).
    """
    import refpos
    from refpos.rope.forms import pair_channels as rope_channels

    positions = np.broadcast_to(np.asarray(positions, dtype=np.int64), x.shape[:-1])
    length = int(positions.max()) + 1 if seq_len is None and positions.size else seq_len
    inv_freq, attention_factor = refpos.rope_frequencies(rope, seq_len=length, xp=np_ns())
    inv_freq = np.asarray(to_numpy(inv_freq))
    reference = np.asarray(to_numpy(refpos.apply_rope(x, positions, rope, seq_len=length)))
    channels = rope_channels(rope)
    magnitude = pair_magnitude(x, channels, float(attention_factor))
    if token_index is None:
        token_index = np.broadcast_to(np.arange(x.shape[-2]), positions.shape)
    low = int(positions.min()) if min_position is None and positions.size else (min_position or 0)
    high = int(positions.max()) if max_position is None and positions.size else (max_position or 0)
    return RopeProblem(x, positions, rope, length, dtype, inv_freq, float(attention_factor), reference, magnitude,
                       channels,
                       np.broadcast_to(token_index, positions.shape), low, high)


def fit(candidate: np.ndarray, mutant: np.ndarray, atol: np.ndarray) -> tuple[bool, float, float]:
    """(within atol everywhere, max |candidate − mutant|, max ratio to atol), by the one comparison."""
    result = compare(candidate, mutant, atol=atol)
    return result.ok, result.max_abs_error, result.max_ratio
