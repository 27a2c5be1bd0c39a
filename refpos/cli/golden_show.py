"""``refpos golden show CASE``: what a golden case holds, and the command that checks a port against it.

Prints the case's function and parameters, each input (path, shape, dtype; positions and relative offsets
with their values), each output (path, shape, dtype, the tolerance rule and its range per dtype) and the
exact ``refpos check`` command for each output. ``--json`` prints the same as one object.

Example
-------
.. code-block:: console

    $ refpos golden show rope/meta-llama--Llama-3.1-8B/apply
    rope/meta-llama--Llama-3.1-8B/apply: meta-llama/Llama-3.1-8B: rotated x (T, D) at the probe positions
      function apply_rope(x, positions, rope, seq_len), seq_len 131072
      ...
"""

from __future__ import annotations

import argparse
import json
import shlex
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from refpos.validation import printable

#: inputs whose values a port needs to see (positions and offsets), printed in full up to this many
SHOWN_VALUES = 48


def add_parser(sub: Any) -> None:
    """The ``show`` action of ``refpos golden``."""
    show = sub.add_parser("show", help="a case's inputs, outputs, tolerance and the refpos check command")
    show.add_argument("case", help="the case id (refpos golden list names them)")
    show.add_argument("--golden-dir", type=Path, default=None)
    show.add_argument("--json", action="store_true", help="print one JSON object")


def _values(a: np.ndarray) -> list[Any]:
    """The values of a small integer input: a list (rows of a 2-D one), at most :data:`SHOWN_VALUES` each."""
    if a.ndim == 1:
        return [int(v) for v in a[:SHOWN_VALUES]] + (["…"] if a.size > SHOWN_VALUES else [])
    return [_values(row) for row in a[:8]] + (["…"] if a.shape[0] > 8 else [])


def _tolerance(entry: dict[str, Any]) -> dict[str, Any]:
    """The rule of a tolerance entry and, per dtype, its atol range and rtol/ulps."""
    out: dict[str, Any] = {"rule": entry.get("rule")}
    for dtype, value in entry.items():
        if not isinstance(value, dict):
            continue
        atol = np.atleast_1d(np.asarray(value.get("atol", 0.0), dtype=np.float64))
        out[dtype] = {"atol": [float(atol.min()), float(atol.max())], "rtol": value.get("rtol", 0.0),
                      "ulps": value.get("ulps", 0.0)}
    if "atol_axis" in entry:
        out["atol_axis"] = entry["atol_axis"]
    return out


def describe(case: dict[str, Any], root: Path) -> dict[str, Any]:
    """The JSON of ``refpos golden show``: inputs, outputs, tolerance and check commands of one case."""
    from refpos.golden.manifest import load_arrays

    params = case.get("parameters", {})
    call = params.get("call") or {}
    inputs_arrays = load_arrays(root, case, "inputs")
    inputs = {}
    for name, entry in case.get("inputs", {}).items():
        item = {"path": str(root / entry["file"]), "shape": entry.get("shape"), "dtype": entry.get("dtype")}
        array = inputs_arrays[name]
        if array.dtype.kind in "iu" and array.size <= 64 * SHOWN_VALUES:
            item["values"] = _values(array)
        inputs[name] = item
    outputs = {name: {"path": str(root / entry["file"]), "shape": entry.get("shape"), "dtype": entry.get("dtype"),
                      "tolerance": _tolerance(entry.get("tolerance", {}))}
               for name, entry in case.get("outputs", {}).items()}
    primary = case.get("primary_output")
    commands = {name: " ".join(["refpos check", shlex.quote(case["id"]), "CANDIDATE.npy", "--golden-dir",
                                shlex.quote(str(root))] + ([] if name == primary else ["--output", name]))
                for name in outputs}
    arguments = [a.get("input") or a.get("param") or repr(a.get("value")) for a in call.get("args", [])]
    shown = {k: params[k] for k in ("model", "layer_type", "seq_len", "layout", "spans") if params.get(k) is not None}
    if isinstance(params.get("rope"), dict):
        shown["rope"] = {k: v for k, v in params["rope"].items() if v is not None}
    return {"id": case["id"], "description": case.get("description", ""), "function": case.get("function"),
            "arguments": arguments, "returns": call.get("returns", []), "parameters": shown, "inputs": inputs,
            "outputs": outputs, "primary_output": primary, "check": commands,
            "reduce": call.get("reduce")}


def text(info: dict[str, Any]) -> str:
    """The report ``refpos golden show`` prints."""
    lines = [f"{info['id']}: {info['description']}",
             f"  function {info['function']}({', '.join(info['arguments'])}) -> {', '.join(info['returns'])}"]
    for key, value in info["parameters"].items():
        if key == "rope":
            lines += textwrap.wrap("rope " + ", ".join(f"{k} {v!r}" for k, v in value.items()), width=100,
                                   initial_indent="  ", subsequent_indent="    ")
        else:
            lines.append(f"  {key} {value!r}")
    lines.append("  inputs:")
    for name, item in info["inputs"].items():
        lines.append(f"    {name}: {item['path']}  {item['dtype']} {tuple(item['shape'])}")
        values = item.get("values")
        if values is not None and values and isinstance(values[0], list):
            for axis, row in zip("thw" if len(values) == 3 else range(len(values)), values, strict=False):
                lines.append(f"      {axis}: {_row(row)}")
        elif values is not None:
            lines += textwrap.wrap(_row(values), width=100, initial_indent="      ", subsequent_indent="       ")
    if not info["inputs"]:
        lines.append("    none (the output is a function of the parameters)")
    lines.append("  outputs:")
    for name, item in info["outputs"].items():
        mark = " (primary)" if name == info["primary_output"] else ""
        lines.append(f"    {name}{mark}: {item['path']}  {item['dtype']} {tuple(item['shape'])}")
        tol = item["tolerance"]
        per_dtype = [f"{dtype} atol {_range(v['atol'])}" + (f" rtol {v['rtol']:g}" if v["rtol"] else "")
                     + (f" + {v['ulps']:g} ulps" if v["ulps"] else "")
                     for dtype, v in tol.items() if isinstance(v, dict)]
        lines.append(f"      tolerance rule {tol['rule']!r}"
                     + (f" (atol per index of axis {tol['atol_axis']})" if "atol_axis" in tol else "")
                     + ": " + "; ".join(per_dtype))
    if info.get("reduce") == "pairs":
        lines.append("  a per-pair table: the candidate may be (T, m) per pair or the full (T, 2m) table in the "
                     "layout's order")
    lines.append("  check a candidate:")
    lines += [f"    {command}" for command in info["check"].values()]
    return "\n".join(printable(line) for line in lines)  # the manifest's strings, escaped (refpos did not write them)


def _row(values: list[Any]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _range(pair: list[float]) -> str:
    low, high = pair
    return f"{low:.3g}" if low == high else f"{low:.3g} … {high:.3g}"


def run(args: argparse.Namespace) -> int:
    """Print one case; an unknown case or an unreadable directory is an error (exit 2 in refpos.cli.golden)."""
    from refpos.golden.manifest import check_files, default_golden_dir, find_case, load_manifest

    root = Path(args.golden_dir) if args.golden_dir is not None else default_golden_dir()
    case = find_case(load_manifest(root), args.case)
    problems = check_files(root, case)
    if problems:
        raise ValueError(f"golden case {args.case}: {problems[0]}")
    info = describe(case, root)
    print(json.dumps(info, indent=1) if args.json else text(info))
    return 0
