r"""Tolerances by dtype and position: the error a *correct* implementation can show.

The rule (docs/conventions.md#tolerances, docs/anchors.md#the-cossin-tables), one function per kind of value:

* :func:`value_tolerance` — position-independent values (inverse frequencies, ALiBi slopes, bias
  tables, attention outputs): float64 ``rtol = 1e-13`` (a float64 re-derivation: algebraically equal
  forms differ by a few ulps, 38 ulps ≈ 8e-15 relative for ALiBi slopes at n = 112); float32
  ``rtol = 1e-6`` (float32 anchors: HF ``inv_freq`` ≤ 3.2e-7 relative, BLOOM slopes 5.7e-8);
  bfloat16 / float16 two ulps of the reference (one rounding on each side), never absolute-only.
* :func:`rope_tolerance` — values computed from angles ``p·ω`` (cos/sin, rotated q/k, sinusoid tables).
  The angle of a correct implementation is off by up to ``|p|·u·k_j·ω_j`` and its rounding is a few units
  of the pair's size ``m``, both by the **form** of its computation (:mod:`refpos.golden.forms`: ``pow``,
  ``exp_log``, ``running_product`` angles; float32 rotation, or an input, tables and output stored in
  bfloat16 / float16), so ``atol = m·|p|·max_f u_f·max_j k_{f,j}ω_j + storage(m)`` for the forms in force
  (every form the dtype admits unless named). A fixed float32 atol of 1e-5 rejects correct code from p ≈ 170.
* :func:`integer_tolerance` — T5 buckets, indices: exact.
* :func:`probability_tolerance` — softmax outputs: ``u·(3·max|logit| + 3n + 4)`` for a row of ``n``,
  derived from both forms a correct softmax takes (subtract the maximum, or log-sum-exp).

Every rule is also available as a JSON-ready description (:func:`describe`) stored in the golden
manifest. ``refpos tolerance`` prints the numbers.

Examples
--------
>>> import numpy as np
>>> atol = rope_tolerance("float32", np.array([0, 1, 2048, 131071]), np.array([1.0, 0.01]), forms=["pow"])
>>> [f"{v:.2e}" for v in np.asarray(atol)]
['4.77e-07', '7.15e-07', '4.89e-04', '3.13e-02']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace, to_numpy
from refpos.golden.forms import angle_rate, check_forms, describe_forms, pair_rates, storage_coefficients
from refpos.golden.ulp import DTYPES as DTYPES  # the dtype facts every rule is stated in, re-exported
from refpos.golden.ulp import MANTISSA, as_float_array, check_dtype, ulp

#: unit roundoff of the phase path: float64 angles for float64, else a float32 phase path (a bf16 or
#: fp16 phase path is the bf16_angles bug, not a tolerance); the forms of refpos.golden.forms say more
ANGLE_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "bfloat16": 2.0**-24, "float16": 2.0**-24}
#: float64 re-derivation: operation order moves the last digits (docs/conventions.md#tolerances)
RTOL_FLOAT64 = 1e-13
#: position-independent float32 anchor values (docs/conventions.md#tolerances)
RTOL_FLOAT32 = 1e-6
#: ulps allowed for reduced-precision position-independent values: one rounding on each side
ULPS_LOW = 2.0

REASONS = {
    "float64": "float64 re-derivation: algebraically equal forms differ by a few ulps (rtol 1e-13)",
    "float32": "float32 computation: rtol 1e-6 for position-independent values (HF inv_freq <= 3.2e-7)",
    "bfloat16": "bfloat16 output: 2 ulps of the reference (one rounding each side), never absolute-only",
    "float16": "float16 output: 2 ulps of the reference (one rounding each side), never absolute-only",
}


def value_tolerance(dtype: str, reference: Any, *, scale: Any = None) -> Array:
    r"""Elementwise atol for position-independent values (frequencies, slopes, bias tables, outputs).

    Notes
    -----
    .. math::
        \mathrm{atol} = \begin{cases}
            10^{-13}\,\max(|r|, s) & \text{float64 (re-derivation)}\\
            10^{-6}\,\max(|r|, s) & \text{float32 (anchor values)}\\
            2\,\mathrm{ulp}_{\text{dtype}}(\max(|r|, s)) & \text{bfloat16, float16}
        \end{cases}

    ``s`` (``scale``, default 0) is the natural magnitude of the quantity, a floor for entries that
    cancel to (nearly) zero, e.g. the row norm of an attention output.
    """
    dtype = check_dtype(dtype)
    ref = as_float_array(reference, "reference")
    xp = array_namespace(ref)
    mag = xp.abs(ref)
    if scale is not None:
        mag = xp.maximum(mag, as_float_array(scale, "scale", xp))
    if dtype == "float64":
        return RTOL_FLOAT64 * mag
    if dtype == "float32":
        return RTOL_FLOAT32 * mag
    return ULPS_LOW * ulp(mag, dtype)


def integer_tolerance(reference: Any) -> Array:
    """Integers (T5 buckets, indices) compare exactly: an all-zero atol."""
    ref = as_float_array(reference, "reference")
    return array_namespace(ref).zeros_like(ref)


#: the relative error of ``exp`` in unit roundoffs: one ulp (2u), as glibc's and NumPy's SIMD kernels keep
EXP_ROUNDOFFS = 2.0


def probability_tolerance(dtype: str, logits: Any) -> float:
    r"""atol for the probabilities of a correct softmax of ``logits`` (float64 numbers, the row on the last axis)
    computed in ``dtype``.

    Notes
    -----
    A correct implementation stores the logits in its dtype and computes :math:`p_i = e^{z_i - c} / \sum_k
    e^{z_k - c}` in one of two forms: ``c`` the row maximum (subtract, exponentiate, normalise), or
    ``c = \log\sum_k e^{z_k}`` (log-sum-exp, then ``exp(z_i − c)``). With ``u`` the unit roundoff, ``M`` the
    largest ``|logit|`` and ``n`` the row length, each step moves :math:`p_i` by a relative amount:

    * storing ``z_i`` rounds it by :math:`\varepsilon_i z_i`, :math:`|\varepsilon_i| \le u`. A shift common to
      the row cancels, so :math:`p_i` moves by :math:`p_i(\varepsilon_i z_i - \sum_k p_k\varepsilon_k z_k)`,
      at most :math:`2uM\,p_i`;
    * log-sum-exp rounds ``c`` (of magnitude at most ``M + ln n``) by :math:`u(M + \ln n)`, a shift of every
      :math:`z_i - c` that scales the row: at most :math:`u(M + n - 1)\,p_i` (:math:`\ln n \le n - 1`);
    * the subtraction ``z_i − c`` rounds by :math:`u|z_i - c|`, and :math:`p_i\,|z_i - c| \le e^{-1}` (since
      :math:`p_i \le e^{z_i - c}`), so it costs :math:`u/e` for :math:`p_i` and :math:`n\,u/e` through the sum:
      at most :math:`u(n + 1)/2`;
    * ``exp`` errs by one ulp (2u), twice (the numerator and, averaged, the sum): 4u; the sum of ``n`` terms
      rounds by :math:`(n-1)u`, the division by ``u``.

    Summed, with :math:`p_i \le 1` (:math:`3uM`, then :math:`(n - 1) + (n + 1)/2 + 4 + (n - 1) + 1 \le 3n + 4`):

    .. math:: |\delta p_i| \le u\,(3M + 3n + 4)

    float32 and float64 use their own ``u`` (2⁻²⁴, 2⁻⁵³): the :math:`2uM = \max|\mathrm{logit}|\cdot 2^{-23}`
    of the stored logits, plus the log-sum-exp shift and the arithmetic. bfloat16 / float16: two ulps of 1
    (one rounding of the stored output on each side).

    >>> f"{probability_tolerance('float32', np.array([[10.0, -3.0]])):.3e}"
    '2.384e-06'
    """
    dtype = check_dtype(dtype)
    z = to_numpy(as_float_array(logits, "logits"))
    finite = z[np.isfinite(z)]  # NaN-safe; a masked −inf is not a stored magnitude
    top = float(abs(finite).max()) if finite.size else 0.0
    if dtype in ("float64", "float32"):
        return softmax_bound(2.0 ** -(MANTISSA[dtype] + 1), top, z.shape[-1] if z.ndim else 1)
    return ULPS_LOW * 2.0 ** -MANTISSA[dtype]


def softmax_bound(u: float, top: float, n: int) -> float:
    r""":math:`u\,(3M + 3n + 4)`: the bound of :func:`probability_tolerance` for unit roundoff ``u``, largest
    ``|logit|`` ``M`` and rows of ``n``; it also bounds :math:`\sum_i |\delta p_i|` of a row."""
    return u * (3.0 * top + 3.0 * n + 2.0 * EXP_ROUNDOFFS)


def attention_tolerance(dtype: str, q: Any, k: Any, v: Any, *, scale: float | None = None,
                        bias: Any = None) -> float:
    r"""atol for :math:`\mathrm{softmax}(\mathrm{scale}\cdot q k^\top + \mathrm{bias},\ \text{masked})\,v`
    (``q`` ``(..., T_q, d)``, ``k`` ``(..., T_k, d)``, ``v`` ``(..., T_k, d_v)``, float64 numbers) computed by a
    correct implementation in ``dtype``.

    Notes
    -----
    With ``u`` the dtype's unit roundoff, ``n = T_k`` and ``‖·‖`` the largest row norm:

    * a logit is ``d`` products summed, scaled and biased: storing ``q`` and ``k`` (2u), the dot product
      (``d·u`` of :math:`\sum_i |q_i k_i| \le \lVert q\rVert\,\lVert k\rVert`), the scale (u), and storing
      the bias (u of it):
      :math:`\delta s \le (d + 3)\,u\,\mathrm{scale}\,\lVert q\rVert\lVert k\rVert + u\max|\mathrm{bias}|`;
    * a change :math:`\delta s_j` of the logits moves the probabilities by :math:`p_j(\delta s_j - \sum_k p_k
      \delta s_k)`, at most :math:`2\,\delta s` summed over the row, and the softmax's own arithmetic by
      :func:`softmax_bound` (``M`` the largest ``|logit|``, at most
      :math:`\mathrm{scale}\,\lVert q\rVert\lVert k\rVert + \max|\mathrm{bias}|`);
    * :math:`o = \sum_j p_j v_j`: storing ``v`` (u) and the sum of ``n`` products (``n·u``), each of size at most
      :math:`\max|v|`.

    .. math:: |\delta o| \le \max|v|\,\bigl(2\,\delta s + u\,(3M + 3n + 4) + (n + 1)\,u\bigr)

    The same ``u`` for every step: a float32 implementation computes in float32, a bfloat16 / float16 one is
    held to its dtype's rounding in every step (the most a correct low-precision kernel rounds).
    """
    dtype = check_dtype(dtype)
    u = 2.0 ** -(MANTISSA[dtype] + 1)
    q, k, v = (np.asarray(to_numpy(as_float_array(a, name)), dtype=np.float64) for a, name in
               ((q, "q"), (k, "k"), (v, "v")))
    d, n = q.shape[-1], k.shape[-2]
    scale = d**-0.5 if scale is None else float(scale)
    top_bias = float(np.abs(np.asarray(to_numpy(bias), dtype=np.float64)).max()) if bias is not None else 0.0
    qk = abs(scale) * float(np.linalg.norm(q, axis=-1).max()) * float(np.linalg.norm(k, axis=-1).max())
    logit_error = (d + 3) * u * qk + u * top_bias
    top_v = float(np.abs(v).max()) if v.size else 0.0
    return top_v * (2.0 * logit_error + softmax_bound(u, qk + top_bias, n) + (n + 1) * u)


def _max_omega(inv_freq: Any) -> float:
    r""":math:`\max_j |\omega_j|` (0 without frequencies): the fastest-turning pair sets every angle bound."""
    w = to_numpy(as_float_array(inv_freq, "inv_freq"))
    return float(abs(w).max()) if w.size else 0.0


def _half_ulp_at_one(dtype: str) -> float:
    """Half an ulp of ``dtype`` at 1 (2⁻⁵³, 2⁻²⁴, 2⁻⁸, 2⁻¹¹): a correct output's own rounding at unit size."""
    return 0.5 * 2.0 ** -MANTISSA[dtype]


