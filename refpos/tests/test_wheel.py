"""``pip install refpos`` is enough to test a library: ``tox -e wheel``.

The wheel is built from the checkout (``pip wheel``, as a user's ``pip install`` builds it) and
installed with its ``test`` extra into a fresh virtual environment in a temporary folder, outside the
repository; every command then runs from another temporary folder, so nothing of the checkout can be
imported by accident (the test asserts where ``refpos`` and the goldens were read from). There:

* ``refpos --version`` names the installed copies of the suite and the goldens;
* ``refpos suite -n 2`` runs the whole spec suite on the reference adapter and passes;
* ``refpos suite --impl my_adapter`` runs it on an adapter module in the current folder (a wrapper of
  the reference that declares float32), on the golden cases;
* ``refpos golden verify`` regenerates every committed golden case and finds no problem;
* ``refpos check CASE FILE`` finds an installed case, accepts its own output and rejects a shifted one;
* every command of docs/validate.md and docs/write-an-adapter.md runs as the page writes it, in a folder of its
  own (docs/validate.md's holds the files of ``docs/examples/``, the page's own): each line of a ``bash`` block
  exits 0, each ``$`` line of a ``console`` block exits 0 or 1 and prints what the page shows (``...`` elides).
  A block preceded by ``<!-- not run: reason -->`` is left out, with its reason; the page's install command is
  the one the fixture ran (``pip install 'refpos[test]'``, of the wheel).

It needs the package index (the environment installs ``refpos[test]`` with its dependencies) and a few
minutes, so it runs only with ``REFPOS_WHEEL=1`` (set by the tox environment), not in the default suite;
the fast checks of the same packaging are in ``test_install.py``.
"""

from __future__ import annotations

import doctest
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import refpos

ROOT = Path(__file__).resolve().parents[2]

if os.environ.get("REFPOS_WHEEL") != "1":
    pytest.skip("the wheel test runs with REFPOS_WHEEL=1 (tox -e wheel)", allow_module_level=True)

#: a golden case that ``refpos check`` reads from the installed goldens
CASE = "rope/meta-llama--Llama-3.2-1B/apply"

MY_ADAPTER = """
    from refpos.testing import adapter as ref

    INFO = {"name": "my adapter (the reference, declared float32)", "dtype": "float32", "rope_layout": "half"}

    def apply_rope(x, positions, rope, seq_len=None):
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)
"""


#: the guides whose commands run from the wheel, each in a folder of its own, with the files its folder holds
PAGES = {"validate.md": ROOT / "docs" / "examples", "write-an-adapter.md": None}
#: the install command every page gives (the fixture ran it, with the wheel for ``refpos``)
INSTALL = "python -m pip install 'refpos[test]'"
FENCE = re.compile(r"(<!-- not run: ([^>]*) -->\n)?```(bash|console)\n(.*?)```", re.S)


