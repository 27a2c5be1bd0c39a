"""Shared helpers of the spec suite: the implementation under test, skips for what it lacks, tolerances.

* :data:`IMPL` — the adapter module named by ``REFPOS_IMPL`` (default ``refpos.testing.adapter``).
* :func:`require` — the adapter's functions, or a skip naming what is missing.
* :func:`assert_close` / :func:`tolerance_array` / :func:`tolerance` — tolerances that follow from
  ``INFO["dtype"]`` and, for angle-derived values, from the position, as :mod:`refpos.golden.tolerance`
  implements them (the rule ``refpos check`` and the goldens use);
* :func:`assert_within` — an explicit ``rtol``/``atol`` (from :func:`tolerance` or stated with its reason),
  through the same comparison;
* :func:`assert_quoted` — numbers quoted to a few digits: half a unit of the last digit plus the dtype rule;
* :func:`declared_support` — the rope types, layouts and placements an adapter declares in ``INFO``;
* :func:`size`, :func:`size_from`, :func:`sized_lists` — the sizes the RoPE and attention tests draw (tokens,
  heads, batch, head and rotated widths, lists of positions): drawn, or one fixed value each under
  ``REFPOS_SHAPES=fixed`` (:data:`SHAPES`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

import refpos.golden.tolerance as tol_rules
from refpos.backend import to_numpy
from refpos.golden.compare import compare
from refpos.golden.forms import describe_forms
from refpos.testing import declarations

IMPL_NAME = os.environ.get("REFPOS_IMPL", "refpos.testing.adapter")
#: the repository root, so that the adapters shipped with the suite import as ``spec_tests.<...>``
ROOT = Path(__file__).resolve().parent.parent


def load_impl() -> ModuleType:
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    try:
        return importlib.import_module(IMPL_NAME)
    except ImportError as exc:
        raise pytest.UsageError(f"REFPOS_IMPL={IMPL_NAME!r} cannot be imported: {exc}") from exc


IMPL = load_impl()


def require(impl: ModuleType, *names: str) -> Any:
    """The adapter's functions ``names``; skip the test (with the reason) if one is missing."""
    missing = [n for n in names if not callable(getattr(impl, n, None))]
    if missing:
        pytest.skip(f"{IMPL_NAME} does not provide {', '.join(missing)}")
    funcs = tuple(getattr(impl, n) for n in names)
    return funcs[0] if len(funcs) == 1 else funcs


def info(impl: ModuleType) -> dict[str, Any]:
    """The adapter's ``INFO`` dict (empty when it declares none)."""
    declared = getattr(impl, "INFO", None)
    return dict(declared) if isinstance(declared, dict) else {}


def declared_value(key: str, impl: ModuleType | None = None) -> str:
    """The adapter's one-value declaration ``INFO[key]`` (refpos/testing/declarations.py; its default when
    left out); a value outside the record is a usage error."""
    try:
        return declarations.declared_value(IMPL if impl is None else impl, key)
    except declarations.DeclarationError as exc:
        raise pytest.UsageError(str(exc)) from None


def declared_list(key: str, impl: ModuleType | None = None) -> tuple[str, ...] | None:
    """The adapter's list declaration ``INFO[key]`` (``None`` when left out); a bad one is a usage error."""
    try:
        return declarations.declared_list(IMPL if impl is None else impl, key)
    except declarations.DeclarationError as exc:
        raise pytest.UsageError(str(exc)) from None


def check_declarations(impl: ModuleType | None = None) -> None:
    """Every declaration of the adapter read once, and what they imply (a usage error otherwise)."""
    try:
        declarations.check_declarations(IMPL if impl is None else impl)
    except declarations.DeclarationError as exc:
        raise pytest.UsageError(str(exc)) from None


def declared_constants(rope_type: str) -> dict[str, Any]:
    """The rope keys the adapter hard-codes for ``rope_type`` (``INFO["rope_constants"]``): the strategies draw
    them at those values."""
    try:
        return declarations.declared_constants(IMPL, rope_type)
    except declarations.DeclarationError as exc:
        raise pytest.UsageError(str(exc)) from None


