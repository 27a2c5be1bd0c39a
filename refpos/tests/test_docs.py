"""The documentation is a test: every ``>>>`` example in ``docs/*.md`` runs and must pass.

Each page runs as one doctest (its examples share one namespace, top to bottom) with ``ELLIPSIS`` and
``NORMALIZE_WHITESPACE``, on the current backend (``REFPOS_BACKEND``): the examples convert results with
``refpos.to_numpy`` and so run unchanged on NumPy and array-api-strict. A page that contains the line
``<!-- doctest: numpy-only -->`` runs under NumPy whatever the backend (docs/performance.md, whose examples
show NumPy's fast forms).

The ``>>>`` examples in refpos's own docstrings run too, under NumPy (they show NumPy's results).

The ``console`` blocks of docs/validate.md are checked too: every ``$ refpos …`` and ``$ python …``
command runs, in order, in a scratch copy of ``docs/examples/``, and its output must match the page
(``...`` or ``…`` stand for elided text). The spec-suite run (``$ refpos suite …``) is left out here: it
takes a minute, and ``test_wheel.py`` runs every command of the page from the installed wheel.

Every ``>>>`` example sits in a fenced code block (outside one, Markdown renders it as a run-on
paragraph while the doctest still passes).

The MkDocs build itself (``mkdocs build --strict``: any warning fails) is checked here too when the
``docs`` extra is installed; the built site read in a browser is ``test_docs_browser.py``.
"""

from __future__ import annotations

import contextlib
import doctest
import functools
import importlib.util
import json
import os
import pkgutil
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import refpos

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
NUMPY_ONLY = "<!-- doctest: numpy-only -->"
MODULES = sorted(name for _, name, _ in pkgutil.walk_packages(refpos.__path__, "refpos.") if ".tests" not in name)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

#: pages that teach a family: each must carry runnable examples
TEACHING_PAGES = [
    "index.md",
    "attention.md",
    "sinusoidal.md",
    "learned.md",
    "relative.md",
    "deberta.md",
    "alibi.md",
    "rope.md",
    "extrapolation.md",
    "nope-drope.md",
    "other-encodings.md",
    "validate.md",
]