def angle_error_bound(dtype: str, positions: Any, inv_freq: Any, *, forms: Any = None) -> Array:
    r"""Per-position bound of the angle error of a correct phase path: :math:`|p|\,\max_f u_f\max_j k_{f,j}\,\omega_j`.

    ``k_{f,j} = c + b·j + e·ln(1/ω_j)`` of each angle form ``f`` in force (:mod:`refpos.golden.forms`; every
    form the dtype admits unless ``forms`` names some): float64 ``c = 4, e = 3``, ``u = 2⁻⁵³``; float32 paths
    ``pow`` (c = 4, e = 1), ``exp_log`` (c = 3, e = 4), ``running_product`` (c = 3, b = 3, e = 1), ``u = 2⁻²⁴``.
    """
    dtype = check_dtype(dtype)
    p = as_float_array(positions, "positions")
    xp = array_namespace(p)
    return xp.abs(p) * angle_rate(dtype, to_numpy(as_float_array(inv_freq, "inv_freq")), forms)


def frequency_tolerance(dtype: str, inv_freq: Any, *, forms: Any = None) -> np.ndarray:
    r"""Per pair, the atol of the inverse frequencies ``inv_freq`` ``(..., m)`` of a correct implementation in
    ``dtype``: the pairs along the last axis, one bound per pair (the largest over the leading rows).

    Notes
    -----
    float32: ``ω_j`` is what an angle form computes at position 1, so the angle forms' bound at ``|p| = 1``
    bounds its error (:func:`refpos.golden.forms.pair_rates`, every form float32 admits unless ``forms`` names
    some; one rounding more than ``ω_j`` itself needs, that of the product ``p·ω_j``):

    .. math:: |\delta\omega_j| \le \max_f u_f\,(c_f + b_f\,j + e_f \ln(1/\omega_j))\,\omega_j

    ``exp_log`` pays ``4·ln(1/ω_j)`` roundings of the exponent: at θ = 5·10⁵, d = 128 the slowest pair may err
    by ``2⁻²⁴·(3 + 4·13.1)·ω ≈ 3.3e-6·ω``, more than a fixed rtol of 1e-6 admits. float64 (the re-derivation rule, rtol
    1e-13 ≥ the float64 form's ``2⁻⁵³(4 + 3 L_j)``) and bfloat16 / float16 (two ulps: the value rule) keep
    :func:`value_tolerance`.
    """
    dtype = check_dtype(dtype)
    w = np.abs(np.asarray(to_numpy(as_float_array(inv_freq, "inv_freq")), dtype=np.float64))
    rows = w.reshape(-1, w.shape[-1]) if w.ndim else w.reshape(1, 1)
    if dtype != "float32":
        return np.max(np.asarray(to_numpy(value_tolerance(dtype, rows))), axis=0)
    return np.max([pair_rates(dtype, row, forms) for row in rows], axis=0)


