"""Every numeric option of every ``refpos`` verb refuses what its range does not allow: exit 2, one line on
stderr naming the flag, no traceback, before the verb runs.

The verbs and their options are found by walking the argparse parsers (:func:`refpos.cli.build_parser`),
so an option added later is covered without a line more here. Each numeric option gets the values no
range of ours allows (NaN, ±infinity, a word, an empty string, a 5000-digit literal) and those outside
its own stated range (-1, 0, 10**30, a fraction for an integer, one past each bound). The verbs' ``run``
is replaced by a recorder: a value the parser lets through is caught without running a benchmark of
10**30 tokens. Options that must agree (``--q-len <= --k-len``, T5's buckets, a benchmark's memory) are
checked below, and through the real verbs; options with a fixed set of values (``--form``, ``--layout``, …)
refuse any other value the same way.
"""

from __future__ import annotations

import argparse
import importlib
import math

import numpy as np
import pytest

from refpos import cli
from refpos.golden.files.npy import npy_bytes

HUGE = "1" + "0" * 30  # 10**30


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """``(argv prefix, parser)`` of every verb (``("golden", "model")`` for a verb's own sub-verbs)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, (*prefix, name))


def _numeric(action: argparse.Action) -> bool:
    return bool(action.option_strings) and (action.type in (int, float) or getattr(action.type, "numeric", False))


def _valid(action: argparse.Action) -> str:
    """A value the option allows: its default, else the least it allows."""
    default = action.default[0] if isinstance(action.default, list) else action.default
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        return str(default)
    number = action.type
    low = getattr(number, "minimum", None)
    low = getattr(number, "above", None) + 1 if low is None and getattr(number, "above", None) is not None else low
    low = 1 if low is None else low
    return str(int(low) + (int(low) % 2 if getattr(number, "even", False) else 0))


def _base_argv(prefix: tuple[str, ...], parser: argparse.ArgumentParser) -> list[str]:
    """The verb with its positional and required arguments filled (the run is a recorder: any value)."""
    argv = list(prefix)
    for action in parser._actions:
        if not action.option_strings and action.nargs not in ("?", "*", argparse.SUPPRESS):
            argv.append(str(next(iter(action.choices))) if action.choices else "x")
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], _valid(action) if _numeric(action) else "x"]
    return argv


def _argv_with(argv: list[str], action: argparse.Action, value: str) -> list[str]:
    flag = action.option_strings[-1]
    if isinstance(action.nargs, int) and action.nargs > 1:  # --shape B H T D: the value in the last place
        return [*argv, flag, *[_valid(action)] * (action.nargs - 1), value]
    return [*argv, f"{flag}={value}"]


def _hostile(action: argparse.Action) -> list[str]:
    """The values outside what the option allows (its stated range where it has one)."""
    number = action.type
    kind = getattr(number, "kind", number)
    low, above, high = (getattr(number, k, None) for k in ("minimum", "above", "maximum"))
    if low is None and above is None:  # a bare int/float type states no range: a length is at least 1
        low = 1
    values = ["nan", "inf", "-inf", "abc", "", "9" * 5000, "0x10"]
    if kind is int:
        values += ["1.5", "1e3"]
    if (low is not None and -1 < low) or (above is not None and -1 <= above):
        values.append("-1")
    if (low is not None and 0 < low) or (above is not None and 0 <= above):
        values.append("0")
    if low is not None and math.isfinite(low) and low - 1 >= -1:
        values.append(str(int(low) - 1) if kind is int else repr(float(low) - 1.0))
    if above is not None:
        values.append(repr(float(above)))
    if not getattr(number, "numeric", False) or (high is not None and high < 10**30):
        values.append(HUGE)  # a bare int/float: 10**30 is beyond any length; a Number: beyond its maximum
    if high is not None:
        values.append(str(int(high) + 1) if kind is int else repr(float(high) * 2))
    if getattr(number, "even", False):
        values.append(str(int(low) + 1))
    return list(dict.fromkeys(values))


def _cases() -> list[tuple[str, list[str], argparse.Action]]:
    cases = []
    for prefix, parser in _leaves(cli.build_parser()):
        for action in parser._actions:
            if _numeric(action):
                cases.append((" ".join(prefix), _base_argv(prefix, parser), action))
    return cases


CASES = _cases()
IDS = [f"{verb} {action.option_strings[-1]}" for verb, _, action in CASES]


@pytest.fixture
def recorded(monkeypatch):
    """Each verb's run() records its arguments instead of running."""
    calls: list[argparse.Namespace] = []
    for module, _ in cli.COMMANDS.values():
        monkeypatch.setattr(importlib.import_module(module), "run", lambda args: calls.append(args) or 0)
    return calls


