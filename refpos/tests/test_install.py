"""``pip install -e .`` (the README's install command) is enough for every ``refpos`` command; the
packaging that ships the spec suite and the goldens (``setup.py``, ``MANIFEST.in``, :mod:`refpos.installed`)
and ``refpos suite`` / ``refpos --version``.

The commands run in a fresh interpreter where every optional package (the ``test``, ``plot``, ``docs``,
``cupy`` and ``anchors`` extras) cannot be imported, as after a plain install. Every third-party
package the commands import must then be a core dependency in ``pyproject.toml``. ``refpos plot`` and
``refpos suite``, the commands with an extra of their own (matplotlib; pytest and hypothesis), must exit 2
with one line naming the extra.

The wheel itself, installed into a fresh environment and run there, is ``test_wheel.py`` (``tox -e wheel``).
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import refpos
from refpos import installed
from refpos.cli import COMMANDS, main
from refpos.cli import golden as golden_cli
from refpos.cli import suite as suite_cli
from refpos.golden.files.manifest import default_golden_dir

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "docs" / "examples" / "llama-3.2-1b" / "config.json"

#: what the optional extras bring (import names); none may be needed by a command but ``refpos plot``;
#: charset_normalizer is not an extra's but numpy.f2py imports it when it happens to be installed
OPTIONAL = ("hypothesis", "scipy", "array_api_strict", "matplotlib", "mkdocs", "material", "mathjax", "cupy",
            "torch", "transformers", "pytest", "selenium", "charset_normalizer")

#: every verb, as the README and docs run it (the input files are written by RUNNER first)
VERBS = {
    "explain": ["explain"],
    "tolerance": ["tolerance", "--dtype", "bfloat16", "--max-position", "4096"],
    "golden": ["golden", "model", str(CONFIG), "--out", "goldens", "--positions", "0,1,4095"],
    "check": ["check", "rope", "--config", str(CONFIG), "--input", "x.npy", "--positions", "p.npy",
              "--candidate", "x.npy", "--dtype", "float32"],
    "bench": ["bench", "floors", "--sizes", "64", "--json"],
    "plot": ["plot", "--list"],
    "rope": ["rope", str(CONFIG)],
    "suite": ["suite", "--where"],
    "positions": ["positions", str(CONFIG)],
}

RUNNER = """
import contextlib, io, json, sys
at_start = set(sys.modules)  # what the interpreter's own start-up imported (site hooks): not refpos's
class NotInstalled:  # the optional packages cannot be found, as when they are not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {optional!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, NotInstalled())
import numpy as np
np.save("x.npy", np.random.default_rng(0).standard_normal((3, 64)))
np.save("p.npy", np.array([0, 1, 4095]))
from refpos.cli import main
codes = {{}}
for verb, argv in {verbs!r}.items():
    with contextlib.redirect_stdout(io.StringIO()):
        codes[verb] = main(argv)
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
    codes["plot NAME"] = main(["plot", "rope-decay", "--out", "f.png"])
err_suite = io.StringIO()
with contextlib.redirect_stderr(err_suite), contextlib.redirect_stdout(io.StringIO()):
    codes["suite run"] = main(["suite", "-q"])
tops = {{m.split(".")[0] for m in set(sys.modules) - at_start}}
third_party = sorted(m for m in tops - set(sys.stdlib_module_names) - {{"refpos"}}
                     if not m.startswith("_") and m.isidentifier() and m != "cython_runtime" and "__" not in m)
print(json.dumps({{"codes": codes, "plot_message": err.getvalue(), "plot_stdout": out.getvalue(),
                  "suite_message": err_suite.getvalue(), "imported": third_party}}))