def correct_error(dtype: str, positions: Any, inv_freq: Any) -> Array:
    r"""The error a correct implementation in ``dtype`` typically shows on a rotated pair of unit size.

    Not a bound (that is :func:`rope_tolerance`, which is never smaller): the size of what a fixed atol
    has to admit, used to say from which position a fixed atol rejects correct code.

    Notes
    -----
    .. math:: e(p) = \tfrac12\,\mathrm{ulp}_{\text{dtype}}(1) + p\,\max_j\omega_j\,u

    the output's own rounding (half an ulp of the dtype at 1: 2⁻²⁴ float32, 2⁻⁸ bfloat16, 2⁻¹¹ float16,
    2⁻⁵³ float64) plus the angle error of the phase path (``u`` = 2⁻²⁴ for a float32 phase path, measured
    0.9–1.2·p·max ω·2⁻²⁴; 2⁻⁵³ for float64 angles).

    >>> [f"{e:.4g}" for e in np.asarray(correct_error("float32", np.array([0, 166, 167]), np.array([1.0])))]
    ['5.96e-08', '9.954e-06', '1.001e-05']
    """
    dtype = check_dtype(dtype)
    p = as_float_array(positions, "positions")
    xp = array_namespace(p)
    max_omega = _max_omega(inv_freq)
    return _half_ulp_at_one(dtype) + xp.abs(p) * max_omega * ANGLE_ROUNDOFF[dtype]


