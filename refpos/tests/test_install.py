"""``pip install -e .`` (the README's install command) is enough for every ``refpos`` command.

The commands run in a fresh interpreter where every optional package (the ``test``, ``plot``, ``docs``,
``cupy`` and ``anchors`` extras) cannot be imported, as after a plain install. Every third-party
package the commands import must then be a core dependency in ``pyproject.toml``. ``refpos plot``, the
one command with an extra of its own (matplotlib), must exit 2 with one line naming the extra.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from refpos.cli import COMMANDS

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
tops = {{m.split(".")[0] for m in set(sys.modules) - at_start}}
third_party = sorted(m for m in tops - set(sys.stdlib_module_names) - {{"refpos"}}
                     if not m.startswith("_") and m.isidentifier() and m != "cython_runtime" and "__" not in m)
print(json.dumps({{"codes": codes, "plot_message": err.getvalue(), "plot_stdout": out.getvalue(),
                  "imported": third_party}}))
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