@functools.cache
def run_page(page: Path) -> tuple[doctest.TestResults, str]:
    """Run the examples of one page (once per session); return (failed, attempted) and the report."""
    text = page.read_text(encoding="utf-8")
    test = doctest.DocTestParser().get_doctest(text, {"__name__": f"docs.{page.stem}"}, page.name, str(page), 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    backend = refpos.use_backend("numpy") if NUMPY_ONLY in text else contextlib.nullcontext()
    with backend:
        results = runner.run(test, out=report.append, clear_globs=True)
    return results, "".join(report)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_pass(name: str):
    """Every ``>>>`` example in a refpos module's docstrings (module, classes, functions) runs and passes."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional dependency (matplotlib for refpos.tools.plots)
        pytest.skip(f"{name} cannot be imported here: {exc}")
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    with refpos.use_backend("numpy"):
        for test in doctest.DocTestFinder().find(module, name):
            runner.run(test, out=report.append, clear_globs=True)
    assert runner.failures == 0, f"{runner.failures} docstring examples failed in {name}:\n{''.join(report)}"


def test_docs_exist():
    assert PAGES, f"no Markdown pages in {DOCS}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_pass(page: Path):
    results, report = run_page(page)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed in {page.name}:\n{report}"


@pytest.mark.parametrize("name", TEACHING_PAGES)
def test_teaching_page_has_examples(name: str):
    page = DOCS / name
    assert page.exists(), f"docs/{name} is missing"
    results, _ = run_page(page)
    assert results.attempted >= 3, f"docs/{name} has only {results.attempted} runnable examples"


FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number from 1, line)`` of every line of a page outside its fenced code blocks."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            yield number, line


def unfenced_prompts(text: str) -> list[int]:
    """The line numbers (from 1) of ``>>>`` lines outside a fenced code block."""
    return [number for number, line in prose_lines(text) if line.lstrip().startswith(">>>")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_are_fenced(page: Path):
    lines = unfenced_prompts(page.read_text(encoding="utf-8"))
    assert not lines, f"docs/{page.name}: >>> outside a code fence on lines {lines} (wrap them in ```pycon)"


def test_unfenced_examples_are_found():
    text = "Prose.\n\n>>> 1 + 1\n2\n\n```pycon\n>>> 2 + 2\n4\n\n```\n\n>>> 3\n3\n"
    assert unfenced_prompts(text) == [3, 12]


def test_examples_do_fail_when_wrong(tmp_path: Path):
    """The runner is not vacuous: a page with a wrong expected value fails."""
    page = tmp_path / "wrong.md"
    page.write_text("```pycon\n>>> 1 + 1\n3\n\n```\n", encoding="utf-8")
    results, report = run_page(page)
    assert (results.failed, results.attempted) == (1, 1)
    assert "Expected:" in report


DOCS_EXTRA = ("mkdocs", "material", "mathjax")  # mkdocs, mkdocs-material, django-static-mathjax


@pytest.mark.skipif(any(importlib.util.find_spec(name) is None for name in DOCS_EXTRA),
                    reason="the 'docs' extra is not installed (mkdocs, mkdocs-material, django-static-mathjax)")
def test_mkdocs_build_strict(tmp_path: Path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # served from the site itself: MathJax and its fonts, and no script or stylesheet from outside
    assert (site / "javascripts" / "mathjax" / "tex-chtml.js").is_file()
    assert list((site / "javascripts" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    outside = re.compile(r"<(?:script|link)[^>]+(?:src|href)=\"(?:https?:)?//", re.I)
    loads = {page.relative_to(site).as_posix() for page in site.rglob("*.html") if outside.search(page.read_text())}
    assert not loads, f"pages that load a script or stylesheet from outside: {sorted(loads)}"


# ------------------------------------------------------------------------ the validate guide's commands
CONSOLE_BLOCK = re.compile(r"```console\n(.*?)```", re.S)


def console_steps(text: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` of every ``$ …`` line of the page's console blocks, in order."""
    steps: list[tuple[str, str]] = []
    for block in CONSOLE_BLOCK.findall(text):
        command: str | None = None
        output: list[str] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                if command is not None:
                    steps.append((command, "\n".join(output)))
                command, output = line[2:], []
            else:
                output.append(line)
        if command is not None:
            steps.append((command, "\n".join(output)))
    return steps


def _validate_setup(work: Path) -> None:
    """The inputs the page describes in prose: naive ALiBi slopes, T5 buckets with the sign flipped."""
    import numpy as np

    np.save(work / "slopes.npy", np.array([2.0 ** (-8 * h / 12) for h in range(1, 13)]))
    rel = np.arange(-200, 201)
    np.save(work / "rel.npy", rel)
    np.save(work / "buckets.npy", refpos.to_numpy(refpos.encodings.t5_bucket(-rel)))


def test_validate_guide_commands_print_what_the_page_shows(tmp_path: Path):
    page = (DOCS / "validate.md").read_text(encoding="utf-8")
    work = tmp_path / "work"
    shutil.copytree(DOCS / "examples", work)
    _validate_setup(work)
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []  # where refpos's needs may be
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(work), *inherited])}
    env.pop("REFPOS_BACKEND", None)
    checker = doctest.OutputChecker()
    ran = []
    for command, expected in console_steps(page):
        argv = shlex.split(command)
        if argv[:2] == ["refpos", "suite"]:
            continue  # the spec-suite run: test_wheel.py
        if argv[0] == "refpos":
            argv = [sys.executable, "-m", "refpos", *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        else:
            continue  # the spec-suite run
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode in (0, 1), f"$ {command}\n{proc.stdout}{proc.stderr}"
        want = expected.replace("…", "...").strip() + "\n"
        got = proc.stdout.strip() + "\n"
        if expected.strip() and not checker.check_output(want, got, FLAGS):
            pytest.fail(f"docs/validate.md: `$ {command}` printed\n{got}\nthe page shows\n{want}")
        ran.append(command)
    assert len(ran) >= 8, ran
    # the float32 tolerances quoted from the manifest are the generated ones
    manifest = json.loads((work / "goldens" / "manifest.json").read_text(encoding="utf-8"))
    case = next(c for c in manifest["cases"] if c["id"] == "rope/llama-3.2-1b/apply")
    atol = case["outputs"]["y"]["tolerance"]["float32"]["atol"]
    quoted = re.search(r'"float32": \{"atol": (\[[^\]]*\])', page)
    assert quoted is not None and json.loads(quoted.group(1)) == atol, atol


def test_validate_guide_shows_the_spec_suite_header(monkeypatch: pytest.MonkeyPatch):
    """The spec-suite header on the page is what ``spec_tests/conftest.py`` prints for ``my_rope``
    (the run itself takes minutes; the header's lines are computed here from the same functions)."""
    monkeypatch.syspath_prepend(str(DOCS / "examples"))
    from spec_tests.support import float_tolerance_note

    my_rope = importlib.import_module("my_rope")
    page = (DOCS / "validate.md").read_text(encoding="utf-8")
    block = next(b for b in CONSOLE_BLOCK.findall(page) if "$ refpos suite" in b)
    for line in (f"  INFO: {my_rope.INFO}", f"  {float_tolerance_note(my_rope)}"):
        assert line in block.splitlines(), f"docs/validate.md does not show the header line\n{line}"


def test_quoted_golden_count_is_the_manifest_count():
    """The number of committed golden cases that README.md and golden/README.md quote is golden/manifest.json's."""
    count = len(json.loads((ROOT / "golden" / "manifest.json").read_text(encoding="utf-8"))["cases"])
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    golden_readme = (ROOT / "golden" / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"`golden/`, (\d+) cases", readme) == [str(count)], count
    assert re.findall(r"What is in it \((\d+) cases\)", golden_readme) == [str(count)], count
