r"""What a RoPE candidate computed: the frequency and the amplitude of every pair, fitted from its output.

Write pair ``j`` of an input row as the complex number :math:`z = u + iv` and the candidate's output pair
as :math:`z'`. Any RoPE, right or wrong, that rotates the pair by an angle and scales it writes

.. math:: z' = A\,e^{i\varphi}\,z, \qquad r = z'/z = A\,e^{i\varphi},

so :math:`|r|` is the amplitude and :math:`\arg r` the angle the candidate used on that row. A rotation at
one frequency has :math:`\varphi = \omega p + c` at position ``p``: the fit recovers :math:`\hat\omega_j`,
:math:`\hat c_j` (``c = ωδ`` for positions shifted by ``δ``) and :math:`\hat A_j` from the rows, without
knowing the rule that produced them.

**Angles per position.** The rows at one position ``p`` give one angle,
:math:`\psi(p) = \arg \sum z^* z'` (the least-squares rotation of those rows), and one amplitude
:math:`|\sum z^* z'| / \sum |z|^2`.

**Unwrapping.** ``arg`` returns :math:`\psi \in (-\pi, \pi]`; the angle the candidate used is
:math:`\psi + 2\pi k`. The fit of each pair starts from the two closest positions that have rows of it (gap ``Δ``):
:math:`\hat\omega = \operatorname{wrap}(\psi_b - \psi_a)/\Delta`, which is the candidate's ω when
:math:`|\omega|\Delta < \pi` (integer positions never tell ω from ω + 2π/Δ). It then takes in every position
whose angle the current line predicts to better than π/2 (:data:`SAFE_ANGLE`) with the worst-case error of
the fit, refits, and repeats: each step multiplies the reach. A position the line cannot reach that safely
is left out and named (**aliasing**): the fit never guesses its 2π turns.

**Noise.** The angle of a correct candidate in ``dtype`` is off by at most

.. math:: \eta_j(p) = |p|\,\max_f u_f k_{f,j}\,\omega_j + \sqrt2\,a_0

(:func:`angle_noise`): ``u_f k_{f,j}`` the error per radian of pair ``j``'s angle in each form of the computation
the dtype admits and ``a_0`` the rounding the RoPE tolerance allows at ``p = 0`` on a unit pair (both from
:mod:`refpos.golden.forms` and :mod:`refpos.golden.tolerance`; an absolute error ``e`` on each
component of a pair of size ``m`` turns it by at most :math:`\sqrt2\,e/m`). The line is a weighted least
squares fit (weights :math:`1/\eta^2`); being linear in the angles, its worst-case error is
:math:`\sum_r |c_r|\,\eta_r` for its coefficients ``c_r``: that is ``omega_bound`` (and ``phase_bound``), a
bound on :math:`|\hat\omega - \omega|` for a candidate that rotates the pair at one frequency.

**Misfit.** Each row is then compared with the fitted rotation,
:math:`|z' - \hat A e^{i(\hat\omega p + \hat c)} z| / (\hat A |z|)`, against what the noise and the fit's
own bounds allow; ``misfit`` is the largest ratio. At most 1: the pair is a rotation at one frequency in the
positions given. More: it is not (another pairing of the channels, positions the candidate did not use, an
angle that is not linear in the position).

Everything here works on NumPy arrays; :mod:`refpos.check.identify` calls it per pairing and per axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from refpos.golden import tolerance as tol

#: the largest worst-case error of a predicted angle at which a position is unwrapped (π would be exact
#: for true bounds; π/2 keeps a factor 2 against a noise bound that is too small)
SAFE_ANGLE = math.pi / 2


def angle_noise(dtype: str, positions: np.ndarray, omega: np.ndarray) -> np.ndarray:
    r"""The bound of a correct candidate's angle error, :math:`\eta_j(p) = |p|\max_f u_f k_{f,j}\omega_j + \sqrt2\,a_0`.

    ``positions`` ``(K,)``, ``omega`` ``(m,)`` in pair order; returns ``(K, m)``. ``u_f k_{f,j}`` is the angle
    bound per radian of each form of the computation the dtype admits (:mod:`refpos.golden.forms`: ``pow``,
    ``exp_log``, ``running_product`` in float32; float64), per pair; ``a_0`` the RoPE tolerance at ``p = 0`` for a
    unit pair (:func:`refpos.golden.tolerance.rope_tolerance`).

    >>> [f"{v:.3g}" for v in angle_noise("float32", np.array([0, 1000]), np.array([1.0]))[:, 0]]
    ['6.74e-07', '0.000239']
    """
    from refpos.golden.forms import FORMS, angle_coefficients, check_forms

    rate = np.zeros(np.asarray(omega).shape)
    for name in check_forms(dtype):
        form = FORMS[name]
        if form.kind == "angles":
            rate = np.maximum(rate, form.roundoff * angle_coefficients(form, omega))  # (m,)
    a0 = float(np.asarray(tol.rope_tolerance(dtype, np.zeros(1), np.zeros(1), reference=np.ones((1, 1)),
                                             magnitude=1.0)).max())
    return np.abs(positions.astype(np.float64))[:, None] * rate[None, :] + math.sqrt(2) * a0


@dataclass(frozen=True)
class PairFits:
    """The fitted rotation of every pair (arrays ``(m,)``; NaN where a pair is not determined).

    ``omega``, ``omega_bound``: :math:`\\hat\\omega_j` and the worst-case bound on its error; ``phase``,
    ``phase_bound``: the angle at ``p = 0`` in ``(−π, π]``; ``amplitude``, ``amplitude_bound``: :math:`\\hat A_j`;
    ``misfit``: the largest ratio of a row's error to what it may show (≤ 1: a rotation at one frequency);
    ``reach``: the positions the fit used, ``(min, max)`` per pair; ``notes``: why a pair is undetermined or
    what it left out (``None``: nothing to say); ``maps``: the map of the pair each fit assumed,
    ``"rotation"`` here, another of :data:`refpos.check.fit_maps.MAPS` when the pair was fitted as that map.
    """

    omega: np.ndarray
    omega_bound: np.ndarray
    phase: np.ndarray
    phase_bound: np.ndarray
    amplitude: np.ndarray
    amplitude_bound: np.ndarray
    misfit: np.ndarray
    reach: np.ndarray  # (m, 2)
    notes: tuple[str | None, ...]
    maps: tuple[str, ...] = ()  # per pair; () is "rotation" for every pair

    def __post_init__(self) -> None:
        if not self.maps:
            object.__setattr__(self, "maps", ("rotation",) * self.omega.size)

    @property
    def determined(self) -> np.ndarray:
        """Pairs whose frequency the positions given determine."""
        return np.isfinite(self.omega)

    @property
    def explained(self) -> np.ndarray:
        """Pairs that are the map they were fitted as, at one frequency (determined, misfit ≤ 1)."""
        return self.determined & (self.misfit <= 1.0)

    @property
    def rotation(self) -> np.ndarray:
        """Pairs that are a rotation at one frequency (explained, and fitted as a rotation)."""
        return self.explained & (np.asarray(self.maps) == "rotation")


def wrap(angle: np.ndarray) -> np.ndarray:
    """An angle as its representative in ``[−π, π)``."""
    return (angle + math.pi) % (2 * math.pi) - math.pi


def _by_position(z_in: np.ndarray, z_out: np.ndarray, positions: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Distinct positions ``(K,)``, :math:`\sum z^* z'` and :math:`\sum |z|^2` per position and pair ``(K, m)``
    over the valid rows, and the row → position index ``(N,)``."""
    unique, index = np.unique(positions, return_inverse=True)
    valid = np.isfinite(z_out) & (z_in != 0)  # (N, m)
    product = np.where(valid, np.conj(z_in) * np.where(valid, z_out, 0), 0)
    cross = np.zeros((unique.size, z_in.shape[1]), dtype=np.complex128)
    power = np.zeros((unique.size, z_in.shape[1]))
    np.add.at(cross, index, product)
    np.add.at(power, index, np.where(valid, np.abs(z_in) ** 2, 0.0))
    return unique, cross, power, index