def first_rejected_position(dtype: str, atol: float, inv_freq: Any, max_position: int) -> int | None:
    r"""The first position ``p ≤ max_position`` where :func:`correct_error` exceeds ``atol``, else None.

    Notes
    -----
    .. math:: p^* = \max\Bigl(0,\ \Bigl\lfloor \frac{\mathrm{atol} - \tfrac12\mathrm{ulp}(1)}
        {\max_j\omega_j\,u} \Bigr\rfloor + 1\Bigr)

    (0 when the output's rounding alone exceeds ``atol``: bfloat16 and float16 against 1e-5).

    >>> [first_rejected_position(d, 1e-5, [1.0], 131072) for d in ("float64", "float32", "bfloat16")]
    [None, 167, 0]
    """
    dtype = check_dtype(dtype)
    max_omega = _max_omega(inv_freq)
    rounding = _half_ulp_at_one(dtype)
    if rounding > atol:
        return 0
    if max_omega == 0.0:
        return None
    first = int(np.floor((atol - rounding) / (max_omega * ANGLE_ROUNDOFF[dtype]))) + 1
    return first if first <= max_position else None


def frequency_promise(dtype: str, inv_freq: Any, max_position: int) -> str:
    """What the ``dtype`` tolerances assume about the frequencies, in one sentence with its number.

    Every rule here assumes ω and the angles p·ω computed in float32 (or float64) and only the output
    stored in ``dtype``. Frequencies or angles rounded to bfloat16 or float16 are a mistake (``refpos
    check`` names it ``bf16_angles``), not a tolerance: rounding ω to a dtype with unit roundoff ``u``
    moves the angle at position p by up to ``p·max ω·u``.
    """
    dtype = check_dtype(dtype)
    if dtype == "float64":
        return "ω and the angles p·ω in float64 throughout"
    max_omega = _max_omega(inv_freq)
    shift = max_position * max_omega * _half_ulp_at_one("bfloat16")
    kept = "float32 (HF's inv_freq: rtol 1e-6 of float64)" if dtype == "float32" else "float32 or float64"
    return (f"ω and p·ω in {kept}, only the output in {dtype}; ω or p·ω rounded to bfloat16 or float16 is a "
            f"bug (refpos check: bf16_angles), not a tolerance: a bfloat16 ω moves the angle at position "
            f"{max_position} by up to {shift:.3g} rad")


