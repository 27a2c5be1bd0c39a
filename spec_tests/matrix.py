"""The conformance matrix: run the spec suite on each library's adapter, keep the results, write the page.

``python -m spec_tests.matrix run NAME...`` runs the suite on ``spec_tests.adapters.NAME`` (with its
xfails file) in the current environment and stores the outcome of every test, the adapter's ``INFO``,
the date and the command in one JSON file per adapter in ``spec_tests/results/``. It runs Hypothesis'
deterministic ``ci`` profile (``REFPOS_HYPOTHESIS_PROFILE`` chooses another), so a run's outcomes depend
on the code, not on the examples an earlier run stored.
``python -m spec_tests.matrix rerun NAME...`` reruns only the tests the stored run of ``NAME`` failed (or
xpassed), with the xfails file as it is now, and writes their new outcomes into the stored result: after a
triage, the failures an entry now names become known divergences without a second full run; the result
keeps the full run's command and date and adds the rerun's (``reruns``).
``python -m spec_tests.matrix render``
writes ``docs/implementations.md`` from every stored result: rows are libraries, columns families and
rules, cells *passes* / *diverges* (linked to the reason) / *not provided*; under each library's divergences,
the paragraph its adapter's ``INFO["setup"]`` gives (how the library is run: backend, precision, what a
first run compiles), when it gives one. ``tox -e peers`` runs each
library in its own environment and renders once at the end; nothing on the page is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "spec_tests" / "results"
PAGE = ROOT / "docs" / "implementations.md"

#: column -> ((test module, substrings of the test id), ...): a test belongs to the column if its module
#: is listed and its id contains one of that module's substrings ("" matches every test of the module)
COLUMNS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "default RoPE": (("test_rope_vectors", ("llama2", "tiny_apply", "relative_invariance")),
                     ("test_rope_scaling", ("theta_is_the_base", "[default]")), ("test_anchors_rope", ("[default]",))),
    "linear": (("test_rope_scaling", ("linear",)), ("test_anchors_rope", ("[linear]",))),
    "NTK": (("test_rope_scaling", ("ntk_divides", "[ntk]")), ("test_anchors_rope", ("[ntk]", "ntk_alpha"))),
    "dynamic": (("test_rope_scaling", ("dynamic",)), ("test_rope_vectors", ("dynamic",)),
                ("test_rope_contract", ("dynamic",)), ("test_anchors_rope", ("[dynamic]", "dynamic_ntk"))),
    "YaRN": (("test_rope_scaling", ("yarn",)), ("test_rope_vectors", ("yarn",)), ("test_anchors_rope", ("[yarn]",))),
    "llama3": (("test_rope_scaling", ("llama3",)), ("test_rope_vectors", ("llama31", "llama32")),
               ("test_anchors_rope", ("[llama3]",))),
    "LongRoPE": (("test_rope_scaling", ("longrope",)), ("test_rope_vectors", ("longrope",)),
                 ("test_anchors_rope", ("[longrope]", "longrope"))),
    "proportional": (("test_rope_scaling", ("proportional",)), ("test_anchors_rope", ("[proportional]",))),
    "M-RoPE": (("test_mrope", ("",)), ("test_anchors_rope", ("mrope",))),
    "layouts": (("test_rope_properties", ("conjugate", "deinterleaved", "permutation")),
                ("test_golden", ("[rope-layout/",))),
    "partial rotary": (("test_rope_properties", ("pass_through",)),
                       ("test_rope_vectors", ("partial", "tail-", "head-"))),
    "rotation (tables given)": (("test_rope_tables", ("",)),),
    "RoPE properties": (("test_rope_properties", ("logit_depends", "norm_is", "position_zero", "compose",
                                                  "cos_sin_tables", "broadcast", "frequency_probe")),),
    "sinusoid": (("test_sinusoidal", ("",)), ("test_anchors_encodings", ("sinusoid",))),
    "ALiBi": (("test_alibi", ("",)), ("test_anchors_encodings", ("bloom",))),
    "T5": (("test_t5", ("",)), ("test_anchors_encodings", ("t5_buckets",))),
    "DeBERTa": (("test_deberta", ("",)),),
    "learned": (("test_sinusoidal", ("learned",)),),
    "attention core": (("test_attention", ("",)),),
    "local attention": (("test_local_attention", ("",)),),
    "query scale": (("test_local_attention", ("query_scale",)),),
    "vision RoPE": (("test_vision_rope", ("",)),),
    "input validation": (("test_rope_contract", ("bad_",)), ("test_rope_tables", ("refuse",)), ("test_t5", ("bad_",)),
                         ("test_anchors_encodings", ("bad_",)), ("test_deberta", ("bad_", "unknown_term")),
                         ("test_beyond_anchors", ("must_be",))),
}
#: tests a column's needle matches that belong to another column
EXCLUDED = {"sinusoid": ("learned",),  # the learned lookup lives in test_sinusoidal.py
            "linear": ("proportional",),  # test_proportional_at_full_width_is_linear is proportional's
            "local attention": ("query_scale",)}  # the query scale lives in test_local_attention.py


#: the column of each RoPE rule: a golden RoPE case counts in the column of the rule its model resolves to
RULE_COLUMNS = {"default": "default RoPE", "linear": "linear", "ntk": "NTK", "dynamic": "dynamic", "yarn": "YaRN",
                "llama3": "llama3", "longrope": "LongRoPE", "proportional": "proportional"}
#: the column of the golden cases of each other family of the manifest (families without a column: none)
FAMILY_COLUMNS = {"sinusoid": "sinusoid", "alibi": "ALiBi", "t5": "T5", "deberta": "DeBERTa", "learned": "learned",
                  "attention": "attention core", "local_attention": "local attention", "query_scale": "query scale",
                  "vision_rope": "vision RoPE"}


#: the committed golden manifest (read as JSON: ``render`` runs where only tox is installed)
MANIFEST = ROOT / "golden" / "manifest.json"


@functools.cache
def golden_columns() -> dict[str, str]:
    """Golden case id → its column, from the committed manifest: a RoPE case by the rule of its
    ``parameters.rope`` (``M-RoPE`` with sections), any other by its ``family``."""
    out = {}
    for case in json.loads(MANIFEST.read_text(encoding="utf-8"))["cases"]:
        rope = case.get("parameters", {}).get("rope")
        if isinstance(rope, dict):
            column = "M-RoPE" if rope.get("mrope_section") else RULE_COLUMNS.get(rope.get("rope_type") or "default")
        else:
            column = FAMILY_COLUMNS.get(case.get("family"))
        if column is not None:
            out[case["id"]] = column
    return out


def _column_of(nodeid: str) -> list[str]:
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    name = nodeid.split("::", 1)[-1]
    out = []
    for column, parts in COLUMNS.items():
        needles = [n for mod, ns in parts if mod == module for n in ns]
        if any(n in name for n in needles) and not any(x in name for x in EXCLUDED.get(column, ())):
            out.append(column)
    if module == "test_golden" and "[" in name:  # test_golden_case[<case id>]
        column = golden_columns().get(name.split("[", 1)[1].removesuffix("]"))
        if column is not None and column not in out:
            out.append(column)
    return out


# ---------------------------------------------------------------------------------------------- run
def _pytest(impl: str, name: str, targets: list[str], extra: list[str]) -> tuple[dict, dict, str, float, int]:
    """Run pytest on ``targets`` for adapter ``impl``: (condensed tests, env, command, wall seconds, exit code)."""
    xfails = ROOT / "spec_tests" / "adapters" / f"{name}.xfails.txt"
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        command = [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider",
                   "--ignore=spec_tests/test_meta.py", "--ignore=spec_tests/test_meta_reporting.py",
                   f"--junitxml={junit}", *extra]
        if xfails.exists():
            command += ["--xfails-file", str(xfails.relative_to(ROOT))]
        # the deterministic profile (derandomized, no example database) unless one is chosen: a run's
        # outcomes depend on the code alone, not on which examples an earlier run happened to store
        env = {"REFPOS_HYPOTHESIS_PROFILE": "ci", **os.environ, "REFPOS_IMPL": impl, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        started = datetime.datetime.now(datetime.UTC)
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        wall = (datetime.datetime.now(datetime.UTC) - started).total_seconds()
        if not junit.exists():
            raise SystemExit(f"{impl}: pytest wrote no report (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
                             f"{proc.stderr[-3000:]}")
        tests = _condense(junit)
    shown = f"REFPOS_IMPL={impl} " + " ".join(["python", *command[1:]]).replace(str(junit), "REPORT.xml")
    return tests, env, shown, wall, proc.returncode


def run(name: str, extra: list[str]) -> dict[str, Any]:
    """Run the suite on ``spec_tests.adapters.<name>`` and store the condensed result."""
    impl = f"spec_tests.adapters.{name}"
    started = datetime.datetime.now(datetime.UTC)
    tests, env, command, wall, code = _pytest(impl, name, ["spec_tests"], extra)
    info = _info(impl, env)
    result = {"adapter": impl, "info": info, "date": started.strftime("%Y-%m-%d %H:%M UTC"),
              "wall_s": round(wall), "exit_code": code, "command": command,
              "counts": _counts(tests), "tests": tests}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return result


def rerun(name: str, extra: list[str]) -> dict[str, Any]:
    """Rerun the failed and xpassed tests of the stored result of ``<name>`` and merge their outcomes."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"no stored run {path.relative_to(ROOT)}: run it first")
    result = json.loads(path.read_text(encoding="utf-8"))
    failed = sorted(nid for nid, (outcome, _) in result["tests"].items() if outcome in ("failed", "xpassed"))
    if not failed:
        return result
    started = datetime.datetime.now(datetime.UTC)
    tests, _, command, wall, code = _pytest(result["adapter"], name, failed, extra)
    missing = [nid for nid in failed if nid not in tests]
    if missing:
        raise SystemExit(f"{name}: the rerun did not report {missing[:3]} (ids changed?): run the suite again")
    result["tests"].update({nid: tests[nid] for nid in failed})
    result["counts"] = _counts(result["tests"])
    result.setdefault("reruns", []).append({"date": started.strftime("%Y-%m-%d %H:%M UTC"), "wall_s": round(wall),
                                            "exit_code": code, "tests": len(failed),
                                            "command": command})
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return result