def _line(p: np.ndarray, phi: np.ndarray, eta: np.ndarray, used: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Weighted least squares :math:`\Phi \approx \bar c + \hat\omega (p - \bar p)` per pair, over ``used``.

    Returns ``(ω̂, c̄, p̄, E_c, E_ω)`` ``(m,)``: the worst-case errors of ``c̄`` and ``ω̂`` are
    :math:`E_c = \sum w\eta / \sum w` and :math:`E_\omega = \sum w |p - \bar p| \eta / \sum w (p - \bar p)^2`
    (the absolute coefficients of the fit times the noise bounds), plus the rounding of the fit's own sums
    (``K`` terms: ``K·ε`` of the result).
    """
    w = np.where(used, 1.0 / eta**2, 0.0)  # (K, m)
    pk = p.astype(np.float64)[:, None]
    sw = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_bar = (w * pk).sum(axis=0) / sw
        dp = np.where(used, pk - p_bar, 0.0)
        spp = (w * dp**2).sum(axis=0)
        phi0 = np.where(used, phi, 0.0)
        c_bar = (w * phi0).sum(axis=0) / sw
        omega = np.where(spp > 0, (w * dp * phi0).sum(axis=0) / spp, np.nan)
        e_c = (w * eta).sum(axis=0) / sw
        e_omega = np.where(spp > 0, (w * np.abs(dp) * eta).sum(axis=0) / spp, np.inf)
    # the fit's own float64 arithmetic: sums of K terms round by at most K·u of their size
    terms = used.sum(axis=0) * np.finfo(np.float64).eps
    return omega, c_bar, p_bar, e_c + terms * np.abs(c_bar), e_omega + terms * np.abs(omega)


def fit_pairs(z_in: np.ndarray, z_out: np.ndarray, positions: np.ndarray, dtype: str,
              omega_prior: np.ndarray, *, amplification: float | np.ndarray = 1.0) -> PairFits:
    """Fit :math:`z' = A e^{i(\\omega p + c)} z` for every pair (the module docstring has the method).

    ``z_in``, ``z_out``: complex ``(N, m)``, the input and output pairs of ``N`` rows; ``positions``: int
    ``(N,)``, the position each row was rotated at (for M-RoPE: the axis the pairs are fitted against);
    ``dtype``: what the candidate computed in (its noise, :func:`angle_noise`); ``omega_prior``: ``(m,)``, the
    reference's frequencies, used only to size the noise (never as a guess of the candidate's ω);
    ``amplification``: how many times the noise of :func:`angle_noise` each row may carry, a number or ``(N, m)``
    (a pair read through another map, :mod:`refpos.check.fit_maps`, magnifies the output's rounding by its
    row's factor); a position's angle carries the largest of its rows'.
    """
    m = z_in.shape[1]
    p, cross, power, index = _by_position(z_in, z_out, positions)
    row_gain = np.where(np.isfinite(z_out), np.broadcast_to(np.asarray(amplification, dtype=np.float64),
                                                            z_in.shape), 1.0)  # (N, m)
    gain = np.ones(cross.shape)  # (K, m)
    np.maximum.at(gain, index, row_gain)
    have = power > 0  # (K, m)
    psi = np.angle(cross)
    notes: list[str | None] = [None] * m
    nan = np.full(m, np.nan)
    if p.size < 2:
        reason = f"one position only (p = {int(p[0])}): its angle is p·ω + c, not ω" if p.size else "no rows"
        return PairFits(nan, nan, nan, nan, *_amplitude(cross, power, have, dtype, gain.max(axis=0, initial=1.0)),
                        np.full(m, np.inf),
                        np.full((m, 2), -1), (reason,) * m)
    first, second, gap = _anchors(have, p)  # per pair: the two closest positions with rows unwrap first
    anchored = first >= 0
    pair = np.arange(m)
    omega_scale = np.abs(omega_prior).astype(np.float64)
    for _ in range(2):  # the noise scales with |ω|: sized by the reference's, then by the fit's when larger
        eta = gain * angle_noise(dtype, p, omega_scale)  # (K, m)
        phi = np.full(psi.shape, np.nan)
        a, b = first[anchored], second[anchored]
        phi[a, pair[anchored]] = psi[a, pair[anchored]]
        phi[b, pair[anchored]] = psi[a, pair[anchored]] + wrap(psi[b, pair[anchored]] - psi[a, pair[anchored]])
        used = np.zeros(psi.shape, dtype=bool)
        used[a, pair[anchored]] = used[b, pair[anchored]] = True
        while True:
            omega, c_bar, p_bar, e_c, e_omega = _line(p, phi, eta, used)
            predicted = c_bar + omega * (p[:, None] - p_bar)  # (K, m)
            error = e_c + np.abs(p[:, None] - p_bar) * e_omega + eta
            new = have & ~used & (error < SAFE_ANGLE) & np.isfinite(predicted)
            if not new.any():
                break
            phi = np.where(new, predicted + wrap(psi - predicted), phi)
            used |= new
        larger = np.where(np.isfinite(omega), np.maximum(omega_scale, np.abs(omega)), omega_scale)
        if np.array_equal(larger, omega_scale):
            break
        omega_scale = larger
    phase = wrap(c_bar - omega * p_bar)
    phase_bound = e_c + np.abs(p_bar) * e_omega
    amplitude, amplitude_bound = _amplitude(cross, power, have, dtype, gain.max(axis=0))
    reach = np.stack([np.where(used.any(axis=0), np.where(used, p[:, None], p.max() + 1).min(axis=0), -1),
                      np.where(used.any(axis=0), np.where(used, p[:, None], -1).max(axis=0), -1)], axis=1)
    for j in range(m):
        if not anchored[j]:
            notes[j] = "fewer than two positions with usable rows (input pair zero or output not finite)"
        elif omega_scale[j] * gap[j] >= math.pi:
            notes[j] = (f"aliasing: the closest positions are {gap[j]} apart and |ω|·{gap[j]} ≥ π: ω is determined "
                        f"only modulo 2π/{gap[j]}")
        left = have[:, j] & ~used[:, j]
        if anchored[j] and left.any():
            notes[j] = (f"aliasing: positions {_positions_text(p[left])} left out, the fitted line cannot tell "
                        "their 2π turns apart")
    undetermined = np.array([n is not None and not n.startswith("aliasing: positions") for n in notes])
    omega = np.where(undetermined, np.nan, omega)
    misfit = _misfit(z_in, z_out, positions, index, omega, phase, amplitude, amplitude_bound, e_c, e_omega, p_bar,
                     dtype, omega_scale, row_gain)
    return PairFits(omega, np.where(undetermined, np.nan, e_omega), np.where(undetermined, np.nan, phase),
                    np.where(undetermined, np.nan, phase_bound), amplitude, amplitude_bound,
                    np.where(undetermined, np.inf, misfit), reach, tuple(notes))


def _anchors(have: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair, the indices of the two closest positions that both have rows (``−1`` where fewer than two
    do) and their gap ``(m,)`` each."""
    m = have.shape[1]
    first, second, gap = np.full(m, -1), np.full(m, -1), np.zeros(m, dtype=np.int64)
    for j in range(m):
        rows = np.flatnonzero(have[:, j])
        if rows.size >= 2:
            k = int(np.argmin(np.diff(p[rows])))
            first[j], second[j], gap[j] = rows[k], rows[k + 1], int(p[rows[k + 1]] - p[rows[k]])
    return first, second, gap


def _amplitude(cross: np.ndarray, power: np.ndarray, have: np.ndarray, dtype: str, gain: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\hat A_j = \sum_p |\sum z^* z'| / \sum_p \sum |z|^2` and its bound :math:`\sqrt2\,a_0\,\hat A_j`
    (the output's rounding on a pair of size ``Â|z|``, times each pair's largest ``gain`` ``(m,)``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        amplitude = np.where(have.any(axis=0), np.abs(cross).sum(axis=0) / power.sum(axis=0), np.nan)
    return amplitude, gain * angle_noise(dtype, np.zeros(1), np.zeros(1))[0, 0] * amplitude


def _misfit(z_in: np.ndarray, z_out: np.ndarray, positions: np.ndarray, index: np.ndarray, omega: np.ndarray,
            phase: np.ndarray, amplitude: np.ndarray, amplitude_bound: np.ndarray, e_c: np.ndarray,
            e_omega: np.ndarray, p_bar: np.ndarray, dtype: str, omega_scale: np.ndarray,
            row_gain: np.ndarray) -> np.ndarray:
    """The largest ratio over the rows of ``|z' − Â e^{i(ω̂p + ĉ)} z| / (Â|z|)`` to the error it may show."""
    p = positions.astype(np.float64)[:, None]  # (N, 1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        model = amplitude * np.exp(1j * (omega * p + phase)) * z_in  # (N, m)
        error = np.abs(z_out - model) / (amplitude * np.abs(z_in))
        allowed = (row_gain * angle_noise(dtype, positions, omega_scale) + e_c + np.abs(p - p_bar) * e_omega
                   + amplitude_bound / amplitude)
        ratio = error / allowed
    ratio = np.where(z_in == 0, np.where(z_out == 0, 0.0, np.inf), ratio)  # something from nothing: no rotation
    ratio = np.where(np.isfinite(z_out), ratio, 0.0)  # a NaN or infinite output is named non_finite, not fitted
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    return ratio.max(axis=0) if ratio.size else np.full(z_in.shape[1], np.inf)


def _positions_text(values: np.ndarray) -> str:
    """A few positions: ``"257, 2047, 2048 …"``."""
    shown = ", ".join(str(int(v)) for v in values[:4])
    return shown + (f" … ({values.size} in all)" if values.size > 4 else "")


def common_offset(fits: PairFits, pairs: np.ndarray | None = None) -> tuple[float | None, float, str]:
    r"""One shift ``δ`` of the positions that explains every pair's angle at ``p = 0``:
    :math:`\hat c_j = \hat\omega_j\delta`.

    Returns ``(δ, bound, reason)``: ``δ`` (``None`` when no single shift explains the phases, ``reason`` says
    why) and its worst-case error. The shift is read from the slowest pair (where :math:`|\omega\delta| < \pi`)
    and refined pair by pair towards the fastest, each unwrapped with the current estimate as the positions
    are; then every pair is checked against it. ``pairs``: the pairs to use (default: every pair that is the
    map it was fitted as, :attr:`PairFits.explained`).
    """
    use = fits.explained if pairs is None else pairs & fits.explained
    order = [j for j in np.argsort(np.abs(np.where(use, fits.omega, np.inf))) if use[j] and fits.omega[j] != 0]
    if not order:
        return None, math.inf, "no pair turns at a known, non-zero frequency"
    delta, bound = math.nan, math.inf
    for j in order:
        w, c, e_w, e_c = (float(a[j]) for a in (fits.omega, fits.phase, fits.omega_bound, fits.phase_bound))
        if math.isnan(delta):
            delta, bound = c / w, (e_c + abs(c / w) * e_w) / abs(w)
            continue
        predicted = w * delta
        if abs(w) * bound + e_c + abs(delta) * e_w >= SAFE_ANGLE:
            break  # faster pairs cannot be tied in: δ stays as known
        unwrapped = predicted + float(wrap(np.array(c - predicted)))
        new_bound = (e_c + abs(delta) * e_w) / abs(w)
        if new_bound < bound:
            delta, bound = unwrapped / w, new_bound
    residual = np.abs(wrap(fits.phase - fits.omega * delta))
    allowed = fits.phase_bound + np.abs(fits.omega) * bound + abs(delta) * fits.omega_bound
    bad = [j for j in order if residual[j] > 2 * allowed[j] + 1e-300]
    if bad:
        constant = np.ptp(fits.phase[order]) <= 2 * float(np.max(fits.phase_bound[order]))
        why = (f"every pair's angle at p = 0 is {float(fits.phase[order[0]]):+.6g} rad: a constant phase, not a "
               "shift of the positions") if constant else (
            f"pair {bad[0]}'s angle at p = 0 is {float(fits.phase[bad[0]]):+.6g} rad where a shift of "
            f"{delta:.6g} gives {float(wrap(np.array(fits.omega[bad[0]] * delta))):+.6g}")
        return None, bound, why
    return delta, bound, ""
