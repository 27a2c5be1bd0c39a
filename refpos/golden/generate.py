"""``refpos golden``: generate, verify, model, list.

* ``refpos golden generate [--out DIR] [--no-certify]`` — every case (deterministic), certified against
  mpmath, into ``golden/`` (the default directory, :func:`refpos.golden.manifest.default_golden_dir`).
* ``refpos golden verify [--golden-dir DIR] [--certify]`` — check every file's sha256, regenerate every
  case and compare each output within its float64 tolerance; prints ``MISMATCH <case id>: …`` per
  problem and exits 1 on any (2 when the directory or manifest is unusable).
* ``refpos golden model CONFIG.json --out DIR [--positions 0,1,4096 | --positions P.npy] [--seq-len L]``
  — the per-model RoPE case set for any config.json.
* ``refpos golden list [--golden-dir DIR] [--family F]`` — case ids, functions and certified ulps.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from refpos.golden.entries import compare
from refpos.golden.manifest import Case, check_files, load_arrays, load_manifest, write_cases

#: the kernels the committed golden bytes come from. NumPy and OpenBLAS choose their kernels by CPU, and on a
#: CPU with AVX-512 NumPy's float64 pow, exp, log, sin and cos (and OpenBLAS's matmul) round differently by
#: about one ulp, so ``golden generate`` would write other bytes (within tolerance: ``golden verify`` passes).
#: With this environment NumPy dispatches no further than AVX2 and OpenBLAS uses its Haswell kernels: the same
#: bytes on every x86-64 CPU with AVX2 and FMA (refpos/tests/test_golden_bytes.py regenerates them).
PINNED_KERNELS = {
    "NPY_ENABLE_CPU_FEATURES": "SSE SSE2 SSE3 SSSE3 SSE41 POPCNT SSE42 AVX F16C FMA3 AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
}

TITLE = "refpos golden outputs: every encoding family, the worked example, real model RoPE, boundaries, scenarios"


def all_cases() -> list[Case]:
    """Every case of ``refpos golden generate``, in manifest order."""
    from refpos.golden.cases import encoding_cases
    from refpos.golden.deberta_cases import deberta_cases
    from refpos.golden.rope_cases import all_model_cases, boundary_cases, layout_cases
    from refpos.golden.scenarios import attention_cases, scenario_cases, worked_example_cases

    return (encoding_cases() + deberta_cases() + worked_example_cases() + attention_cases() + layout_cases()
            + all_model_cases() + boundary_cases() + scenario_cases())


def model_source(config: dict[str, Any], name: str, positions: list[int] | None, seq_len: int | None,
                  max_position: int | None = None) -> dict:
    source = {"command": "model", "name": name, "config": config, "positions": positions, "seq_len": seq_len}
    return source if max_position is None else {**source, "max_position": max_position}


def regenerate(manifest: dict[str, Any]) -> list[Case]:
    """Rebuild the cases of a manifest from its ``source`` (generate, or model with its config)."""
    source = manifest.get("source", {"command": "generate"})
    if source.get("command") == "model":
        from refpos.golden.rope_cases import model_cases

        positions = source.get("positions")
        return model_cases(source["config"], source["name"],
                           positions=None if positions is None else np.asarray(positions, dtype=np.int64),
                           seq_len=source.get("seq_len"), max_position=source.get("max_position"))
    return all_cases()


def generate(out: Path, *, certify: bool = True) -> list[dict]:
    """Write every case to ``out`` (and ``configs/<model>.json``, the configs the model cases read)."""
    from refpos.golden.rope_cases import model_configs, slug

    entries = write_cases(out, all_cases(), title=TITLE, certify=certify, source={"command": "generate"})
    configs = out / "configs"
    if configs.is_dir():
        shutil.rmtree(configs)
    configs.mkdir(parents=True)
    from refpos.golden.mrope_cases import vlm_configs  # vision-language configs: for ``golden model`` runs

    for name, entry in {**model_configs(), **vlm_configs()}.items():
        (configs / f"{slug(name)}.json").write_text(json.dumps(entry["config"], indent=1) + "\n", encoding="utf8")
    return entries


def _params_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_params_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_params_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):  # True == 1 in Python; not in a manifest
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) or isinstance(b, float):
            try:
                return math.isclose(float(a), float(b), rel_tol=1e-13, abs_tol=0.0)
            except OverflowError:
                return False
        return a == b
    return type(a) is type(b) and a == b  # the string "1e300" is not the number 1e300


def _first_difference(fresh: Any, stored: Any, where: str = "") -> str:
    """Where two JSON values first differ, e.g. ``float32.atol[3]: regenerated 4.77e-07, manifest 1e+300``."""
    if isinstance(fresh, dict) and isinstance(stored, dict):
        for key in sorted(set(fresh) | set(stored)):
            if key not in fresh or key not in stored:
                return f"{where}{key}: only in the {'manifest' if key in stored else 'regenerated one'}"
            if not _params_equal(fresh[key], stored[key]):
                return _first_difference(fresh[key], stored[key], f"{where}{key}.")
    if isinstance(fresh, list) and isinstance(stored, list) and len(fresh) == len(stored):
        for i, (a, b) in enumerate(zip(fresh, stored, strict=True)):
            if not _params_equal(a, b):
                return _first_difference(a, b, f"{where.rstrip('.')}[{i}].")
    return f"{where.rstrip('.') or 'value'}: regenerated {fresh!r}, manifest {stored!r}"


def verify(root: Path, *, certify: bool = False) -> list[str]:
    """Problems of a golden directory (empty list: everything verified); raises GoldenError if unusable."""
    from refpos.golden.certify import certificate
    from refpos.golden.manifest import jsonable

    manifest = load_manifest(root)
    fresh = {c.id: c for c in regenerate(manifest)}
    problems = []
    seen = set()
    for case in manifest["cases"]:
        cid = case["id"]
        seen.add(cid)
        file_problems = check_files(root, case)
        problems += [f"{cid}: {p}" for p in file_problems]
        if file_problems:
            continue
        new = fresh.get(cid)
        if new is None:
            problems.append(f"{cid}: the generator has no such case any more")
            continue
        if not _params_equal(jsonable(new.parameters), case.get("parameters")):
            problems.append(f"{cid}: parameters differ from the regenerated case")
        stored_in = load_arrays(root, case, "inputs")
        for name, array in new.inputs.items():
            same = name in stored_in and stored_in[name].shape == array.shape and np.array_equal(stored_in[name], array)
            if not same:
                problems.append(f"{cid}: input {name} differs from the regenerated input")
        stored_out = load_arrays(root, case, "outputs")
        for name, out in new.outputs.items():
            entry = case["outputs"].get(name)
            if entry is None or name not in stored_out:
                problems.append(f"{cid}: output {name} missing from the manifest")
                continue
            fresh_tolerance = jsonable(out.tolerance)
            if not _params_equal(fresh_tolerance, entry["tolerance"]):
                problems.append(f"{cid}: output {name}: the tolerance differs from the regenerated one "
                                f"({_first_difference(fresh_tolerance, entry['tolerance'])})")
            try:  # under the regenerated tolerance: the manifest's own is not trusted
                result = compare(out.array, stored_out[name], fresh_tolerance, "float64")
            except (ValueError, KeyError) as exc:
                problems.append(f"{cid}: output {name}: {exc}")
                continue
            if not result["ok"]:
                problems.append(f"{cid}: output {name} regenerated outside tolerance (max |diff| "
                                f"{result['max_abs_error']:.3g}, {result['max_ratio']:.3g}× the tolerance at "
                                f"{result['worst_index']})")
            if certify and out.certify is not None:
                cert = certificate(stored_out[name], out.certify, fresh_tolerance)
                if not cert["within_float64_tolerance"]:
                    problems.append(f"{cid}: output {name} is not within tolerance of the mpmath value "
                                    f"({cert['max_error_ulps']} ulps)")
    for cid in fresh:
        if cid not in seen:
            problems.append(f"{cid}: generated by this version but absent from the manifest")
    return problems
