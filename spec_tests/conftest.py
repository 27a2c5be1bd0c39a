"""Spec-suite plumbing: which implementation is under test, its INFO, hypothesis profiles, xfail/skip files.

``REFPOS_IMPL=pkg.module pytest spec_tests`` runs the suite against that adapter module (default
``refpos.testing.adapter``). A function the adapter does not provide turns its tests into skips, with the reason
(``support.require``); so does an adapter function raising ``NotImplementedError`` for a configuration
it does not support.

Per implementation, known divergences and unsupported tests are listed in text files:

* ``--xfails-file PATH`` (or ``REFPOS_XFAILS_FILE``): matching tests are marked ``xfail`` with the reason;
* ``--skips-file PATH`` (or ``REFPOS_SKIPS_FILE``): matching tests are skipped with the reason.

One entry per line: a pytest node id
(``spec_tests/test_rope_properties.py::test_norm_is_multiplied_by_the_attention_factor``, with or without the
``spec_tests/`` prefix) or a prefix of one ending at ``::`` or ``[`` boundaries (a module, a test without
its parameters), then optionally ``# reason``. Lines starting with ``#`` and blank lines are ignored.
An entry that matches no collected test is reported with a :class:`UnmatchedEntryWarning` (entries for
test files that were not part of this run are not reported).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import Phase, reject, settings
from hypothesis.control import currently_in_test_context
from hypothesis.errors import FailedHealthCheck, Unsatisfiable
from support import IMPL, IMPL_NAME, float_tolerance_note

from refpos.testing.profiles import load_profile

PROFILE = load_profile()
if os.environ.get("REFPOS_META_RUN"):
    # set by the meta test (test_meta.py) for its runs on mutants: only pass/fail matters there, so
    # fewer examples, derandomized, and no shrinking
    settings.register_profile(
        "refpos.meta",
        parent=settings.get_profile(PROFILE),
        max_examples=min(settings.get_profile(PROFILE).max_examples, 10),
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
    settings.load_profile("refpos.meta")
    PROFILE = "refpos.meta"
SPEC_DIR = Path(__file__).resolve().parent


class UnmatchedEntryWarning(UserWarning):
    """An entry of an ``--xfails-file`` / ``--skips-file`` that matches no collected test."""


@dataclass
class Entry:
    """One line of an xfails/skips file."""

    pattern: str
    reason: str
    source: str  # "file:line"
    matched: int = field(default=0)

    def matches(self, nodeid: str) -> bool:
        for candidate in (nodeid, nodeid.removeprefix("spec_tests/")):
            if candidate == self.pattern:
                return True
            if candidate.startswith(self.pattern) and candidate[len(self.pattern)] in ":[":
                return True
        return False

    def file_part(self) -> str:
        return self.pattern.split("::", 1)[0]


def read_entries(path: str) -> list[Entry]:
    """Parse an xfails/skips file (format in the module docstring)."""
    file = Path(path)
    if not file.is_file():
        raise pytest.UsageError(f"xfails/skips file {path!r} does not exist")
    entries = []
    for number, raw in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition("#")
        pattern, reason = pattern.strip(), reason.strip()
        if " " in pattern:
            raise pytest.UsageError(f"{path}:{number}: an entry is one node id, got {pattern!r}")
        entries.append(Entry(pattern, reason or f"listed in {file.name}", f"{path}:{number}"))
    return entries


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("refpos", "refpos spec suite")
    group.addoption(
        "--xfails-file",
        default=os.environ.get("REFPOS_XFAILS_FILE"),
        help="file of test ids expected to fail for this implementation, each with '# reason' "
        "(default: $REFPOS_XFAILS_FILE)",
    )
    group.addoption(
        "--skips-file",
        default=os.environ.get("REFPOS_SKIPS_FILE"),
        help="file of test ids to skip for this implementation, each with '# reason' "
        "(default: $REFPOS_SKIPS_FILE)",
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = {k: v for k, v in sorted(os.environ.items()) if k.startswith("REFPOS_")}
    lines = [
        f"refpos spec suite: implementation {IMPL_NAME}",
        f"  INFO: {getattr(IMPL, 'INFO', '(none declared)')}",
        f"  settings: {settings or '(no REFPOS_* variables set)'}; hypothesis profile {PROFILE}",
        f"  {float_tolerance_note(IMPL)}",
    ]
    for option in ("xfails_file", "skips_file"):
        value = config.getoption(option)
        if value:
            lines.append(f"  --{option.replace('_', '-')}: {value}")
    return lines


def _apply(entries: list[Entry], items: list[pytest.Item], marker: str) -> None:
    for item in items:
        for entry in entries:
            if entry.matches(item.nodeid):
                entry.matched += 1
                if marker == "xfail":
                    item.add_marker(pytest.mark.xfail(reason=f"{entry.reason} ({entry.source})"))
                else:
                    item.add_marker(pytest.mark.skip(reason=f"{entry.reason} ({entry.source})"))
                break


def _warn_unmatched(entries: list[Entry], items: list[pytest.Item], option: str) -> None:
    collected_files = {item.nodeid.split("::", 1)[0] for item in items}
    collected_files |= {f.removeprefix("spec_tests/") for f in collected_files}
    for entry in entries:
        if entry.matched:
            continue
        file_part = entry.file_part()
        exists = (SPEC_DIR.parent / file_part).exists() or (SPEC_DIR / file_part).exists()
        if file_part in collected_files or not exists:
            warnings.warn(
                UnmatchedEntryWarning(f"--{option} entry {entry.pattern!r} ({entry.source}) matches no test"),
                stacklevel=1,
            )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for option, marker in (("xfails_file", "xfail"), ("skips_file", "skip")):
        path = config.getoption(option)
        if not path:
            continue
        entries = read_entries(path)
        _apply(entries, items, marker)
        _warn_unmatched(entries, items, option.replace("_", "-"))


class Adapter:
    """The adapter module, seen through a proxy that turns ``NotImplementedError`` (an unsupported
    configuration) into: inside a ``@given`` test, a rejected example (Hypothesis draws others, so the
    supported part of the input space is still tested; if no drawn example is supported the test is
    reported as skipped); elsewhere, ``pytest.skip`` with the reason."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._wrapped: dict[str, Callable[..., Any]] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not callable(value) or isinstance(value, type):
            return value
        if name not in self._wrapped:
            self._wrapped[name] = _skip_unsupported(name, value)
        return self._wrapped[name]

    def __repr__(self) -> str:
        return f"<adapter {IMPL_NAME}>"


def _skip_unsupported(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except NotImplementedError as exc:
            reason = f"{IMPL_NAME}.{name} does not support this case: {exc}"
            if currently_in_test_context():
                UNSUPPORTED.append(reason)
                reject()  # a drawn example the adapter does not support: draw others
            pytest.skip(reason)

    return wrapper


#: reasons of the latest unsupported examples (for the skip message when none is supported)
UNSUPPORTED: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A property test none of whose drawn examples the adapter supports is a skip, not a failure."""
    outcome = yield
    report = outcome.get_result()
    excinfo = call.excinfo
    if report.when == "call":
        if report.failed and excinfo is not None and UNSUPPORTED and (
            excinfo.errisinstance(Unsatisfiable) or excinfo.errisinstance(FailedHealthCheck)
        ):
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {UNSUPPORTED[-1]}")
        UNSUPPORTED.clear()


@pytest.fixture(scope="session")
def impl() -> Adapter:
    """The adapter under test (``NotImplementedError`` from its functions becomes a skip)."""
    return Adapter(IMPL)