def test_the_walk_finds_every_verb_and_its_numeric_options():
    verbs = {verb for verb, _, _ in CASES}
    assert {"check", "bench", "tolerance", "rope", "plot", "golden model"} <= verbs
    assert len(CASES) >= 24, IDS  # 24 when this was written


@pytest.mark.parametrize(("verb", "argv", "action"), CASES, ids=IDS)
def test_numeric_options_have_a_ranged_type(verb, argv, action):
    """No bare ``type=int``/``float``: a converter that states its range (refpos.cli.options.Number)."""
    assert getattr(action.type, "numeric", False) and hasattr(action.type, "allowed"), \
        f"refpos {verb} {action.option_strings[-1]}: type {action.type!r} states no range"


@pytest.mark.parametrize(("verb", "argv", "action"), CASES, ids=IDS)
def test_hostile_values_exit_2_naming_the_flag(verb, argv, action, recorded, capsys):
    assert cli.main(_argv_with(argv, action, _valid(action))) == 0, "the valid value must reach the verb"
    assert len(recorded) == 1
    capsys.readouterr()
    flag = action.option_strings[-1]
    accepted, badly_refused = [], []
    for value in _hostile(action):
        shown = value if len(value) <= 40 else f"{value[:12]}…({len(value)} digits)"
        code = cli.main(_argv_with(argv, action, value))
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        if len(recorded) > 1:
            accepted.append(shown)
            recorded.pop()
        elif not (code == 2 and len(lines) == 1 and flag in lines[0] and "Traceback" not in err
                  and len(lines[0]) < 400):  # one short line: a 5000-digit value is shown shortened
            badly_refused.append((shown, code, err[:200]))
    assert not accepted and not badly_refused, \
        f"refpos {verb} {flag}: accepted {accepted}; refused without one short line naming it: {badly_refused}"
    assert len(recorded) == 1


CHOICES = [(" ".join(prefix), _base_argv(prefix, parser), action) for prefix, parser in _leaves(cli.build_parser())
           for action in parser._actions if action.option_strings and action.choices]


def test_the_walk_finds_the_options_with_choices():
    assert {action.option_strings[-1] for _, _, action in CHOICES} >= {"--form", "--layout", "--spacing", "--dtypes"}


@pytest.mark.parametrize(("verb", "argv", "action"), CHOICES,
                         ids=[f"{verb} {action.option_strings[-1]}" for verb, _, action in CHOICES])
def test_an_option_with_choices_refuses_any_other_value(verb, argv, action, recorded, capsys):
    flag = action.option_strings[-1]
    for value in ("no-such-choice", "", "1e30"):
        assert cli.main([*argv, f"{flag}={value}"]) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and flag in lines[0], lines
    assert not recorded


# ------------------------------------------------------------------------- options that must agree
@pytest.mark.parametrize(("argv", "flags"), [
    (["check", "t5", "c.npy", "--q-len", "5", "--k-len", "3"], ("--q-len", "--k-len")),
    (["check", "alibi", "c.npy", "--heads", "2", "--q-len", "5", "--k-len", "3"], ("--q-len", "--k-len")),
    (["check", "t5", "c.npy", "--num-buckets", "5"], ("--num-buckets",)),
    (["check", "t5", "c.npy", "--num-buckets", "32", "--max-distance", "8"], ("--max-distance",)),
    (["check", "t5", "c.npy", "--relative", "r.npy", "--q-len", "3"], ("--relative", "--q-len")),
    (["check", "sinusoid", "c.npy", "--positions", "p.npy", "--length", "3"], ("--positions", "--length")),
    (["check", "rope", "c.npy", "--candidate", "d.npy"], ("--candidate",)),
    (["bench", "rope", "--shape", "1", "1", "8", "3"], ("--shape",)),
    (["bench", "attention", "--sizes", str(2**20), "--heads", str(2**16), "--head-dim", "128"], ("--sizes", "--heads")),
    (["bench", "pipeline", "--sizes", str(2**20)], ("--sizes",)),
], ids=["t5 q>k", "alibi q>k", "t5 odd buckets", "t5 max-distance", "t5 relative and lengths",
        "sinusoid positions and length", "two candidates", "rope odd D", "attention memory", "pipeline memory"])