#: the ``INFO`` lists that restrict what the RoPE strategies draw (refpos/testing/declarations.py)
SUPPORT_KEYS: tuple[str, ...] = ("rope_types", "rope_layouts", "rope_placements")


def declared_support(impl: ModuleType | None = None) -> dict[str, tuple[str, ...]]:
    """The parts of the input space the adapter declares in ``INFO`` (only the keys it sets).

    ``INFO["rope_types"]``, ``INFO["rope_layouts"]`` and ``INFO["rope_placements"]`` (partial-rotary
    placements; an empty list: no partial rotary) restrict what the RoPE strategies draw, so a narrow
    adapter is tested on what it implements instead of rejecting most drawn examples. A key left out
    means everything (the adapter may still raise ``NotImplementedError`` per example).
    """
    target = IMPL if impl is None else impl
    out: dict[str, tuple[str, ...]] = {}
    for key in SUPPORT_KEYS:
        values = declared_list(key, target)
        if values is not None:
            out[key] = values
    return out


def needs(key: str, *values: str) -> None:
    """Skip, before anything is drawn or called, a test that needs all of ``values`` of a support list the
    adapter declares without them (``INFO["rope_layouts"]`` without one of the two layouts a conjugacy
    compares)."""
    declared = declared_support().get(key)
    missing = [] if declared is None else [v for v in values if v not in declared]
    if missing:
        pytest.skip(f"needs INFO[{key!r}] to include {list(values)}; {IMPL_NAME} declares {list(declared or ())}")


def supported_subset(key: str, wanted: tuple[str, ...]) -> tuple[str, ...]:
    """The values of ``wanted`` the adapter declares for ``key`` (all of them when it declares none)."""
    declared = declared_support().get(key)
    return wanted if declared is None else tuple(v for v in wanted if v in declared)


# ------------------------------------------------------------------------------------- shapes
#: ``REFPOS_SHAPES``: ``drawn`` (the default: every size drawn from its range) or ``fixed``: every size the RoPE and
#: attention tests draw is one value per range (:func:`size`), so a library that compiles per input shape (a JIT:
#: tinygrad, JAX, torch.compile) compiles once per test instead of once per example; the values, the
#: positions and the configurations are drawn as before
SHAPES = os.environ.get("REFPOS_SHAPES", "drawn")
if SHAPES not in ("drawn", "fixed"):
    raise pytest.UsageError(f"REFPOS_SHAPES must be 'drawn' or 'fixed', got {SHAPES!r}")
#: the size a fixed range takes (clamped into the range), and the widest fixed head
FIXED_SIZE, FIXED_HEAD = 4, 16


def fixed_size(lo: int, hi: int) -> int:
    """The one size of ``[lo, hi]`` under ``REFPOS_SHAPES=fixed``: :data:`FIXED_SIZE` clamped into the range.

    >>> [fixed_size(1, 7), fixed_size(1, 2), fixed_size(8, 8), fixed_size(6, 40)]
    [4, 2, 8, 6]
    """
    return min(max(FIXED_SIZE, lo), hi)


def size(lo: int, hi: int) -> st.SearchStrategy[int]:
    """A size in ``[lo, hi]`` (tokens, heads, batch): drawn, or :func:`fixed_size` under ``REFPOS_SHAPES=fixed``."""
    return st.just(fixed_size(lo, hi)) if SHAPES == "fixed" else st.integers(lo, hi)


def size_from(values: Sequence[int]) -> st.SearchStrategy[int]:
    """A size among ``values`` (head widths): drawn, or under ``REFPOS_SHAPES=fixed`` the largest of them up to
    :data:`FIXED_HEAD` (the smallest when all are wider)."""
    if SHAPES != "fixed":
        return st.sampled_from(list(values))
    return st.just(max((v for v in values if v <= FIXED_HEAD), default=min(values)))