def rope_tolerance(
    dtype: str,
    positions: Any,
    inv_freq: Any,
    *,
    reference: Any = None,
    magnitude: Any = 1.0,
    forms: Any = None,
) -> Array:
    r"""atol for angle-derived values (cos/sin, rotated q/k, sinusoid tables) of a correct implementation.

    Parameters
    ----------
    dtype : {"float64", "float32", "bfloat16", "float16"}
        The dtype the candidate computed (and stored) in.
    positions : int array ``(..., T)``
    inv_freq : array ``(m,)``
        The frequencies in use, in pair order (the running product's bound grows with the pair index).
    reference : array ``(..., T, n)``, optional
        The reference values: the result is broadcast to their shape. Without it the result is per
        position, shape ``(..., T)``.
    magnitude : float or array broadcastable to the result
        Size ``m`` of the rotated quantity: 1 for cos/sin (``A`` with the attention factor), ``A·‖pair‖``
        for rotated q/k.
    forms : names of :data:`refpos.golden.forms.FORMS`, optional
        The forms the candidate takes (``INFO["forms"]``, ``refpos check --forms``); a kind left out (angles,
        storage) means every form of that kind the dtype admits, ``None`` every admitted form.

    Notes
    -----
    .. math::
        \mathrm{atol} = m\,|p|\,\max_f u_f\max_j k_{f,j}\,\omega_j \;+\; \begin{cases}
            10^{-13}\, m & \text{float64}\\
            4\,\mathrm{ulp}_{32}(m) & \text{float32}\\
            \frac{n u_t}{1 - n u_t}\,m + 4\,\mathrm{ulp}_{32}(m) + \tfrac n2\,\mathrm{sub}_t & \text{bfloat16, float16}
        \end{cases}

    with ``n`` the largest number of roundings to the dtype among the storage forms in force (2 fused
    float32, 3 input in the dtype, 4 tables in the dtype), ``u_t`` the dtype's unit roundoff and ``sub_t``
    its subnormal spacing.
    """
    dtype = check_dtype(dtype)
    angle = angle_error_bound(dtype, positions, inv_freq, forms=forms)  # (..., T)
    xp = array_namespace(angle)
    mag = as_float_array(magnitude, "magnitude", xp)
    if reference is None:
        base = angle * mag
    else:
        ref = as_float_array(reference, "reference", xp)
        base = angle[..., None] * mag  # (..., T, n)
        if tuple(base.shape) != tuple(ref.shape):
            base = base + xp.zeros_like(ref)  # broadcast to the reference's shape
    relative, path_ulps, floor = storage_coefficients(dtype, forms)
    stored = relative * mag + floor
    if path_ulps:
        stored = stored + path_ulps * ulp(mag, "float32")
    return base + stored