def test_options_that_disagree_exit_2_naming_them(argv, flags, recorded, capsys):
    code = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and all(f in lines[0] for f in flags), err
    assert not recorded


def test_agreeing_options_pass_the_parser(recorded):
    for argv in (["check", "t5", "c.npy", "--q-len", "3", "--k-len", "5"],
                 ["check", "t5", "c.npy", "--causal", "--num-buckets", "5", "--max-distance", "8"],
                 ["bench", "rope", "--shape", "1", "1", "8", "4"]):
        assert cli.main(argv) == 0
    assert len(recorded) == 3


# ------------------------------------------------------------------------- through the real verbs
def _t5_buckets(tmp_path, q_len, k_len):
    import refpos

    rel = np.arange(k_len)[None, :] - (k_len - q_len + np.arange(q_len))[:, None]  # (Tq, Tk)
    path = tmp_path / "buckets.npy"
    path.write_bytes(npy_bytes(np.asarray(refpos.encodings.t5_bucket(rel))))
    return str(path)


def test_t5_queries_are_the_last_of_the_keys(tmp_path, capsys):
    """q_len <= k_len checks at positions k_len − q_len …; q_len > k_len would put queries at negative
    positions: refused, whatever the candidate holds (here the reference such positions would give)."""
    assert cli.main(["check", "t5", _t5_buckets(tmp_path, 3, 5), "--q-len", "3", "--k-len", "5"]) == 0
    assert cli.main(["check", "t5", _t5_buckets(tmp_path, 5, 3), "--q-len", "5", "--k-len", "3"]) == 2
    assert "--q-len 5 > --k-len 3" in capsys.readouterr().err


def test_a_length_the_candidate_does_not_have_is_refused_before_allocating(tmp_path, capsys):
    """``--length 2**53``: the candidate's shape is compared first (no arange of 2**53 positions)."""
    path = tmp_path / "table.npy"
    path.write_bytes(npy_bytes(np.zeros((4, 8))))
    assert cli.main(["check", "sinusoid", str(path), "--dim", "8", "--length", str(2**53)]) == 2
    assert "needs (9007199254740992, 8)" in capsys.readouterr().err
    assert cli.main(["check", "t5", str(path), "--q-len", str(2**40), "--k-len", str(2**40)]) == 2
    assert "--q-len × --k-len" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["sinusoid", "t5"])
def test_an_empty_candidate_is_refused_not_passed(tmp_path, capsys, target):
    """Lengths of 0 are refused by the options; an empty candidate file (with --positions or --relative
    of no elements) would pass every comparison: refused too."""
    empty = tmp_path / "empty.npy"
    empty.write_bytes(npy_bytes(np.zeros((0, 4)) if target == "sinusoid" else np.zeros((0, 4), dtype=np.int64)))
    positions = tmp_path / "none.npy"
    positions.write_bytes(npy_bytes(np.zeros((0,), dtype=np.int64)))
    extra = {"sinusoid": ["--dim", "4", "--positions", str(positions)], "t5": ["--relative", str(empty)]}[target]
    assert cli.main(["check", target, str(empty), *extra]) == 2
    assert "holds no elements" in capsys.readouterr().err


def test_golden_model_max_position_beyond_int64_is_a_usage_error(tmp_path, capsys):
    code = cli.main(["golden", "model", str(tmp_path), "--out", str(tmp_path / "out"), "--max-position", HUGE])
    err = capsys.readouterr().err
    assert code == 2 and "--max-position" in err and "2**53" in err and "bug" not in err