def sized_lists(elements: st.SearchStrategy[Any], lo: int, hi: int) -> st.SearchStrategy[list[Any]]:
    """Lists of ``lo`` to ``hi`` ``elements`` (positions of a sequence): under ``REFPOS_SHAPES=fixed`` of the one
    length :func:`fixed_size`."""
    n = fixed_size(lo, hi)
    return st.lists(elements, min_size=n, max_size=n) if SHAPES == "fixed" else st.lists(elements, min_size=lo,
                                                                                         max_size=hi)


# ------------------------------------------------------------------------------------- tolerances
#: kinds of compared quantity (:mod:`refpos.golden.tolerance` has one rule per kind)
KINDS = ("exact", "stored", "value", "phase", "probability")


def cases(argnames: str, rows: Any, shown: str | None = None) -> list[Any]:
    """``pytest.param`` rows with readable ids: ``name=value`` for the arguments named in ``shown``
    (comma-separated; default all), joined by ``-``; expected values are best left out of ids.

    >>> [p.id for p in cases("n_heads", [1, 12])]
    ['n_heads=1', 'n_heads=12']
    """
    names = [n.strip() for n in argnames.split(",")]
    keep = names if shown is None else [n.strip() for n in shown.split(",")]
    out = []
    for row in rows:
        values = tuple(row) if len(names) > 1 else (row,)
        parts = [f"{name}={_id_value(value)}" for name, value in zip(names, values, strict=True) if name in keep]
        out.append(pytest.param(*values, id="-".join(parts)))
    return out


def _id_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ",".join(_id_value(v) for v in np.asarray(value).tolist()) + "]"
    return str(value)


def declared_dtype(impl: ModuleType) -> str:
    """``INFO["dtype"]`` of the adapter (``"float64"`` when it declares none), normalised."""
    try:
        return tol_rules.check_dtype(info(impl).get("dtype", "float64"))
    except ValueError as exc:
        raise pytest.UsageError(f"{IMPL_NAME}: INFO['dtype']: {exc}") from exc


def tolerance_array(
    impl: ModuleType,
    expected: Any,
    kind: str = "value",
    *,
    positions: Any = None,
    inv_freq: Any = None,
    magnitude: Any = 1.0,
    scale: Any = None,
    logits: Any = None,
    dtype: str | None = None,
) -> np.ndarray:
    """Elementwise atol for the adapter's output against the float64 ``expected``, by the rule of
    ``refpos check`` (:mod:`refpos.golden.tolerance`) for the adapter's ``INFO["dtype"]``.

    Parameters
    ----------
    kind
        ``"exact"`` — integers (buckets, indices); ``"stored"`` — values that come back unchanged but
        stored in the declared dtype (pass-through channels, rows of a bias or embedding table);
        ``"value"`` — position-independent values (slopes,
        inverse frequencies, bias tables, attention outputs; ``scale`` is the natural magnitude, a floor
        for entries that cancel to zero); ``"phase"`` — values computed from angles ``p·ω`` (cos/sin,
        rotated q/k, sinusoid tables): ``positions`` ``(..., T)`` are the positions of the rows of
        ``expected`` ``(..., T, n)``, ``inv_freq`` the frequencies in use (only max ω enters; default 1),
        ``magnitude`` the size of a rotated pair (1 for cos/sin, ``A·‖pair‖`` for q/k);
        ``"probability"`` — softmax outputs of ``logits``.
    dtype
        The dtype whose rule applies, when it is not the adapter's: the rounding of an anchor that is
        itself a float32 computation (:func:`assert_close`'s ``anchor_dtype``).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    dtype = declared_dtype(impl) if dtype is None else tol_rules.check_dtype(dtype)
    ref = np.asarray(expected, dtype=np.float64)
    if kind == "exact":
        return np.zeros(ref.shape)
    if kind == "stored":
        return stored_tolerance(dtype, ref)
    if kind == "value":
        atol = tol_rules.value_tolerance(dtype, ref, scale=None if scale is None else np.asarray(scale, float))
    elif kind == "phase":
        if positions is None:
            raise ValueError("kind='phase' needs the positions of the compared rows")
        freqs = np.ones(1) if inv_freq is None else np.asarray(inv_freq, dtype=np.float64)
        pos = np.asarray(positions)
        per_row = ref[..., None] if ref.ndim == pos.ndim else ref  # one value per position: (..., T, 1)
        atol = tol_rules.rope_tolerance(dtype, pos, freqs, reference=per_row,
                                        magnitude=np.asarray(magnitude, dtype=np.float64),
                                        forms=declared_forms(impl) if dtype == declared_dtype(impl) else None)
        atol = np.reshape(to_numpy(atol), ref.shape)
    else:
        if logits is None:
            raise ValueError("kind='probability' needs the logits")
        atol = tol_rules.probability_tolerance(dtype, np.asarray(logits, dtype=np.float64))
    return np.broadcast_to(np.asarray(to_numpy(atol) if not np.isscalar(atol) else atol, float), ref.shape)


def stored_tolerance(dtype: str, reference: Any) -> np.ndarray:
    r"""atol for a value that should come back unchanged, stored in ``dtype``: round to nearest errs by
    at most half a unit in the last place, :math:`\tfrac12\,\mathrm{ulp}_{\text{dtype}}(|r|)`; float64
    (no rounding at all): 0, bit for bit."""
    ref = np.asarray(reference, dtype=np.float64)
    if dtype == "float64":
        return np.zeros(ref.shape)
    return 0.5 * np.asarray(to_numpy(tol_rules.ulp(np.abs(ref), dtype)), dtype=np.float64)


def quoted(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(value, atol of the quoting)`` of numbers quoted as text: half a unit of the last quoted digit.

    ``"0.905551"`` is 0.905551 ± 5e-7; ``"9.9999999833e-05"`` is ± 5e-16. Add the declared dtype's own
    tolerance (:func:`assert_quoted` does) and a value quoted to six digits still leaves a float32
    implementation its rounding.
    """
    out, half_units = [], []
    for text in values:
        mantissa, _, exponent = text.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        out.append(float(text))
        half_units.append(0.5 * 10.0 ** (-decimals + int(exponent or 0)))
    return np.array(out), np.array(half_units)


