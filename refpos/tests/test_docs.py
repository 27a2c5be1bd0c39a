"""The documentation is a test: every ``>>>`` example in ``docs/*.md`` runs and must pass.

Each page runs as one doctest (its examples share one namespace, top to bottom) with ``ELLIPSIS`` and
``NORMALIZE_WHITESPACE``, on the current backend (``REFPOS_BACKEND``): the examples convert results with
``refpos.to_numpy`` and so run unchanged on NumPy and array-api-strict. A page that contains the line
``<!-- doctest: numpy-only -->`` runs under NumPy whatever the backend (none does at present).

The MkDocs build itself (``mkdocs build --strict``: any warning fails) is checked here too when MkDocs
is installed (the ``docs`` extra).
"""

from __future__ import annotations

import contextlib
import doctest
import functools
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import refpos

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
NUMPY_ONLY = "<!-- doctest: numpy-only -->"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

#: pages that teach a family: each must carry runnable examples
TEACHING_PAGES = [
    "index.md",
    "attention.md",
    "sinusoidal.md",
    "learned.md",
    "relative.md",
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


def test_examples_do_fail_when_wrong(tmp_path: Path):
    """The runner is not vacuous: a page with a wrong expected value fails."""
    page = tmp_path / "wrong.md"
    page.write_text("```pycon\n>>> 1 + 1\n3\n\n```\n", encoding="utf-8")
    results, report = run_page(page)
    assert (results.failed, results.attempted) == (1, 1)
    assert "Expected:" in report


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs not installed (extra 'docs')")
def test_mkdocs_build_strict(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
