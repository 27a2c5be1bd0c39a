"""The guides (docs/validate.md, docs/write-an-adapter.md) agree with the README and with a user's install.

* Every time the guides quote for a command the README's table of tests times (``refpos suite``, ``pip install``,
  ``tox -e …``) is a time of that table: one measurement, quoted alike.
* The commands the guides give run from a wheel (``pip install 'refpos[test]'``, ``refpos suite --impl …``):
  none runs the suite from a checkout (``pytest spec_tests``, ``REFPOS_IMPL=…``); ``test_wheel.py`` runs them.
* The blocks ``test_wheel.py`` leaves out say why, and ``page_steps`` finds the commands it runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDES = ("validate.md", "write-an-adapter.md")
#: a duration as the pages and the README write them: "56 s", "1 min 4 s", "2.4 minutes", "90 seconds"
DURATION = re.compile(r"\b\d+(?:\.\d+)?(?: min \d+ s| ?s\b| minutes?\b| seconds?\b| min\b)")
#: the commands whose times the README's table of tests holds
TIMED = re.compile(r"refpos suite|pip install|tox -e")


def readme_times() -> set[str]:
    """The durations of the README's table rows for ``refpos suite`` and the ``tox -e`` environments."""
    rows = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `tox") or line.startswith("| `refpos suite")]
    return {d for row in rows for d in DURATION.findall(row)}


def quoted_times(text: str) -> list[tuple[str, str]]:
    """``(duration, sentence)`` of every duration a page quotes in a sentence that names a timed command."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    sentences = re.split(r"(?<=[.;:])\s+(?=[A-Z`(])", prose.replace("\n", " "))
    return [(d, sentence) for sentence in sentences if TIMED.search(sentence) for d in DURATION.findall(sentence)]


@pytest.mark.parametrize("page", GUIDES)
def test_the_guides_quote_the_readmes_times(page: str):
    times = readme_times()
    assert times, "the README's table of tests has no times"
    wrong = [(d, s[:160]) for d, s in quoted_times((ROOT / "docs" / page).read_text(encoding="utf-8"))
             if d not in times]
    assert not wrong, f"docs/{page} quotes times the README's table of tests does not hold: {wrong}"


def test_a_disagreeing_time_is_found():
    text = "From the wheel, `refpos suite --impl my_adapter` took 12.8 minutes. The install took a while."
    assert quoted_times(text) == [("12.8 minutes", text.split(" The")[0])]
    assert "12.8 minutes" not in readme_times()


@pytest.mark.parametrize("page", GUIDES)
def test_the_guides_run_the_suite_from_a_wheel(page: str):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert not re.search(r"pytest spec_tests|REFPOS_IMPL=", text), f"docs/{page} runs the suite from a checkout"
    assert "refpos suite --impl" in text


def test_the_wheel_test_finds_each_guides_commands(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("REFPOS_WHEEL", "1")  # the module refuses to load without it
    from refpos.tests.test_wheel import INSTALL, page_steps

    validate, left_out = page_steps((ROOT / "docs" / "validate.md").read_text(encoding="utf-8"))
    assert ("refpos suite --impl my_rope -q" in [c for c, _ in validate]) and not left_out
    adapter, left_out = page_steps((ROOT / "docs" / "write-an-adapter.md").read_text(encoding="utf-8"))
    commands = [c for c, _ in adapter]
    assert commands[0] == INSTALL and "refpos suite --impl my_adapter -n 2" in commands
    assert all(reason.strip() for reason in left_out)
