"""The registry of ``refpos check`` targets (refpos.check.targets): every record has its pieces, and the command
line is derived from it (its dispatch, the kinds ``--config`` picks, which candidates it streams, its help).

That every kind with a ``check`` names a target of this registry which checks it is the kinds' meta-test
(refpos/tests/test_kinds_registry.py).
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pytest

from refpos.check import targets as registry
from refpos.check.shared.request import Request
from refpos.check.targets import CONFIG_FLAGS, FUNCTION_TARGETS, TARGET_KINDS, TARGETS, CheckTarget
from refpos.cli import check as cli_check
from refpos.cli import main
from refpos.golden.files.npy_file import NpyFile


def _parser() -> argparse.ArgumentParser:
    from refpos.cli import Parser

    parser = Parser()
    cli_check.configure_parser(parser)
    return parser


@pytest.mark.parametrize("name", TARGETS)
def test_every_target_has_its_pieces(name):
    target = TARGETS[name]
    assert target.name == name and target.summary and target.kinds and callable(target.run)
    options = {option for action in _parser()._actions for option in action.option_strings}
    assert set(target.flags) <= options, f"refpos check {name} reads flags the command does not have"
    assert ("--config" in target.flags) == (set(CONFIG_FLAGS) <= set(target.flags))
    for function in target.functions:
        assert FUNCTION_TARGETS[function] is target


def test_the_registry_refuses_a_second_name_or_a_kind_checked_twice():
    alibi = TARGETS["alibi"]
    with pytest.raises(ValueError, match="unique"):
        registry._registry(alibi, alibi)
    with pytest.raises(ValueError, match="one target"):
        registry._registry(alibi, dataclasses.replace(alibi, name="other"))
    with pytest.raises(ValueError, match="kinds it checks"):
        dataclasses.replace(alibi, kinds=())
    with pytest.raises(ValueError, match="go together"):
        dataclasses.replace(alibi, golden=None)


def test_the_command_s_kinds_and_help_are_the_registry_s():
    from refpos.cli import check_config

    assert check_config.TARGET_KINDS is TARGET_KINDS
    assert dict(TARGET_KINDS) == {name: t.kinds for name, t in TARGETS.items()}
    help_text = next(a.help for a in _parser()._actions if a.dest == "target")
    assert all(name in help_text for name in TARGETS)


def test_the_command_runs_the_target_s_record(monkeypatch, tmp_path):
    """The dispatch is the registry's: a target's run gets the request, its candidate read block by block exactly
    when the record streams it; a word that is no target is a golden case id."""
    seen = {}

    def run(request: Request) -> dict:
        seen["candidate"], seen["request"] = request.candidate, request
        return {"target": request.target, "ok": True, "dtype": request.dtype, "max_abs_error": 0.0, "max_ratio": 0.0,
                "diagnosis": []}

    np.save(tmp_path / "y.npy", np.zeros((3, 4)))
    for streamed in (True, False):
        fake = CheckTarget("fake", "a target of the test", ("alibi",), ("--heads",), streamed, run)
        monkeypatch.setattr(cli_check, "target_of", lambda name, fake=fake: fake if name == "fake" else None)
        assert main(["check", "fake", "--candidate", str(tmp_path / "y.npy"), "--heads", "3", "--quiet"]) == 0
        assert isinstance(seen["candidate"], NpyFile) == streamed
        assert seen["request"].need("heads", "--heads N") == 3 and seen["request"].dtype == "float64"
    monkeypatch.setattr(cli_check, "target_of", lambda name: None)
    assert main(["check", "fake", "--candidate", str(tmp_path / "y.npy"), "--golden-dir", str(tmp_path)]) == 2


def test_a_target_without_config_refuses_it(tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "y.npy", np.zeros(3))
    fake = CheckTarget("fake", "a target of the test", ("alibi",), ("--heads",), False, lambda request: {})
    monkeypatch.setattr(cli_check, "target_of", lambda name: fake if name == "fake" else None)
    assert main(["check", "fake", "--candidate", str(tmp_path / "y.npy"), "--config", str(tmp_path / "c.json")]) == 2
    assert "refpos check fake does not read --config" in capsys.readouterr().err
