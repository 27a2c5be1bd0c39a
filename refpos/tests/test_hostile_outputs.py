"""Hostile output files: ``check --plot``, ``plot --out``, ``plot --all --out-dir``, ``plot --config --out`` and
``positions --out`` never write through a symlink, never replace a file without ``--force``, and nothing a
racer does to the target while refpos writes gets a byte written elsewhere.

Every one of them goes through :func:`refpos.outputs.write_file`: a temporary file beside the target
(``O_CREAT | O_EXCL | O_NOFOLLOW``), flushed, then given the target's name (a hard link when nothing may be
replaced, a rename with ``--force``); a symlink at the target is refused, with ``--force`` too. docs/security.md
lists the groups.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from refpos.cli import main
from refpos.encodings.alibi import alibi_slopes
from refpos.golden.mrope_cases import vlm_configs
from refpos.golden.npy import npy_bytes
from refpos.inputs import InputError
from refpos.tests.hostile import MODEL
from refpos.tools.plots import PLOTS

pytestmark = pytest.mark.skipif(__import__("importlib").util.find_spec("matplotlib") is None,
                                reason="matplotlib not installed (extra 'plot'): the figures cannot be drawn")

PRECIOUS = b"precious: not refpos's"


def _check_plot(tmp_path: Path, target: Path) -> list[str]:
    slopes = tmp_path / "slopes.npy"
    slopes.write_bytes(npy_bytes(np.sort(np.asarray(alibi_slopes(12, xp="numpy")))[::-1].copy()))  # a fit to draw
    return ["check", "alibi", "--heads", "12", "--candidate", str(slopes), "--plot", str(target)]


def _plot_config(tmp_path: Path, target: Path) -> list[str]:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(MODEL), encoding="utf8")
    return ["plot", "--config", str(config), "--out", str(target)]


def _positions(tmp_path: Path, target: Path) -> list[str]:
    config = tmp_path / "vlm.json"
    config.write_text(json.dumps(vlm_configs()["Qwen/Qwen2.5-VL-7B-Instruct"]["config"]), encoding="utf8")
    return ["positions", str(config), "--layout", "text:3,image:1x4x4", "--out", str(target)]


FIRST_FIGURE = next(iter(PLOTS))
#: each output: (the argv writing ``target``, ``target``'s name, whether a run with --force may be tried: --all
#: draws every figure, too slow to draw here)
OUTPUTS: dict[str, tuple[Callable[[Path, Path], list[str]], str, bool]] = {
    "check --plot": (_check_plot, "fit.svg", True),
    "plot NAME --out": (lambda tmp, target: ["plot", "worked-example", "--out", str(target)], "fig.png", True),
    "plot --all --out-dir": (lambda tmp, target: ["plot", "--all", "--out-dir", str(target.parent)],
                             f"{FIRST_FIGURE}.svg", False),
    "plot --config --out": (_plot_config, "model.svg", True),
    "positions --out": (_positions, "ids.npy", True),
}


def _paths(tmp_path: Path, output: str) -> tuple[list[str], Path, Path]:
    build, name, _ = OUTPUTS[output]
    (tmp_path / "out").mkdir()
    (tmp_path / "outside").mkdir()
    target = tmp_path / "out" / name
    return build(tmp_path, target), target, tmp_path / "outside"


def _refused(argv: list[str], capsys) -> str:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("force", [False, True], ids=["", "--force"])
@pytest.mark.parametrize("output", OUTPUTS)
def test_a_symlink_at_the_target_is_never_written_through(output, force, tmp_path, capsys):
    """``check --plot`` and ``plot --out`` wrote through a symlink to a file outside."""
    argv, target, outside = _paths(tmp_path, output)
    (outside / "precious.txt").write_bytes(PRECIOUS)
    target.symlink_to(outside / "precious.txt")
    err = _refused([*argv, *(["--force"] if force else [])], capsys)
    assert "symlink" in err and str(target) in err, err
    assert (outside / "precious.txt").read_bytes() == PRECIOUS and target.is_symlink()


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_dangling_symlink_at_the_target_creates_nothing_outside(output, tmp_path, capsys):
    argv, target, outside = _paths(tmp_path, output)
    target.symlink_to(outside / "planted.svg")
    assert "symlink" in _refused(argv, capsys)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("output", OUTPUTS)
def test_an_existing_file_is_replaced_only_with_force(output, tmp_path, capsys):
    """``check --plot`` and ``plot --out`` overwrote a user's file without a word."""
    argv, target, _ = _paths(tmp_path, output)
    target.write_bytes(PRECIOUS)
    err = _refused(argv, capsys)
    assert "exists" in err and "--force" in err and str(target) in err, err
    assert target.read_bytes() == PRECIOUS
    if OUTPUTS[output][2]:
        assert main([*argv, "--force"]) in (0, 1)  # check's verdict is 0 or 1
        assert target.read_bytes() != PRECIOUS and not target.is_symlink()
        assert not [p for p in target.parent.iterdir() if p.name.startswith(".refpos-")]  # no temporary file left


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_directory_at_the_target_is_refused(output, tmp_path, capsys):
    argv, target, _ = _paths(tmp_path, output)
    target.mkdir()
    (target / "mine.txt").write_bytes(PRECIOUS)
    assert "directory" in _refused([*argv, "--force"], capsys)
    assert (target / "mine.txt").read_bytes() == PRECIOUS