def assert_quoted(actual: Any, values: list[str], impl: ModuleType, *, what: str = "") -> None:
    """Assert ``actual`` equals numbers quoted to a few digits: ``|actual − q| ≤ ½ unit of the last
    quoted digit + the dtype's value tolerance`` (:func:`quoted`, :func:`tolerance_array`)."""
    expected, quoting = quoted(values)
    actual = np.asarray(actual, dtype=np.float64)
    label = what or "quoted values"
    if actual.shape != expected.shape:
        raise AssertionError(f"{label}: shape {actual.shape}, expected {expected.shape}")
    result = compare(actual, expected, atol=quoting + tolerance_array(impl, expected, "value"))
    if not result.ok:
        worst = result.worst_index[0]
        raise AssertionError(f"{label}: {result.n_outside} of {result.n} values outside the quoting (½ unit of the "
                             f"last digit) + the {declared_dtype(impl)} rule; worst at {worst}: got "
                             f"{actual[worst]!r}, quoted {values[worst]}, |diff| {result.error[worst]:.3g} > "
                             f"{result.allowed[worst]:.3g}")


def at_most(value: Any, bound: float, impl: ModuleType, *, what: str = "") -> None:
    """Assert ``value ≤ bound`` up to the declared dtype's rounding of ``bound`` (float64: rtol 1e-13)."""
    value = np.asarray(value, dtype=np.float64)
    slack = float(tolerance_array(impl, np.array([bound]), "value")[0])
    bad = ~(value <= bound + slack)
    if bad.any():
        raise AssertionError(f"{what or 'value'}: {value[bad][:4]} exceed {bound!r} + {slack:.3g} "
                             f"(the {declared_dtype(impl)} rule)")