"""


def _core_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}
    return {name.replace("-", "_") for name in names}


@pytest.fixture(scope="module")
def plain_install(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("plain")
    code = RUNNER.format(optional=OPTIONAL, verbs=VERBS)
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(work)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_verb_is_run_here():
    assert set(VERBS) == set(COMMANDS), "a refpos command without a plain-install check: add it to VERBS"


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_verb_works_after_a_plain_install(plain_install: dict, verb: str):
    assert plain_install["codes"][verb] in (0, 1), f"refpos {' '.join(VERBS[verb])} exited " \
                                                   f"{plain_install['codes'][verb]} without the extras"


def test_everything_imported_is_a_core_dependency(plain_install: dict):
    missing = set(plain_install["imported"]) - _core_dependencies()
    assert not missing, f"imported by refpos commands but not in pyproject's dependencies: {sorted(missing)}"
    assert "mpmath" in plain_install["imported"], "refpos golden model no longer needs mpmath: update the README"


def test_plot_without_matplotlib_names_the_extra(plain_install: dict):
    assert plain_install["codes"]["plot NAME"] == 2
    message = plain_install["plot_message"]
    assert message.count("\n") == 1 and "refpos[plot]" in message, message  # one line, on stderr
    assert plain_install["plot_stdout"] == ""


def test_suite_without_pytest_names_the_extra(plain_install: dict):
    assert plain_install["codes"]["suite run"] == 2
    message = plain_install["suite_message"]
    assert message.count("\n") == 1 and "refpos[test]" in message, message


# ---------------------------------------------------------------------------------- the packaging
def _setup_module():
    """setup.py's functions (it calls setuptools' ``setup`` only when run as a script)."""
    spec = importlib.util.spec_from_file_location("refpos_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wheel_ini_carries_the_repository_pytest_settings():
    """The installed suite runs under the settings the repository's does (markers, warnings as errors)."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    parser = configparser.ConfigParser()
    parser.read_string(_setup_module().pytest_ini(ROOT / "pyproject.toml"))
    section = parser["pytest"]
    for key, value in options.items():
        if key == "testpaths":
            assert key not in section  # the suite is named on the command line by refpos suite
        elif isinstance(value, list):
            assert section[key].split("\n") == ["", *value] or section[key].strip().split("\n") == value, key
        else:
            assert section[key] == value, key


def test_the_sdist_carries_what_the_wheel_bundles():
    grafted = re.findall(r"^graft (\S+)$", (ROOT / "MANIFEST.in").read_text(encoding="utf-8"), re.M)
    assert tuple(grafted) == _setup_module().BUNDLED


def test_version_is_written_once():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "refpos.__version__"}


def test_version_flag(capsys: pytest.CaptureFixture[str]):
    assert main(["--version"]) == 0
    line = capsys.readouterr().out.strip()
    assert line == f"refpos {refpos.__version__} (suite and goldens: {ROOT})", line


def _layout(root: Path, checkout: bool, bundled: bool) -> Path:
    """A fake site: ``refpos/`` with the suite and goldens beside it (a checkout) and/or in ``_suite/``."""
    package = root / "refpos"
    package.mkdir(parents=True)
    for base, wanted in ((root, checkout), (package / "_suite", bundled)):
        if wanted:
            (base / "spec_tests").mkdir(parents=True)
            (base / "spec_tests" / "conftest.py").write_text("")
            (base / "golden").mkdir()
            (base / "golden" / "manifest.json").write_text("{}")
    if checkout:
        (root / "pyproject.toml").write_text("")
    return package


@pytest.mark.parametrize(("checkout", "bundled", "expected"), [
    (True, False, "."), (True, True, "."), (False, True, "refpos/_suite"), (False, False, None)])
def test_suite_root_is_the_checkout_else_the_bundled_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        checkout: bool, bundled: bool, expected: str | None):
    package = _layout(tmp_path, checkout, bundled)
    monkeypatch.setattr(installed, "PACKAGE", package)
    monkeypatch.setattr(installed, "BUNDLED", package / "_suite")
    monkeypatch.delenv("REFPOS_GOLDEN_DIR", raising=False)
    if expected is None:
        with pytest.raises(FileNotFoundError, match="installed without them"):
            installed.suite_root()
        return
    assert installed.suite_root() == (tmp_path / expected).resolve()
    assert default_golden_dir() == (tmp_path / expected).resolve() / "golden"


