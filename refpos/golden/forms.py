r"""The forms a correct RoPE implementation may take, and the error bound each one gives.

A correct implementation differs from the float64 reference by the rounding of the computation it
performs, so the tolerance is derived from that computation, one **form** at a time. Two kinds of form
combine (docs/conventions.md#tolerances):

* **angles** — how ``ω_j`` and the angle ``p·ω_j`` are computed. The angle of pair ``j`` errs by at most

  .. math:: |\delta\varphi_{p,j}| \le |p|\,u\,k_j\,\omega_j, \qquad k_j = c + b\,j + e\,L_j,
      \quad L_j = \ln(1/\omega_j)

  (``u`` the unit roundoff of the path), and a row's bound is its largest pair's,
  :math:`|p|\,u\,\max_j k_j\omega_j`. ``pow`` and ``exp_log`` pay for the rounding of the exponent ``2j/d``
  (it grows with :math:`L_j`); the ``running_product`` of ggml pays one rounding of the product and one
  copy of the rounding of the ratio ``θ^{-2/d}`` per pair before ``j``.
* **storage** — what is rounded to the output dtype and where the rotation's arithmetic runs. For a
  rotated pair of size ``m = A·‖pair‖`` each rounding to a dtype of unit roundoff :math:`u_t` errs by at
  most :math:`u_t` times what it rounds, and :math:`|x_1 c| + |x_2 s| \le A\,\lVert x\rVert` bounds the
  products, so ``n`` roundings on the way cost at most :math:`n\,u_t\,m` (:func:`storage_bound`).

One record per form (:data:`FORMS`); docs, the ``INFO["forms"]`` declaration of the spec suite,
``refpos check --forms`` and :func:`refpos.golden.tolerance.rope_tolerance` read them, and
``refpos/tests/test_tolerance_forms.py`` proves each bound against a NumPy emulation of its form
(:mod:`refpos.golden.emulations`) at positions up to 2²⁰ and head sizes up to 512.

Examples
--------
>>> import numpy as np
>>> w = 10000.0 ** -(np.arange(0, 512, 2) / 512)
>>> [round(angle_weight(name, w), 2) for name in ("pow", "exp_log", "running_product")]
[4.0, 3.12, 32.17]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.golden.ulp import MANTISSA, MIN_EXPONENT, check_dtype

#: the two kinds of form: one of each is in force for every comparison
KINDS = ("angles", "storage")


@dataclass(frozen=True)
class Form:
    """One way a correct implementation computes RoPE, and the bound of its error.

    ``angles`` forms: the angle of pair ``j`` errs by at most ``|p|·roundoff·(c + b·j + e·ln(1/ω_j))·ω_j``.
    ``storage`` forms: ``roundings`` unit roundoffs of the dtype per unit of the pair's size, plus
    ``path_ulps`` float32 ulps of it (the float32 arithmetic around them), or ``rtol`` of it (float64).
    """

    name: str
    kind: str
    dtypes: tuple[str, ...]
    code: str  # what the code does, in one line
    seen_in: str  # real code that takes this form
    reason: str  # the derivation of the bound, in one line
    roundoff: float = 0.0
    c: float = 0.0
    b: float = 0.0
    e: float = 0.0
    roundings: float = 0.0
    path_ulps: float = 0.0
    rtol: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")

    def bound_text(self) -> str:
        """The bound as a formula, for docs and report headers."""
        if self.kind == "angles":
            terms = [f"{self.c:g}"] + [f"{v:g}·{t}" for v, t in ((self.b, "j"), (self.e, "ln(1/ω_j)")) if v]
            return f"|δφ| ≤ |p|·2^{int(np.log2(self.roundoff))}·({' + '.join(terms)})·ω_j"
        if self.rtol:
            return f"{self.rtol:g}·m"
        if not self.roundings:
            return f"{self.path_ulps:g} float32 ulps of m"
        return f"{self.roundings:g}·u·m + {self.path_ulps:g} float32 ulps of m (u: the dtype's unit roundoff)"


LOW = ("bfloat16", "float16")
F32 = 2.0**-24

FORMS: dict[str, Form] = {f.name: f for f in (
    Form("float64", "angles", ("float64",), "ω_j = θ^(−2j/d) or exp(−(2j/d)·ln θ) and p·ω_j in float64",
         "refpos, NumPy references", "each path errs by about (1 + ln(1/ω_j))·p·ω_j·2⁻⁵³ from the exact angle; "
         "two independent paths twice that; c = 4 leaves margin over the measured 1.86", 2.0**-53, c=4.0, e=3.0),
    Form("pow", "angles", ("float32", *LOW), "ω_j = 1/θ^(2j/d) per pair in float32, angle = p·ω_j one float32 product",
         "transformers' RotaryEmbedding (inv_freq), torchtune, vLLM",
         "the exponent 2j/d rounds (ln(1/ω_j)·u), pow errs by up to one ulp (2u), the reciprocal and the "
         "product round (2u)", F32, c=4.0, e=1.0),
    Form("exp_log", "angles", ("float32", *LOW), "ω_j = exp(−(2j/d)·ln θ) in float32",
         "tensor2tensor's and fairseq's sinusoid tables",
         "log errs by up to one ulp, 2j/d and the product round (4·ln(1/ω_j)·u of the exponent), exp errs "
         "by up to one ulp and p·ω rounds (3u)", F32, c=3.0, e=4.0),
    Form("running_product", "angles", ("float32", *LOW), "θ_0 = p, θ_{j+1} = θ_j·s with s = θ^(−2/d), all float32",
         "ggml's rope (llama.cpp, ollama: theta *= theta_scale)",
         "pair j carries j roundings of the product and j copies of the error of s (powf: one ulp), 3j·u; the "
         "exponent −2/d rounds (ln(1/ω_j)·u); freq_factors and the YaRN mix after the product (3u)", F32,
         c=3.0, b=3.0, e=1.0),
    Form("float64_rotation", "storage", ("float64",), "input, tables and rotation in float64",
         "refpos, NumPy references", "operation order moves the last digits: 1e-13 of the pair's size",
         rtol=1e-13),
    Form("float32_rotation", "storage", ("float32",), "input cast to float32, tables and rotation in float32",
         "every float32 library", "the input cast, cos/sin, ×A, two products and a sum each round once (½ ulp): "
         "4 float32 ulps of the pair's size", path_ulps=4.0),
    Form("fused_float32", "storage", LOW, "input and output stored in the dtype, the rotation in float32",
         "kernels that upcast to float32 (onnxruntime's float16 RotaryEmbedding results fit it)",
         "the stored input (u·m after the rotation) and the stored output (u·|y| ≤ u·m)", roundings=2.0,
         path_ulps=4.0),
    Form("input_in_dtype", "storage", LOW, "input stored in the dtype, float32 tables, each product and the sum "
         "rounded to the dtype", "a kernel computing in the dtype with float32 cos/sin",
         "the stored input, the two products and the sum: 3·u·m", roundings=3.0, path_ulps=4.0),
    Form("tables_in_dtype", "storage", LOW, "cos/sin also stored in the dtype (cos.to(x.dtype)), then as "
         "input_in_dtype", "transformers' apply_rotary_pos_emb in bfloat16 / float16",
         "the stored input and tables, the two products and the sum: 4·u·m", roundings=4.0, path_ulps=4.0),
)}


def admitted(dtype: str, kind: str | None = None) -> tuple[str, ...]:
    """The forms a correct implementation in ``dtype`` may take (of one ``kind``, or both)."""
    dtype = check_dtype(dtype)
    return tuple(f.name for f in FORMS.values() if dtype in f.dtypes and kind in (None, f.kind))


def check_forms(dtype: str, forms: Any = None) -> tuple[str, ...]:
    """The forms in force for ``dtype``: those named (each admitted for the dtype), and every admitted form of
    a kind none of the named ones is of. ``None`` or ``()``: every admitted form (what a golden promises).

    >>> check_forms("float16", ["running_product"])
    ('running_product', 'fused_float32', 'input_in_dtype', 'tables_in_dtype')
    """
    dtype = check_dtype(dtype)
    names = () if forms is None else ((forms,) if isinstance(forms, str) else tuple(forms))
    for name in names:
        if not isinstance(name, str) or name not in FORMS:
            raise ValueError(f"forms must name forms of {tuple(FORMS)}, got {name!r}")
        if dtype not in FORMS[name].dtypes:
            raise ValueError(f"form {name!r} is not a form of {dtype} (its dtypes: {FORMS[name].dtypes}); "
                             f"{dtype} admits {admitted(dtype)}")
    out = list(dict.fromkeys(names))
    for kind in KINDS:
        if not any(FORMS[n].kind == kind for n in out):
            out += [n for n in admitted(dtype, kind)]
    return tuple(out)


def angle_coefficients(form: Form, inv_freq: np.ndarray) -> np.ndarray:
    r"""``k_j·ω_j`` per pair: :math:`(c + b\,j + e\,\ln(1/\omega_j))\,\omega_j` (0 for a zero frequency)."""
    w = np.abs(np.asarray(inv_freq, dtype=np.float64).ravel())
    j = np.arange(w.size, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_inverse = np.where(w > 0, np.maximum(-np.log(np.where(w > 0, w, 1.0)), 0.0), 0.0)  # L_j ≥ 0
    return (form.c + form.b * j + form.e * log_inverse) * w


def angle_weight(name: str, inv_freq: Any) -> float:
    r""":math:`\max_j k_j\,\omega_j` of the angle form ``name`` (0 without frequencies): the row bound per unit of
    ``|p|·u``."""
    w = np.asarray(inv_freq, dtype=np.float64)
    return float(angle_coefficients(FORMS[name], w).max()) if w.size else 0.0


def pair_rates(dtype: str, inv_freq: Any, forms: Any = None) -> np.ndarray:
    r"""Per pair, the angle bound per unit of position of the forms in force: :math:`\max_f u_f\,k_{f,j}\,\omega_j`
    (the pairs of ``inv_freq`` in order; 0 for a zero frequency)."""
    names = [n for n in check_forms(dtype, forms) if FORMS[n].kind == "angles"]
    w = np.asarray(inv_freq, dtype=np.float64)
    return np.max([FORMS[n].roundoff * angle_coefficients(FORMS[n], w) for n in names], axis=0)


def angle_rate(dtype: str, inv_freq: Any, forms: Any = None) -> float:
    r"""The angle bound per unit of position of the forms in force: :math:`\max_f u_f \max_j k_{f,j}\,\omega_j`."""
    rates = pair_rates(dtype, inv_freq, forms)
    return float(rates.max()) if rates.size else 0.0


def unit_roundoff(dtype: str) -> float:
    """Half an ulp at 1: 2⁻⁵³, 2⁻²⁴, 2⁻⁸, 2⁻¹¹."""
    return 2.0 ** -(MANTISSA[check_dtype(dtype)] + 1)


def subnormal_step(dtype: str) -> float:
    """The spacing of the dtype's subnormals: the absolute floor of one rounding near zero."""
    dtype = check_dtype(dtype)
    return 2.0 ** (MIN_EXPONENT[dtype] - MANTISSA[dtype])


