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
test files that were not part of this run are not reported). xfail marks are strict: a listed test that passes
(``XPASS``) fails the run, naming the stale entry's line.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, reject, settings
from hypothesis.control import currently_in_test_context
from hypothesis.errors import Unsatisfiable, UnsatisfiedAssumption
from length_from_positions import TAKES_LENGTH, length_from_positions
from support import IMPL, IMPL_NAME, check_declarations, declared_support, declared_value, float_tolerance_note, info

from refpos.testing.declarations import DECLARATIONS
from refpos.testing.profiles import load_profile

PROFILE = load_profile(IMPL_NAME)
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


#: what a strict XPASS means, added to pytest's ``[XPASS(strict)] reason (file:line)``
STALE = "the test passes: the entry is stale, delete it"


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


def header_lines(config: pytest.Config) -> list[str]:
    """The report header: implementation, INFO, REFPOS_* settings, profile, tolerance rule, lists."""
    variables = {k: v for k, v in sorted(os.environ.items()) if k.startswith("REFPOS_")}
    lines = [
        f"refpos spec suite: implementation {IMPL_NAME}",
        f"  INFO: {getattr(IMPL, 'INFO', '(none declared)')}",
        f"  settings: {variables or '(no REFPOS_* variables set)'}; hypothesis profile {PROFILE}",
        f"  {float_tolerance_note(IMPL)}",
    ]
    check_declarations()
    declared = {key: declared_value(key) for key, record in DECLARATIONS.items() if not (record.many or record.mapping)}
    constants = info(IMPL).get("rope_constants")
    if constants:
        declared["rope_constants"] = constants
    lines.append("  declared: " + "; ".join(f"{key} {value}" for key, value in declared.items())
                 + " (spec_tests/README.md, \"What an adapter declares\")")
    supported = declared_support()
    if supported:
        lines.append("  declared support (strategies draw only these): "
                     + "; ".join(f"{key} {', '.join(values) or '(none)'}" for key, values in supported.items()))
    for option in ("xfails_file", "skips_file"):
        value = config.getoption(option)
        if value:
            lines.append(f"  --{option.replace('_', '-')}: {value}")
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    return header_lines(config)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under ``-q`` pytest prints no header; the suite's header is printed anyway (which implementation
    ran, with which dtype and tolerances, is part of every result)."""
    config = session.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and config.get_verbosity() < 0:
        for line in header_lines(config):
            reporter.write_line(line)


def _apply(entries: list[Entry], items: list[pytest.Item], marker: str) -> None:
    for item in items:
        for entry in entries:
            if entry.matches(item.nodeid):
                entry.matched += 1
                if marker == "xfail":  # strict: a listed test that passes is a stale entry, and fails the run
                    item.add_marker(pytest.mark.xfail(reason=f"{entry.reason} ({entry.source})", strict=True))
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
    for item in items:
        if item.path.is_relative_to(SPEC_DIR):
            _count_examples(item)
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
    supported part of the input space is still tested and decides the outcome; only if no drawn example
    is supported is the test reported as skipped); elsewhere, ``pytest.skip`` with the reason."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._wrapped: dict[str, Callable[..., Any]] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not callable(value) or isinstance(value, type):
            return value
        if name not in self._wrapped:
            if name in TAKES_LENGTH and declared_value("seq_len") == "positions":
                from refpos.testing import adapter as contract

                value = length_from_positions(name, value, getattr(contract, name))
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
                EXAMPLES.unsupported += 1
                EXAMPLES.reasons[reason] += 1
                reject()  # a drawn example the adapter does not support: draw others
            pytest.skip(reason)

    return wrapper


@dataclass
class ExampleCount:
    """Examples of the running property test: drawn, run to the end (passed or failed), unsupported."""

    drawn: int = 0
    ran: int = 0
    unsupported: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def main_reason(self) -> str:
        """The most frequent reason of the unsupported examples (and how many other reasons there were)."""
        if not self.reasons:
            return ""
        (reason, n), others = self.reasons.most_common(1)[0], len(self.reasons) - 1
        return f"{reason} ({n}×)" + (f"; {others} other reason{'s' * (others > 1)}" if others else "")


#: the counts of the property test running now (reset before each test)
EXAMPLES = ExampleCount()
#: per node id, the note of each property test that discarded unsupported examples (for the summary)
PARTIAL: dict[str, str] = {}


def _count_examples(item: pytest.Item) -> None:
    """Count the examples a property test runs, and let it draw as many as its profile asks for even
    when the adapter rejects most of them.

    Hypothesis's ``filter_too_much`` health check fails a test whose examples are mostly rejected; for a
    narrow adapter that turned a tested, passing property into a skip. It is suppressed for the spec
    suite's property tests: the supported examples run and decide the outcome, and a test is skipped
    only when none of its drawn examples was supported (Hypothesis then raises ``Unsatisfiable``).
    """
    test = getattr(item, "obj", None)
    handle = getattr(test, "hypothesis", None)
    if handle is None or getattr(handle.inner_test, "_refpos_counted", False):
        return
    current = getattr(test, "_hypothesis_internal_use_settings", None) or settings.default
    test._hypothesis_internal_use_settings = settings(
        current, suppress_health_check=[*current.suppress_health_check, HealthCheck.filter_too_much])
    inner = handle.inner_test

    @functools.wraps(inner)
    def counted(*args: Any, **kwargs: Any) -> Any:
        EXAMPLES.drawn += 1
        try:
            result = inner(*args, **kwargs)
        except UnsatisfiedAssumption:  # rejected: unsupported by the adapter, or the test's own assume()
            raise
        except BaseException:
            EXAMPLES.ran += 1  # it ran and failed
            raise
        EXAMPLES.ran += 1
        return result

    counted._refpos_counted = True  # type: ignore[attr-defined]
    handle.inner_test = counted


def _examples_note(count: ExampleCount) -> str:
    return (f"{count.ran} of {count.drawn} drawn examples ran; {count.unsupported} unsupported by the adapter "
            f"were discarded (mostly: {count.main_reason()})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    EXAMPLES.__init__()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A property test none of whose drawn examples the adapter supports is a skip, not a failure; one
    that ran some of them keeps its outcome, and the summary says how many ran."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call":
        return
    if report.failed and isinstance(report.longrepr, str) and report.longrepr.startswith("[XPASS(strict)]"):
        report.longrepr = f"{report.longrepr}: {STALE}"  # an xfails entry whose test passes
    count = ExampleCount(EXAMPLES.drawn, EXAMPLES.ran, EXAMPLES.unsupported, Counter(EXAMPLES.reasons))
    EXAMPLES.__init__()
    if count.drawn:
        item.user_properties.append(("hypothesis_examples_ran", count.ran))
        item.user_properties.append(("hypothesis_examples_unsupported", count.unsupported))
    excinfo = call.excinfo
    if (report.failed and excinfo is not None and excinfo.errisinstance(Unsatisfiable)
            and count.unsupported and count.ran == 0):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: none of {count.drawn} drawn examples is supported: {count.main_reason()}")
    elif count.unsupported:
        # carried by the report, so that under pytest-xdist the controller (which prints the summary) gets it
        report.user_properties.append((PARTIAL_PROPERTY, _examples_note(count)))


#: the report property that carries a partial run's note from the process that ran it to the summary
PARTIAL_PROPERTY = "refpos_examples_note"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the partial runs' notes where the summary is printed (the only process, or xdist's controller)."""
    for name, value in report.user_properties:
        if name == PARTIAL_PROPERTY:
            PARTIAL[report.nodeid] = value


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Which property tests ran on part of their drawn examples only (a narrow adapter), and how many."""
    if not PARTIAL:
        return
    terminalreporter.section("refpos: property tests run on the supported part of the drawn examples")
    for nodeid, note in sorted(PARTIAL.items()):
        terminalreporter.write_line(f"{nodeid}: {note}")


@pytest.fixture(scope="session")
def impl() -> Adapter:
    """The adapter under test (``NotImplementedError`` from its functions becomes a skip)."""
    return Adapter(IMPL)