def test_a_symlink_planted_just_after_refpos_looked_is_not_written_through(tmp_path, monkeypatch, capsys):
    """``positions --out`` looked (``lexists``), then opened the path: a symlink planted in between was
    followed. Here the symlink appears right after every look refpos takes at the target by its path."""
    argv, target, outside = _paths(tmp_path, "positions --out")
    (outside / "precious.txt").write_bytes(PRECIOUS)
    looks = []

    def looked(real: Callable) -> Callable:
        def look(path, *args, **kwargs):
            try:
                return real(path, *args, **kwargs)  # the truth (or its FileNotFoundError), then the racer strikes
            finally:
                if os.fspath(path) == str(target) and not looks:
                    looks.append(path)
                    target.symlink_to(outside / "precious.txt")
        return look
    monkeypatch.setattr(os.path, "lexists", looked(os.path.lexists))
    monkeypatch.setattr(os, "lstat", looked(os.lstat))
    code = main(argv)
    monkeypatch.undo()
    assert looks and code == 2 and "symlink" in capsys.readouterr().err
    assert (outside / "precious.txt").read_bytes() == PRECIOUS


RACER = """
import os, sys
target, outside, stop = sys.argv[1:]
while not os.path.exists(stop):  # a symlink to outside at the target, then none, as fast as it can
    try:
        os.symlink(outside, target)
        os.unlink(target)
    except OSError:
        pass
"""


@pytest.mark.parametrize("force", [True, False], ids=["--force", ""])
@pytest.mark.parametrize("output", ["positions --out", "write_file"])
def test_a_racer_swapping_the_target_for_a_symlink_never_gets_a_byte_written_outside(output, force, tmp_path):
    """Another process plants a symlink to a file outside at the target and removes it, as fast as it can,
    while refpos writes the file again and again (``positions --out`` 8 times; the writer every output goes
    through, :func:`refpos.outputs.write_file`, 200 times): every run writes the target or refuses; the file
    outside never changes."""
    from refpos.outputs import write_file

    argv, target, outside = _paths(tmp_path, "positions --out")
    precious, stop = outside / "precious.txt", tmp_path / "stop"
    precious.write_bytes(PRECIOUS)
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(target), str(precious), str(stop)])
    outcomes = []
    try:
        for _ in range(8 if output == "positions --out" else 200):
            if output == "positions --out":
                outcomes.append(main([*argv, *(["--force"] if force else [])]))
                continue
            try:
                write_file(target, b"refpos's bytes", force=force)
                outcomes.append(0)
            except InputError:
                outcomes.append(2)
            with contextlib.suppress(OSError):
                target.unlink()  # the next write finds no file of its own in the way
    finally:
        stop.touch()
        racer.wait(20)
    assert precious.read_bytes() == PRECIOUS, outcomes
    assert set(outcomes) <= {0, 2}, outcomes
