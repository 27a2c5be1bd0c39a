"""The matrix page (``python -m spec_tests.matrix render``) says how each runtime was run.

An adapter whose library is run under settings of its own (a backend, a precision hint, a compiler) says so
in ``INFO["setup"]``; the page prints that paragraph under the library's heading, and prints nothing for an
adapter that gives none. The three runtime adapters of the matrix (OpenVINO, tinygrad, JAX) each give one,
read from their stored results.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spec_tests import matrix

ROOT = Path(__file__).resolve().parents[2]


def _result(name: str, info: dict) -> dict:
    return {"adapter": f"spec_tests.adapters.{name}", "info": info, "date": "2026-01-01 00:00 UTC", "wall_s": 1,
            "exit_code": 0, "command": "REFPOS_IMPL=... pytest", "counts": {"passed": 1},
            "tests": {"spec_tests/test_alibi.py::test_slopes_spec_values[n=1]": ["passed", ""]}}


def test_the_setup_paragraph_is_printed_under_its_library(tmp_path, monkeypatch):
    setup = "Run with DEV=CPU: every kernel compiled by clang."
    for name, info in (("with_setup", {"name": "lib A 1.0", "setup": setup}), ("plain", {"name": "lib B 2.0"})):
        (tmp_path / f"{name}.json").write_text(json.dumps(_result(name, info)), encoding="utf-8")
    monkeypatch.setattr(matrix, "RESULTS", tmp_path)
    page = matrix.render().splitlines()
    a, b = page.index("### lib A 1.0"), page.index("### lib B 2.0")
    assert page[a + 2] == setup
    assert page[b + 2] == "No divergence on what the library provides."
    assert page.count(setup) == 1


@pytest.mark.parametrize("name", ["openvino", "tinygrad", "jax_models"])
def test_each_runtime_adapter_stores_its_setup(name):
    """The stored run of each runtime carries the adapter's setup paragraph, and the page shows it."""
    stored = json.loads((ROOT / "spec_tests" / "results" / f"{name}.json").read_text(encoding="utf-8"))
    setup = stored["info"].get("setup")
    assert setup and len(setup) > 80, f"{name}: INFO['setup'] missing or empty"
    assert setup in (ROOT / "docs" / "implementations.md").read_text(encoding="utf-8")