def _info(impl: str, env: dict[str, str]) -> dict[str, Any]:
    code = f"import json, importlib; print(json.dumps(importlib.import_module({impl!r}).INFO, default=str))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{impl} does not import: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _condense(junit: Path) -> dict[str, list[str]]:
    """nodeid -> [outcome, reason] from a JUnit report (outcome passed/failed/skipped/xfailed/xpassed)."""
    tests: dict[str, list[str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        nodeid = classname.replace(".", "/") + ".py::" + name
        outcome, reason = "passed", ""
        for child in case:
            message = (child.get("message") or "").strip()
            if child.tag == "skipped":
                xfail = child.get("type") == "pytest.xfail"
                outcome, reason = ("xfailed" if xfail else "skipped"), message
            elif child.tag in ("failure", "error"):
                outcome, reason = "failed", message.splitlines()[0][:300] if message else child.tag
        tests[nodeid] = [outcome, reason]
    return tests


def _counts(tests: dict[str, list[str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome, _ in tests.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


# ------------------------------------------------------------------------------------------- render
#: the cell of a rule column for an adapter whose rotation takes its tables (``INFO["rope_tables"] = "input"``):
#: it computes no rule, whatever the tests it could be fed would say
TABLES_GIVEN = "tables given: no rule computed"


def _cell(name: str, column: str, tests: dict[str, list[str]], info: dict[str, Any] | None = None) -> str:
    if (info or {}).get("rope_tables") == "input" and column in (*RULE_COLUMNS.values(), "M-RoPE"):
        return TABLES_GIVEN
    outcomes = [(nid, o, r) for nid, (o, r) in tests.items() if column in _column_of(nid)]
    ran = [x for x in outcomes if x[1] != "skipped"]
    if not ran:
        return "not provided"
    failed = [x for x in ran if x[1] in ("failed", "xfailed")]
    if failed:
        return f"[diverges ({len(failed)}/{len(ran)})](#{_anchor(name)})"
    return f"passes ({len(ran)})"


def _anchor(name: str) -> str:
    return "divergences-" + name.replace("_", "-")


def render() -> str:
    results = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(RESULTS.glob("*.json"))]
    lines = [
        "# What each implementation passes",
        "",
        "Generated by `python -m spec_tests.matrix render` from the stored runs in `spec_tests/results/`",
        "(`tox -e peers` reruns every library in its own environment and regenerates this page; do not edit",
        "it by hand). Each cell summarises the spec tests of that family or rule: **passes (n)** — every one",
        "of the n tests that ran passed; **diverges (k/n)** — k of them fail or are known divergences (the",
        "link goes to the evidence); **not provided** — the library has no such function or rule, so every",
        "test of it was skipped with the reason; **" + TABLES_GIVEN + "** — the library's rotation takes its",
        "cos/sin tables as inputs (`INFO[\"rope_tables\"] = \"input\"`), so it is tested on the rotation alone",
        "and credited with no rule. Property tests count once each, however many examples ran.",
        "",
        "| library | dtype | " + " | ".join(COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for res in results:
        name = res["adapter"].rsplit(".", 1)[-1]
        row = [f"`{res['info'].get('name', name)}`", res["info"].get("dtype", "float64")]
        row += [_cell(name, column, res["tests"], res["info"]) for column in COLUMNS]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## The runs", "", "| adapter | date | passed | skipped | xfailed | failed | wall time |",
              "|---|---|---|---|---|---|---|"]
    for res in results:
        c = res["counts"]
        lines.append(f"| `{res['adapter']}` | {res['date']} | {c.get('passed', 0)} | {c.get('skipped', 0)} | "
                     f"{c.get('xfailed', 0)} | {c.get('failed', 0) + c.get('xpassed', 0)} | {res['wall_s']} s |")
    lines += ["", "Each run's command (the xfails file lists the known divergences, each with its evidence):", ""]
    for res in results:
        lines += ["```bash", res["command"], "```"]
        for again in res.get("reruns", []):
            lines += [f"then, on {again['date']}, the {again['tests']} tests it failed, with the xfails file after "
                      f"their triage ({again['wall_s']} s):", "", "```bash", again["command"], "```"]
    lines += ["", "## Divergences found, with their evidence", ""]
    for res in results:
        name = res["adapter"].rsplit(".", 1)[-1]
        lines += [f'<a id="{_anchor(name)}"></a>', "", f"### {res['info'].get('name', name)}", ""]
        if res["info"].get("setup"):  # how the adapter runs the library (backend, precision, compilation)
            lines += [res["info"]["setup"], ""]
        found = sorted((nid, o, r) for nid, (o, r) in res["tests"].items() if o in ("xfailed", "failed"))
        if not found:
            lines += ["No divergence on what the library provides.", ""]
            continue
        for nid, outcome, reason in found:
            label = "known divergence" if outcome == "xfailed" else "failure not yet triaged (no xfails entry)"
            lines.append(f"* `{nid}` — {label}: {_clean(reason)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _clean(reason: str) -> str:
    """The xfails entry's reason, and where its evidence (the comment above the entry) is: ``file:line``."""
    reason = reason.removeprefix("reason: ").strip()
    if " (spec_tests/adapters/" not in reason:
        return reason
    text, _, where = reason.rpartition(" (")
    return f"{text} (evidence: `{where.rstrip(')')}`)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spec_tests.matrix", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    run_p = sub.add_parser("run", help="run the suite on adapters and store the results")
    run_p.add_argument("names", nargs="+", help="adapter module names in spec_tests/adapters/")
    rerun_p = sub.add_parser("rerun", help="rerun the tests a stored run failed, with the current xfails file")
    rerun_p.add_argument("names", nargs="+", help="adapter module names with a stored result")
    sub.add_parser("render", help="write docs/implementations.md from spec_tests/results/")
    args, extra = parser.parse_known_args(argv)
    if args.verb in ("run", "rerun"):
        for name in args.names:
            if not (ROOT / "spec_tests" / "adapters" / f"{name}.py").is_file():
                print(f"no adapter spec_tests/adapters/{name}.py", file=sys.stderr)
                return 2
            res = (run if args.verb == "run" else rerun)(name, extra)
            print(f"{name}: {res['counts']} in {res['wall_s']} s -> spec_tests/results/{name}.json")
        return 0
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