def test_golden_generate_will_not_write_into_the_installed_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]):
    package = _layout(tmp_path, checkout=False, bundled=True)
    monkeypatch.setattr(installed, "PACKAGE", package)
    monkeypatch.setattr(installed, "BUNDLED", package / "_suite")
    monkeypatch.setattr(golden_cli, "BUNDLED", package / "_suite")
    monkeypatch.delenv("REFPOS_GOLDEN_DIR", raising=False)
    assert main(["golden", "generate", "--no-certify"]) == 2
    assert "--out DIR is needed" in capsys.readouterr().err
    assert (package / "_suite" / "golden" / "manifest.json").read_text() == "{}"


# ---------------------------------------------------------------------------------- refpos suite
def test_suite_arguments_select_inside_the_suite(tmp_path: Path):
    root = ROOT
    base = ["-c", str(root / "pyproject.toml"), "--rootdir", str(root), "-p", "no:cacheprovider"]
    whole = str(root / "spec_tests")
    assert suite_cli.pytest_arguments(root, ["-x", "-k", "rope"], tmp_path) == [*base, whole, "-x", "-k", "rope"]
    # a test file of the suite replaces the whole suite; a node id keeps its ::
    assert suite_cli.pytest_arguments(root, ["spec_tests/test_t5.py::test_direction_rules"], tmp_path) == [
        *base, f"{root}/spec_tests/test_t5.py::test_direction_rules"]
    # a data file of the suite (an xfails list) is passed with its full path and selects nothing
    xfails = "spec_tests/adapters/hf_transformers.xfails.txt"
    assert suite_cli.pytest_arguments(root, ["--xfails-file", xfails], tmp_path) == [
        *base, whole, "--xfails-file", str(root / xfails)]
    # the caller's own spec_tests/ folder is the caller's
    (tmp_path / "spec_tests").mkdir()
    assert suite_cli.pytest_arguments(root, ["spec_tests"], tmp_path) == [*base, whole, "spec_tests"]


def test_only_suite_passes_unknown_arguments_on(capsys: pytest.CaptureFixture[str]):
    assert main(["tolerance", "--dtype", "float32", "-x"]) == 2
    assert "unrecognized arguments: -x" in capsys.readouterr().err


@pytest.mark.parametrize(("impl", "code"), [(None, 0), ("spec_tests.mutants.t5_sign_flipped", 1)])
def test_suite_runs_from_another_folder(tmp_path: Path, impl: str | None, code: int):
    """From a folder that is not the checkout: the reference passes the T5 tests, a mutant fails them."""
    argv = [sys.executable, "-m", "refpos", "suite", *(["--impl", impl] if impl else []), "-q", "-x",
            "spec_tests/test_t5.py"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REFPOS_META_RUN": "1"}  # the meta tests' profile: no shrinking
    env.pop("REFPOS_IMPL", None)
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == code, proc.stdout[-3000:] + proc.stderr
    assert f"implementation {impl or 'refpos.testing.adapter'}" in proc.stdout
    assert not (tmp_path / ".pytest_cache").exists()


def test_pytest_without_the_dependencies_says_what_to_install():
    """pytest in a Python that lacks one of refpos's dependencies (array-api-compat here, hidden from the import
    system) stops with one line naming the module and the install command: no traceback per test module."""
    hide = ("import sys, pytest; sys.modules['array_api_compat'] = None; "
            "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'no:xdist', 'spec_tests/test_t5.py']))")
    result = subprocess.run([sys.executable, "-c", hide], cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "the module 'array_api_compat' is not installed" in out and "pip install -e '.[test]'" in out, out
    assert "Traceback" not in out and "ERROR collecting" not in out, out


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed: the cupy run is real here")
def test_the_cupy_run_without_cupy_skips_every_test_with_the_reason():
    """REFPOS_BACKEND=cupy where CuPy cannot run: the collected tests and the modules that build arrays when
    imported (test_hostile_api.py's collection fails on the backend) are skipped with the reason, none errors."""
    files = ["refpos/tests/test_hostile_api.py", "spec_tests/test_t5.py"]
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                             *files], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "REFPOS_BACKEND": "cupy"})
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "error" not in out.splitlines()[-1] and " passed" not in out, out[-2000:]
    assert "test_hostile_api.py:0: REFPOS_BACKEND=cupy but CuPy cannot run here" in out, out[-2000:]