def storage_coefficients(dtype: str, forms: Any = None) -> tuple[float, float, float]:
    r"""``(relative, path_ulps, floor)`` of the storage forms in force (their largest of each):
    the bound is :math:`\mathrm{relative}\cdot m + \mathrm{path\_ulps}\cdot\mathrm{ulp}_{32}(m) + \mathrm{floor}`.

    ``relative`` is ``n·u/(1 − n·u)`` for ``n`` roundings of unit roundoff ``u`` (the second-order terms
    included), or the float64 ``rtol``; ``floor`` is ``n`` half subnormal steps (a rounding near zero).
    """
    dtype = check_dtype(dtype)
    stores = [FORMS[n] for n in check_forms(dtype, forms) if FORMS[n].kind == "storage"]
    u = unit_roundoff(dtype)
    relative = max(f.rtol + (f.roundings * u / (1.0 - f.roundings * u) if f.roundings else 0.0) for f in stores)
    floor = max(f.roundings for f in stores) * 0.5 * subnormal_step(dtype)
    return relative, max(f.path_ulps for f in stores), floor


def describe_forms(dtype: str, forms: Any = None) -> str:
    """One line naming the forms in force for ``dtype`` and the bound each gives (report headers)."""
    names = check_forms(dtype, forms)
    return "; ".join(f"{n} ({FORMS[n].kind}: {FORMS[n].bound_text()})" for n in names)


def markdown_table() -> str:
    """The forms as the table of docs/conventions.md#tolerances."""
    rows = ["| form | kind | dtypes | what the code does | seen in | bound |", "|---|---|---|---|---|---|"]
    for f in FORMS.values():
        cells = (f"`{f.name}`", f.kind, ", ".join(f.dtypes), f.code, f.seen_in, f.bound_text())
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)