@dataclass(frozen=True)
class ToleranceRule:
    """A tolerance rule as stored in the golden manifest (JSON-ready)."""

    rule: str  # "value", "rope", "integer", "probability"
    dtype: str
    reason: str
    rtol: float = 0.0
    ulps: float = 0.0
    angle_c: float = 0.0
    angle_roundoff: float = 0.0
    forms: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v not in (0.0, ()) or k in ("rule", "dtype", "reason")}
        if self.forms:
            out["forms"] = list(self.forms)
        return out


def describe(rule: str, dtype: str) -> dict[str, Any]:
    """JSON description of a rule for one dtype: name, parameters and reason (manifest field)."""
    dtype = check_dtype(dtype)
    if rule == "integer":
        return ToleranceRule("integer", dtype, "integers (buckets, indices) compare exactly").to_json()
    if rule == "value":
        if dtype in ("float64", "float32"):
            rtol = RTOL_FLOAT64 if dtype == "float64" else RTOL_FLOAT32
            return ToleranceRule("value", dtype, REASONS[dtype], rtol=rtol).to_json()
        return ToleranceRule("value", dtype, REASONS[dtype], ulps=ULPS_LOW).to_json()
    if rule == "rope":
        names = check_forms(dtype)
        reason = ("angle-derived: every form a correct " + dtype + " implementation may take ("
                  + ", ".join(names) + "; docs/conventions.md#tolerances): " + describe_forms(dtype)
                  + "; the bound of the forms in force, per position, scaled by the pair's size m")
        return ToleranceRule("rope", dtype, reason, angle_roundoff=ANGLE_ROUNDOFF[dtype], forms=names).to_json()
    if rule == "probability":
        return ToleranceRule("probability", dtype, "softmax: u·(3·max|logit| + 3n + 4), n the row length "
                              "(max-subtracted or log-sum-exp)").to_json()
    raise ValueError(f"rule must be one of ('value', 'rope', 'integer', 'probability'), got {rule!r}")
