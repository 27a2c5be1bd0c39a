"""The one comparison (refpos.golden.compare): its rules, and that check, golden and the spec suite use it.

Each rule is a small case ``(candidate, reference, tolerance, expected ok)``. The same cases are run
on deliberately wrong comparators (``np.allclose``-style NaN handling, a strict ``<``, a forgotten ulp
term) to show that they catch each of them.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from refpos.check.run import _summary
from refpos.golden import entries, manifest
from refpos.golden.compare import FORMULA, allowed_error, compare, within

INF, NAN = math.inf, math.nan

#: (name, candidate, reference, tolerance keywords, ok)
RULES = [
    ("exact match", [1.0, -2.5], [1.0, -2.5], {}, True),
    ("atol: on the boundary passes", [1.5], [1.0], {"atol": 0.5}, True),
    ("atol: beyond fails", [1.5000001], [1.0], {"atol": 0.5}, False),
    ("rtol scales |ref|", [2.0 + 2e-6], [2.0], {"rtol": 1e-6}, True),
    ("rtol scales |ref|, not |y|", [4.0], [2.0], {"rtol": 0.6}, False),
    ("ulps of the dtype at |ref|", [1.0 + 2 * 2.0**-7], [1.0], {"ulps": 2.0, "dtype": "bfloat16"}, True),
    ("ulps: one more fails", [1.0 + 3 * 2.0**-7], [1.0], {"ulps": 2.0, "dtype": "bfloat16"}, False),
    ("terms add up", [1.0 + 0.1 + 1e-3 + 2 * 2.0**-7], [1.0],
     {"atol": 0.1, "rtol": 1e-3, "ulps": 2.0, "dtype": "bfloat16"}, True),
    ("atol per position", [[1.05, 1.0], [2.0, 2.5]], [[1.0, 1.0], [2.0, 2.0]], {"atol": [[0.1], [0.1]]}, False),
    ("equal infinities agree", [-INF, INF], [-INF, INF], {}, True),
    ("opposite infinities fail", [INF], [-INF], {"atol": 1e308}, False),
    ("NaN candidate never passes, even within an infinite atol", [NAN], [1.0], {"atol": INF}, False),
    ("NaN reference never passes", [1.0], [NAN], {"atol": INF}, False),
    ("both NaN fail by default", [NAN], [NAN], {"atol": 1.0}, False),
    ("both NaN agree with equal_nan", [NAN], [NAN], {"equal_nan": True}, True),
    ("NaN tolerance never passes", [1.0], [1.0], {"atol": NAN}, False),
]


def _run(fn, case):
    _, y, r, tolerance, _ = case
    return bool(fn(np.array(y, dtype=np.float64), np.array(r, dtype=np.float64), **tolerance))


@pytest.mark.parametrize("case", RULES, ids=[c[0] for c in RULES])
def test_the_rules(case):
    assert _run(within, case) is case[-1]


def _allclose_style(y, r, *, atol=0.0, rtol=0.0, ulps=0.0, dtype=None, equal_nan=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # isclose warns about an infinite atol
        return bool(np.all(np.isclose(y, r, atol=np.asarray(atol), rtol=rtol, equal_nan=True)))


def _strict(y, r, **tolerance):
    result = compare(y, r, **tolerance)
    return bool(np.all(result.error < result.allowed) or np.all(result.error == 0))


def _no_ulps(y, r, *, ulps=0.0, dtype=None, **tolerance):
    return within(y, r, **tolerance)


@pytest.mark.parametrize("wrong", [_allclose_style, _strict, _no_ulps])
def test_the_rules_catch_wrong_comparators(wrong):
    caught = [c[0] for c in RULES if _run(wrong, c) is not c[-1]]
    assert caught, f"{wrong.__name__} passes every rule"


def test_comparison_reports_the_worst_entry_and_counts():
    c = compare(np.array([[1.0, 1.3], [2.0, NAN]]), np.array([[1.0, 1.0], [2.0, 2.0]]), atol=0.1)
    assert not c.ok and c.n_outside == 2 and c.n == 4
    assert c.worst_index == (1, 1) and c.max_ratio == INF and c.max_abs_error == INF
    assert c.outside.tolist() == [[False, True], [False, True]]
    assert c.summary()["worst_index"] == [1, 1]
    assert compare(np.zeros((0, 3)), np.zeros((0, 3))).worst_index is None


@pytest.mark.parametrize(("kwargs", "match"), [({"atol": -1.0}, "atol"), ({"rtol": -1e-3}, "rtol"),
                                                ({"ulps": 2.0}, "dtype"), ({"rtol": "x"}, "rtol"),
                                                ({"atol": [1.0, 2.0, 3.0]}, "broadcast")])
def test_bad_tolerances_are_named(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        allowed_error(np.ones(2), **kwargs)


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="shape"):
        compare(np.ones(3), np.ones((1, 3)))


def test_the_manifest_formula_is_the_comparison():
    assert manifest.FORMULA.split(";")[0] == FORMULA.replace("atol +", "atol[i] +")


def _through_manifest(y, r, *, atol=0.0, rtol=0.0, ulps=0.0, dtype=None, equal_nan=False):
    entry = {"atol_axis": -1, (dtype or "float64"): {"atol": np.asarray(atol).tolist() if np.ndim(atol) else atol,
                                                      "rtol": rtol, "ulps": ulps}}
    try:
        return entries.compare(y, r, entry, dtype or "float64")["ok"]
    except ValueError as exc:  # a manifest's tolerance must be finite and >= 0: refused, which is not a pass
        assert "must be finite" in str(exc)
        return False


def _through_check(y, r, *, atol=0.0, **_):
    return _summary(y, r, np.broadcast_to(np.asarray(atol, dtype=np.float64), np.shape(r)))["ok"]


def _through_spec_suite(y, r, *, atol=0.0, **_):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spec_tests"))
    try:
        import support
    finally:
        sys.path.pop(0)
    rejected = False
    original = support.tolerance_array
    support.tolerance_array = lambda impl, expected, kind, **rule: np.broadcast_to(np.asarray(atol, float),
                                                                                   np.shape(expected))
    try:
        support.assert_close(y, r, support.IMPL, "value")
    except AssertionError:
        rejected = True
    finally:
        support.tolerance_array = original
    return not rejected


#: rules whose tolerance each user can express (check and the spec suite pass an atol array; golden
#: entries carry atol, rtol and ulps and agree NaN with NaN, the "nan" policy)
_NAN_POLICY = {"both NaN fail by default", "both NaN agree with equal_nan"}


@pytest.mark.parametrize("user", [_through_manifest, _through_check, _through_spec_suite])
def test_every_user_decides_as_the_comparison(user):
    for case in RULES:
        name, _, _, tolerance, ok = case
        if user is not _through_manifest and set(tolerance) - {"atol"}:
            continue
        if name in _NAN_POLICY:
            ok = user is not _through_spec_suite  # check and golden agree NaN with NaN; the spec suite never
        elif name == "atol per position" and user is _through_manifest:
            continue  # the manifest lays a list along one axis only
        assert _run(user, case) is ok, name


def test_a_golden_failure_pairs_each_error_with_its_own_elements_tolerance():
    """Llama-3.1's apply case in float32: an error of 3× the tolerance at position 0 (atol 9.5e-7) and a larger
    one well within the tolerance at position 131071 (atol 0.07). The message names the first with ITS
    tolerance, and the largest error with its own, never one element's error with another's tolerance."""
    from refpos.golden.entries import compare as compare_entry
    from refpos.golden.manifest import default_golden_dir, find_case, load_manifest

    root = default_golden_dir()
    case = find_case(load_manifest(root), "rope/meta-llama--Llama-3.1-8B/apply")
    reference = np.load(root / case["outputs"]["y"]["file"], allow_pickle=False)
    positions = np.load(root / case["inputs"]["positions"]["file"], allow_pickle=False)
    entry = case["outputs"]["y"]["tolerance"]
    atol = entry["float32"]["atol"]
    first, last = 0, int(np.argmax(positions))
    candidate = reference.copy()
    candidate[first, 5] += 3 * atol[first]
    candidate[last, 7] += 0.5 * atol[last]
    result = compare_entry(candidate, reference, entry, "float32")
    assert not result["ok"] and result["n_bad"] == 1
    assert result["message"] == (
        f"|diff| {3 * atol[first]:.3g} at index ({first}, 5) = {3:.3g}× its float32 tolerance {atol[first]:.3g}; "
        f"the largest |diff|, {0.5 * atol[last]:.3g} at index ({last}, 7), is 0.5× its tolerance {atol[last]:.3g}")
    assert result["max_abs_error"] == pytest.approx(0.5 * atol[last])  # the largest error is still reported
