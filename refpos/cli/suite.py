"""``refpos suite [--impl MODULE] [pytest options]``: the spec suite, from any directory.

The suite (``spec_tests/``) is found by :func:`refpos.installed.suite_root`: the checkout's, or the copy a
wheel carries. It runs in a pytest process of its own, with the folder above ``spec_tests/`` as pytest's
root (so the suite's own modules import as ``spec_tests.…`` there and nowhere else) and the repository's
pytest settings (``pyproject.toml`` in a checkout, the ``pytest.ini`` written from it in a wheel); the
current directory stays the caller's, so an adapter module there imports and relative paths are the
caller's. The exit status is pytest's (0 passed, 1 tests failed, 2–5 pytest's usage and collection codes).

Arguments that begin with ``spec_tests/`` name files of the suite wherever it lies (unless such a path
exists in the current directory): a test file or folder runs those tests instead of the whole suite, any
other file (``--xfails-file spec_tests/adapters/….xfails.txt``) is passed with its full path.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from refpos.installed import BUNDLED, suite_root

#: the folder of the suite, as its node ids and xfails files write it
SUITE = "spec_tests"
#: what the suite itself imports (the ``test`` extra)
NEEDS = ("pytest", "hypothesis")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos suite``; every argument it does not know goes to pytest."""
    parser.allow_abbrev = False  # --im is pytest's business, not a short --impl
    parser.add_argument("--impl", metavar="MODULE", default=None,
                        help="the adapter module under test (REFPOS_IMPL; default refpos.testing.adapter, the "
                             "float64 reference)")
    parser.add_argument("--where", action="store_true", help="print the folder of the suite and exit")
    parser.set_defaults(pass_through=True)
    parser.epilog = ("Any other argument goes to pytest (-x, -k EXPR, -n 2, --xfails-file FILE, …); "
                     "arguments that begin with spec_tests/ name files of the suite. Use -- before a pytest "
                     "option that refpos suite would read itself (-- --help).")


def pytest_config(root: Path) -> Path:
    """The file holding the suite's pytest settings: the checkout's project file, or the wheel's ini."""
    return root / "pytest.ini" if root == BUNDLED else root / "pyproject.toml"


def pytest_arguments(root: Path, extra: list[str], cwd: Path) -> list[str]:
    """pytest's arguments: the settings, the root, then the caller's; the whole suite unless they select.

    >>> root = Path("/site/refpos/_suite")
    >>> pytest_arguments(root, ["-k", "rope", "spec_tests/test_t5.py"], Path("/nowhere"))[-3:]
    ['-k', 'rope', '/site/refpos/_suite/spec_tests/test_t5.py']
    """
    passed, selects = [], False
    for arg in extra:
        head = arg.split("::", 1)[0]
        if (head == SUITE or head.startswith(SUITE + "/")) and not (cwd / head).exists():
            inside = root / head
            selects |= inside.is_dir() or head.endswith(".py")
            arg = str(root / arg)
        passed.append(arg)
    default = [] if selects else [str(root / SUITE)]
    return ["-c", str(pytest_config(root)), "--rootdir", str(root), "-p", "no:cacheprovider", *default, *passed]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # an import hook that refuses the name
        return False


def run(args: argparse.Namespace) -> int:
    """``refpos suite``: run pytest on the suite; its exit status."""
    root = suite_root()
    if args.where:
        print(root / SUITE)
        return 0
    missing = [name for name in NEEDS if not _importable(name)]
    if missing:
        raise ImportError(f"refpos suite needs {' and '.join(missing)}: pip install 'refpos[test]'")
    extra = list(args.extra)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    env = dict(os.environ)
    if args.impl is not None:
        env["REFPOS_IMPL"] = args.impl
    command = [sys.executable, "-m", "pytest", *pytest_arguments(root, extra, Path.cwd())]
    return subprocess.run(command, env=env, check=False).returncode
