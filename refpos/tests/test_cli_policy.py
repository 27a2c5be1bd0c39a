"""The CLI's one error policy: input problems exit 2 with one line, a refpos bug exits 3 with one line that
asks for a report, a traceback only with ``--debug``."""

from __future__ import annotations

import types

import pytest

from refpos import cli


def _one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {lines}"
    return lines[0]


def _patched_run(monkeypatch, exc: BaseException) -> None:
    """Make ``refpos explain`` raise ``exc`` from inside its run()."""
    def run(args):
        raise exc

    module = types.SimpleNamespace(run=run, configure_parser=lambda parser: None)
    real_import = cli.importlib.import_module
    monkeypatch.setattr(cli.importlib, "import_module",
                        lambda name: module if name == "refpos.cli.explain" else real_import(name))


def test_a_bad_argument_is_one_line_and_exit_2(capsys):
    assert cli.main(["check", "t5", "--no-such-flag"]) == 2
    assert "error:" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("exc", [ValueError("seq_len must be >= 0, got -1"), TypeError("x must be an array"),
                                 OSError("config.json: no such file"), MemoryError()],
                         ids=["ValueError", "TypeError", "OSError", "MemoryError"])
def test_input_problems_exit_2_with_one_line(monkeypatch, capsys, exc):
    _patched_run(monkeypatch, exc)
    assert cli.main(["explain"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("refpos explain: error:") and "Traceback" not in line


def test_a_bug_exits_3_and_asks_for_a_report(monkeypatch, capsys):
    _patched_run(monkeypatch, ZeroDivisionError("division by zero"))
    assert cli.main(["explain"]) == 3
    line = _one_line(capsys.readouterr().err)
    assert "ZeroDivisionError" in line and "bug in refpos" in line and "--debug" in line


def test_debug_prints_the_traceback(monkeypatch, capsys):
    _patched_run(monkeypatch, KeyError("oops"))
    assert cli.main(["--debug", "explain"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "bug in refpos" in err