def nan_note(actual: Any, expected: Any) -> str:
    """``"N NaN entries where the reference is a number (the first at index i); "`` or ``""``: a NaN output is
    reported as NaN, not as an infinite error."""
    got, want = np.asarray(actual, dtype=np.float64), np.broadcast_to(np.asarray(expected, dtype=np.float64),
                                                                         np.shape(actual))
    nan = np.isnan(got) & ~np.isnan(want)
    if not nan.any():
        return ""
    first = tuple(int(i) for i in np.argwhere(nan)[0])
    return f"{int(nan.sum())} NaN entries where the reference is a number (the first at index {first}); "


def assert_close(actual: Any, expected: Any, impl: ModuleType, kind: str = "value", *, what: str = "",
                 anchor_dtype: str | None = None, anchor_kind: str | None = None, **rule: Any) -> None:
    """Assert ``|actual − expected| ≤ atol`` elementwise, atol from :func:`tolerance_array`.

    ``anchor_dtype``: ``expected`` is another library's output computed in that dtype (an HF float32
    table), so its own rounding is added: the rule of ``anchor_kind`` (default ``kind``) for that dtype,
    e.g. ``"stored"`` for a float64 table stored in float32. The message names the quantity, the rule,
    the declared dtype and the worst entry.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.ndim == 0 or expected.ndim == 0:  # a scalar (an attention factor) against a scalar
        actual, expected = (np.reshape(a, (-1,)) for a in np.broadcast_arrays(actual, expected))
    label = what or "output"
    if actual.shape != expected.shape:
        raise AssertionError(f"{label}: shape {actual.shape}, expected {expected.shape}")
    if anchor_dtype is None and (kind == "exact" or (kind == "stored" and declared_dtype(impl) == "float64")):
        np.testing.assert_array_equal(actual, expected, err_msg=f"{label} ({kind}, bit for bit)")
        return
    atol = tolerance_array(impl, expected, kind, **rule)
    if anchor_dtype is not None:  # the anchor's own rounding: both sides err
        atol = atol + tolerance_array(impl, expected, anchor_kind or kind, dtype=anchor_dtype, **rule)
    result = compare(actual, expected, atol=atol)  # refpos's one comparison: a NaN never passes
    if not result.ok:
        worst = result.worst_index
        raise AssertionError(
            f"{label} ({kind} rule, dtype {declared_dtype(impl)}): {nan_note(actual, expected)}{result.n_outside} "
            f"of {result.n} entries outside tolerance; worst at {worst}: got {actual[worst]!r}, expected "
            f"{expected[worst]!r}, |diff| {result.error[worst]:.3g} > atol {result.allowed[worst]:.3g}"
        )


def assert_within(actual: Any, expected: Any, *, rtol: float, atol: float = 0.0, what: str = "",
                  equal_nan: bool = False) -> None:
    """Assert ``|actual − expected| ≤ atol + rtol·|expected|`` elementwise through refpos's one comparison
    (:func:`refpos.golden.compare.compare`: a NaN never passes unless ``equal_nan`` and both are NaN).

    The caller states ``rtol`` (and ``atol``): from the declared dtype (:func:`tolerance`,
    ``encoding_support.tol``) or a number with its reason beside it. Shapes must agree; a scalar on
    either side is broadcast to the other.
    """
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.ndim == 0 or expected.ndim == 0:
        actual, expected = np.broadcast_arrays(actual, expected)
    label = what or "values"
    if actual.shape != expected.shape:
        raise AssertionError(f"{label}: shape {actual.shape}, expected {expected.shape}")
    result = compare(actual, expected, atol=atol, rtol=rtol, equal_nan=equal_nan)
    if not result.ok:
        worst = result.worst_index
        bound = f"atol {float(np.max(atol)):.3g} + rtol {rtol:.3g}·|expected|"
        raise AssertionError(f"{label}: {nan_note(actual, expected)}{result.n_outside} of {result.n} entries "
                             f"outside {bound}; worst at "
                             f"{worst}: got {actual[worst]!r}, expected {expected[worst]!r}, |diff| "
                             f"{result.error[worst]:.3g} > {result.allowed[worst]:.3g}")


def frequency_rtol(impl: ModuleType, inv_freq: Any) -> np.ndarray:
    """Per pair, the relative error of a correct ``ω_j`` (float64 ``inv_freq``) in the declared dtype and forms:
    :func:`refpos.golden.tolerance.frequency_tolerance` over ``ω_j`` (0 for a zero frequency)."""
    w = np.abs(np.asarray(inv_freq, dtype=np.float64))
    atol = np.asarray(tol_rules.frequency_tolerance(declared_dtype(impl), w, forms=declared_forms(impl)))
    return np.divide(atol, w, out=np.zeros_like(w), where=w > 0)


def unit_roundoff(impl: ModuleType) -> float:
    """The unit roundoff of the declared dtype's arithmetic: 2⁻⁵³, or 2⁻²⁴ for float32 and lower (whose rules
    assume float32 arithmetic)."""
    return 2.0**-53 if declared_dtype(impl) == "float64" else 2.0**-24


def assert_frequencies(actual: Any, expected: Any, impl: ModuleType, *, pairs: Any = None, computed: int = 1,
                       what: str = "ω") -> None:
    """Assert the adapter's inverse frequencies ``actual`` equal the float64 ``expected`` within the per-pair bound
    of a correct implementation in the declared dtype and forms
    (:func:`refpos.golden.tolerance.frequency_tolerance`: float32 ``u·(c + b·j + e·ln(1/ω_j))·ω_j``, the largest
    over the angle forms in force; float64 rtol 1e-13). ``expected`` holds every pair (the bound depends on the
    pair's index ``j``); ``pairs`` selects the compared ones (``actual`` then holds only those). ``computed``: how
    many computed sets of frequencies the comparison holds (2 when ``expected`` is itself the adapter's output).
    """
    expected = np.asarray(expected, dtype=np.float64)
    atol = computed * np.asarray(tol_rules.frequency_tolerance(declared_dtype(impl), expected,
                                                               forms=declared_forms(impl)), dtype=np.float64)
    if pairs is not None:
        expected, atol = expected[..., pairs], atol[..., pairs]
    assert_within(actual, expected, rtol=0.0, atol=np.broadcast_to(atol, expected.shape), what=what)


def tolerance(impl: ModuleType, kind: str = "value") -> dict[str, float]:
    """Scalar ``{"rtol", "atol"}`` for ``numpy.testing.assert_allclose`` on O(1) values, by the dtype
    rule of :mod:`refpos.golden.tolerance` (position-independent kinds only; phases need
    :func:`assert_close`): float64 rtol 1e-13, float32 1e-6, bfloat16/float16 two ulps, each with the
    same number as an absolute floor for entries near zero."""
    if kind not in ("exact", "value", "probability"):
        raise ValueError(f"kind must be 'exact', 'value' or 'probability' here, got {kind!r}")
    if kind == "exact":
        return {"rtol": 0.0, "atol": 0.0}
    rel = float(to_numpy(tol_rules.value_tolerance(declared_dtype(impl), np.ones(1)))[0])
    if kind == "probability":
        return {"rtol": rel, "atol": max(rel, tol_rules.probability_tolerance(declared_dtype(impl), np.ones(1)))}
    return {"rtol": rel, "atol": rel}


def declared_forms(impl: ModuleType) -> tuple[str, ...] | None:
    """``INFO["forms"]`` of the adapter (``None``: every form its dtype admits)."""
    return declared_list("forms", impl)


def float_tolerance_note(impl: ModuleType) -> str:
    """Lines for the report header: the tolerance rules that follow from the declared dtype and forms."""
    dtype, forms = declared_dtype(impl), declared_forms(impl)
    which = f"declared forms {', '.join(forms)}" if forms else f"no forms declared: every form {dtype} admits"
    frequencies = ("; inverse frequencies per pair, the angle forms' bound at position 1" if dtype == "float32"
                   else "")
    return (f"tolerances: dtype {dtype} -> {tol_rules.describe('value', dtype)['reason']}{frequencies}; "
            f"angle-derived values "
            f"({which}; docs/conventions.md#tolerances): atol = m·|p|·max_j k_j·ω_j·u + storage(m), with "
            f"{describe_forms(dtype, forms)}")
