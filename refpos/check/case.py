"""``refpos check CASE Y.npy``: a candidate against one output of a golden case, after the case itself is
checked (the sha256 of its files, then its regeneration compared whole), with the diagnosis of its function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.rope.golden_rope import diagnose_rope_case
from refpos.check.shared.arrays import Unusable, default_dtype, same_shape
from refpos.check.tables.common import table_case_fit
from refpos.check.targets import FUNCTION_TARGETS
from refpos.golden.exact import tolerance as tol
from refpos.pairs import place_pairs


def _golden_case(case_id: str, golden_dir: Path | None) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]],
                                                                 str | None]:
    """``(manifest case, its arrays, why it is not verified or None)``: the files read once through the golden
    directory's descriptor (sha256 checked), the case regenerated and compared whole with the manifest's
    (:func:`refpos.golden.generate.case_problems`); :class:`Unusable` when a file or the case does not match."""
    from refpos.golden.files.manifest import default_golden_dir, find_case, load_manifest, open_golden, read_case
    from refpos.golden.generate import case_problems, regenerated_cases

    root = Path(golden_dir) if golden_dir is not None else default_golden_dir()
    with open_golden(root) as directory:
        manifest = load_manifest(directory)
        case = find_case(manifest, case_id)
        arrays, problems = read_case(directory, case)
    if problems:
        raise Unusable(f"golden case {case_id}: {problems[0]}")
    try:
        fresh = regenerated_cases(manifest).get(case_id)
    except (ValueError, TypeError, KeyError) as exc:
        return case, arrays, f"its source does not regenerate here ({str(exc).splitlines()[0]})"
    if fresh is None:
        return case, arrays, "this version of refpos does not generate that case"
    problems = case_problems(case, fresh, arrays)
    if problems:
        raise Unusable(f"golden case {case_id} is not what refpos regenerates: {problems[0]} (run refpos golden "
                       f"verify --golden-dir {root})")
    return case, arrays, None


def check_case(case_id: str, candidate: Any, *, golden_dir: Path | None = None, output: str | None = None,
               dtype: str | None = None) -> dict[str, Any]:
    """Compare ``candidate`` with one output of a golden case (default: its primary output).

    The case's files are checked against their sha256 and the case against its regeneration (its
    tolerance included, :func:`_golden_case`); where refpos cannot regenerate it, the manifest's tolerance is
    used and the result says so (``golden_verified: false`` and ``golden_note``). A full-width candidate of a
    per-pair table (``reduce: pairs``: ``(..., 2m)`` for the ``(..., m)`` reference) is compared whole: both
    channels of every pair, where the layout writes them.
    """
    from refpos.golden.exact.entries import compare as compare_under_entry

    case, arrays, not_verified = _golden_case(case_id, golden_dir)
    name = output or case.get("primary_output")
    if name not in case["outputs"]:
        raise Unusable(f"golden case {case_id} has no output {name!r} (outputs: {', '.join(case['outputs'])})")
    reference, inputs = arrays["outputs"][name], arrays["inputs"]
    cand = np.asarray(to_numpy(candidate))
    if cand.dtype.kind not in "fiu":
        raise Unusable(f"the candidate must be numeric, got {cand.dtype}")
    call = case.get("parameters", {}).get("call") or {}
    if call.get("reduce") == "pairs" and cand.ndim == reference.ndim and cand.shape[-1] == 2 * reference.shape[-1]:
        layout = case["parameters"]["rope"].get("layout", "half")
        reference = place_pairs(reference, reference, layout)  # (..., 2m): pair j's value in both of its channels
    same_shape(cand, reference.shape, f"output {name} of {case_id}")
    if reference.dtype.kind in "iu" and cand.dtype.kind not in "iu":
        raise Unusable(f"output {name} of {case_id} is an integer array; the candidate is {cand.dtype}")
    dtype = tol.check_dtype(dtype or default_dtype(cand))
    entry = case["outputs"][name]["tolerance"]
    summary = compare_under_entry(cand, reference, entry, dtype)
    result = {"target": case_id, "output": name, "dtype": dtype, "ok": summary["ok"],
              "max_abs_error": summary["max_abs_error"], "max_ratio": summary["max_ratio"],
              "worst_index": list(summary["worst_index"] or ()), "n_outside": summary["n_bad"], "diagnosis": [],
              "golden_verified": not_verified is None,
              "n_nan": int(np.count_nonzero(np.isnan(cand) & ~np.isnan(reference))) if cand.dtype.kind == "f" else 0}
    if not_verified is not None:
        result["golden_note"] = (f"the case's tolerance is the manifest's, not verified: {not_verified} (run refpos "
                                 "golden verify on a golden directory you did not generate)")
    if summary["ok"]:
        return result
    function = case.get("function")
    args = [a.get("value") for a in call.get("args", [])]
    rope_case = diagnose_rope_case(case, inputs, cand, reference, entry, dtype, name)
    if rope_case is not None:  # the diagnosis and the fit of refpos check rope --config (refpos.check.rope.golden_rope)
        result.update(rope_case)
    elif function in FUNCTION_TARGETS:  # the diagnosis of the target that checks the function
        try:
            checked = FUNCTION_TARGETS[function].golden(case, args, inputs, cand, dtype)
        except Unusable:  # the target cannot diagnose this candidate (a dtype its bound does not hold for)
            return result
        layout = checked.get("reference", {}).get("layout") if "pairs" in checked else None
        # its diagnosis and fit; each pair's verdict under the case's own tolerance
        result.update(table_case_fit(checked, cand, reference, entry, dtype, layout))
    return result