def page_steps(text: str) -> tuple[list[tuple[str, str | None]], list[str]]:
    """``(command, expected output or None)`` of a page's ``bash`` lines and ``console`` ``$`` lines, in order, and
    the reasons of the blocks left out. A ``bash`` line ending in a backslash continues on the next.

    >>> page_steps("```bash\\nrefpos suite \\\\\\n  -n 2\\n```\\n```console\\n$ refpos --version\\nrefpos 1\\n```\\n")
    ([('refpos suite -n 2', None), ('refpos --version', 'refpos 1')], [])
    """
    steps: list[tuple[str, str | None]] = []
    left_out: list[str] = []
    for _, reason, kind, body in FENCE.findall(text):
        if reason:
            left_out.append(reason)
            continue
        if kind == "bash":
            for line in re.sub(r"\\\n\s*", "", body).splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    steps.append((line.strip(), None))
            continue
        command, output = None, []
        for line in body.splitlines():
            if line.startswith("$ "):
                if command is not None:
                    steps.append((command, "\n".join(output)))
                command, output = line[2:], []
            else:
                output.append(line)
        if command is not None:
            steps.append((command, "\n".join(output)))
    return steps, left_out


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"$ {' '.join(Path(c).name if i == 0 else c for i, c in enumerate(command))}   "
          f"[{time.perf_counter() - start:.1f} s, exit {proc.returncode}]")
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A fresh virtual environment with the wheel and its test extra; its ``bin`` folder and a clean env."""
    base = tmp_path_factory.mktemp("wheel")
    dist, venv, work = base / "dist", base / "venv", base / "work"
    work.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(base), "LANG": "C.UTF-8",
           **{k: v for k, v in os.environ.items() if k.startswith(("PIP_", "UV_")) or k == "CI"}}
    proc = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)], base, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = next(dist.glob("refpos-*.whl"))
    print(f"  {wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB, "
          f"{len(zipfile.ZipFile(wheel).namelist())} files")
    proc = _run([sys.executable, "-m", "venv", str(venv)], base, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[test]"], base, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"bin": venv / "bin", "work": work, "env": env, "venv": venv}


def test_version_names_the_installed_suite(installed: dict):
    proc = _run([str(installed["bin"] / "refpos"), "--version"], installed["work"], installed["env"])
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    print(f"  {line}")
    assert line.startswith(f"refpos {refpos.__version__} ")
    assert str(installed["venv"]) in line and "_suite" in line, line


def test_the_suite_passes_on_the_reference(installed: dict):
    proc = _run([str(installed["bin"] / "refpos"), "suite", "-q", "-n", "2"], installed["work"], installed["env"])
    tail = proc.stdout.strip().splitlines()
    print("  " + "\n  ".join([*tail[:3], "…", *tail[-2:]]))
    assert proc.returncode == 0, "\n".join(tail[-40:]) + proc.stderr
    assert "refpos spec suite: implementation refpos.testing.adapter" in proc.stdout
    # the skips of the torch anchors name their files: the installed copy's (relative to the work folder)
    assert "site-packages/refpos/_suite/spec_tests/" in proc.stdout, "the suite did not run from the installed copy"
    assert " passed" in tail[-1] and "failed" not in tail[-1] and "error" not in tail[-1], tail[-1]


def test_the_suite_runs_an_adapter_of_the_current_folder(installed: dict):
    (installed["work"] / "my_adapter.py").write_text(textwrap.dedent(MY_ADAPTER), encoding="utf-8")
    proc = _run([str(installed["bin"] / "refpos"), "suite", "--impl", "my_adapter", "-q",
                 "spec_tests/test_golden.py"], installed["work"], installed["env"])
    tail = proc.stdout.strip().splitlines()
    print(f"  {tail[-1]}")
    assert proc.returncode == 0, "\n".join(tail[-40:]) + proc.stderr
    assert "implementation my_adapter" in proc.stdout and "dtype float32" in proc.stdout
    assert " passed" in tail[-1] and "failed" not in tail[-1], tail[-1]


def test_golden_verify_reads_the_installed_goldens(installed: dict):
    proc = _run([str(installed["bin"] / "refpos"), "golden", "verify"], installed["work"], installed["env"])
    print(f"  {proc.stdout.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "0 problems: ok" in proc.stdout


def test_check_finds_an_installed_case(installed: dict):
    python = str(installed["bin"] / "python")
    work = installed["work"]
    code = ("import numpy as np; from refpos.golden.manifest import default_golden_dir, find_case, load_arrays, "
            f"load_manifest; root = default_golden_dir(); case = find_case(load_manifest(root), {CASE!r}); "
            "print(root); y = load_arrays(root, case, 'outputs')[case['primary_output']]; "
            "np.save('same.npy', y); np.save('shifted.npy', y * (1 + 1e-3))")
    proc = _run([python, "-c", code], work, installed["env"])
    assert proc.returncode == 0, proc.stderr
    assert str(installed["venv"]) in proc.stdout, proc.stdout
    same = _run([str(installed["bin"] / "refpos"), "check", CASE, "same.npy"], work, installed["env"])
    shifted = _run([str(installed["bin"] / "refpos"), "check", CASE, "shifted.npy"], work, installed["env"])
    print(f"  {same.stdout.strip().splitlines()[0]}\n  {shifted.stdout.strip().splitlines()[0]}")
    assert same.returncode == 0 and ": OK" in same.stdout, same.stdout + same.stderr
    assert shifted.returncode == 1 and ": FAIL" in shifted.stdout, shifted.stdout + shifted.stderr
    assert np.load(work / "same.npy").dtype == np.float64


@pytest.mark.parametrize("page", list(PAGES))
def test_every_command_of_the_guide_runs_from_the_wheel(installed: dict, tmp_path: Path, page: str):
    """The page's commands, as written, from the installed wheel in a folder of their own: a user's folder (no
    CI variable: the suite's profile is its default one)."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    steps, left_out = page_steps(text)
    assert not re.search(r"pytest spec_tests|REFPOS_IMPL=", text), f"docs/{page} runs the suite from a checkout"
    work = tmp_path / "work"
    if PAGES[page] is None:
        work.mkdir()
    else:
        shutil.copytree(PAGES[page], work)
        from refpos.tests.test_docs import _validate_setup

        _validate_setup(work)
    env = {k: v for k, v in installed["env"].items() if k != "CI"}
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    ran = 0
    for command, expected in steps:
        if "pip install" in command:
            assert command == INSTALL, f"docs/{page} installs with {command!r}, the fixture with {INSTALL!r}"
            continue
        proc = _run(["bash", "-c", command], work, env)
        print(f"    (docs/{page}: {command[:90]})")
        allowed = (0,) if expected is None else (0, 1)
        assert proc.returncode in allowed, f"docs/{page}: `{command}` exited {proc.returncode}\n" + (
            proc.stdout[-3000:] + proc.stderr[-3000:])
        if expected and expected.strip():
            want = expected.replace("…", "...").strip() + "\n"
            got = proc.stdout.strip() + "\n"
            assert checker.check_output(want, got, flags), (f"docs/{page}: `$ {command}` printed\n{got[-4000:]}\n"
                                                            f"the page shows\n{want}")
        ran += 1
    print(f"  docs/{page}: {ran} commands ran; left out: {left_out or 'none'}")
    assert ran >= 3, steps
