"""``refpos check <kind>`` of the vision and audio kinds (refpos.check.kinds): each target fails a wrong candidate
and names each of its kind's mistakes, passes the reference and a float32 port of it, says that no catalogued
mistake is close to an output no mistake explains, reads its call file safely, and agrees with the catalogue,
the adapter contract and docs/diagnosis.md.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from refpos.check.kinds import KIND_CHECKS, catalogue_id, catalogue_table, check_kind
from refpos.check.kinds.call import read_call
from refpos.check.shared import catalogue
from refpos.check.shared.arrays import Unusable
from refpos.cli import main
from refpos.testing import adapter
from refpos.tests.kind_checks import call_file

ROOT = Path(__file__).resolve().parents[2]
CHECKS = {check.kind: check for check in KIND_CHECKS}


def _outputs(check):
    """``(function, arguments, mistake, wrong output)`` of every mistake the kind's examples show."""
    for function, arguments in check.examples():
        inputs = check.inputs(function, arguments)
        for name in check.mistakes:
            wrong = check.wrong(inputs, name)
            if wrong is not None:
                yield function, arguments, name, wrong


@pytest.mark.parametrize("kind", CHECKS)
def test_every_mistake_of_the_kind_fails_and_is_named(kind):
    """A mistake's output is outside the kind's bound and named by its catalogue id; the kind's examples show
    every mistake (where one is within the bound at some input, as the tanh GELU after three stacked layers, it
    is not a failure there)."""
    check, named = CHECKS[kind], set()
    for function, arguments, name, wrong in _outputs(check):
        result = check_kind(kind, function, arguments, wrong)
        if result["ok"]:
            continue
        ids = [d["id"] for d in result["diagnosis"]]
        assert catalogue_id(kind, name) in ids, (function, name, ids)
        named.add(name)
    assert named == set(check.mistakes), sorted(set(check.mistakes) - named)


@pytest.mark.parametrize("kind", CHECKS)
def test_the_reference_and_its_float32_storage_pass(kind):
    check = CHECKS[kind]
    for function, arguments in check.examples():
        reference, _ = check.reference(check.inputs(function, arguments))
        for candidate in (reference, np.asarray(reference, dtype=np.float32)):
            result = check_kind(kind, function, arguments, candidate)
            assert result["ok"] and result["diagnosis"] == [], (function, result["max_ratio"])


@pytest.mark.parametrize("kind", CHECKS)
def test_an_output_no_mistake_explains_is_said_to_be_close_to_none(kind):
    check = CHECKS[kind]
    function, arguments = check.examples()[0]
    reference, _ = check.reference(check.inputs(function, arguments))
    result = check_kind(kind, function, arguments, reference + 0.25)
    assert not result["ok"]
    assert [d["id"] for d in result["diagnosis"]] == ["closest_mistake"]
    assert result["diagnosis"][0]["evidence"].startswith("no catalogued mistake is close")


def test_bad_calls_and_dtypes_are_unusable():
    function, arguments = CHECKS["grid"].examples()[0]
    reference, _ = CHECKS["grid"].reference(CHECKS["grid"].inputs(function, arguments))
    with pytest.raises(Unusable, match="float16"):
        check_kind("grid", function, arguments, reference.astype(np.float16))
    with pytest.raises(Unusable, match="takes a call of resample_position_table"):
        check_kind("grid", "window_bias", arguments, reference)
    with pytest.raises(Unusable, match="unexpected keyword argument 'tabel'"):
        check_kind("grid", function, {**arguments, "tabel": 1}, reference)
    with pytest.raises(Unusable, match="way takes the keys"):
        check_kind("grid", function, {**arguments, "way": {"mode": "bicubic", "spin": 1}}, reference)
    with pytest.raises(Unusable, match=r"the candidate has shape \(3, 4\)"):  # no mistake makes that shape
        check_kind("grid", function, arguments, np.zeros((3, 4)))
    with pytest.raises(Unusable, match="kind must be one of"):
        check_kind("swin", function, arguments, reference)


# ----------------------------------------------------------------------------------- the catalogue, the contract
@pytest.mark.parametrize("kind", CHECKS)
def test_the_catalogue_holds_the_kind_s_mistakes_and_no_other(kind):
    """Each mistake of the kind is one entry of refpos/data/mistakes.toml, of the kind's family, documented on
    docs/diagnosis.md, its description the mistakes module's."""
    check = CHECKS[kind]
    entries = {m.id: m for m in catalogue.family(kind)}
    assert set(entries) == {catalogue_id(kind, name) for name in check.mistakes}
    for name, description in check.mistakes.items():
        entry = entries[catalogue_id(kind, name)]
        assert entry.description == description and entry.diagnosed
        assert entry.doc == f"docs/diagnosis.md#{entry.id}"


@pytest.mark.parametrize("kind", CHECKS)
def test_the_catalogue_page_holds_the_kind_s_table(kind):
    text = (ROOT / "docs" / "diagnosis.md").read_text(encoding="utf-8")
    marker = f'<!-- generated: refpos.check.kinds.catalogue_table("{kind}") -->\n'
    assert marker in text, f"docs/diagnosis.md: add the table of {kind}"
    table = text.split(marker, 1)[1].split("\n\n", 1)[0]
    assert table == catalogue_table(kind), "docs/diagnosis.md: paste catalogue_table():\n" + catalogue_table(kind)


def page_problems(kind: str, text: str) -> list[str]:
    """What the kind's docs page lacks: the ``refpos check <kind>`` command, or a mistake the target names (by its
    name or its catalogue id, in backticks)."""
    problems = [] if f"refpos check {kind} --call" in text else [f"the command refpos check {kind} --call"]
    return problems + [f"mistake {name}" for name in CHECKS[kind].mistakes
                       if f"`{name}`" not in text and f"`{catalogue_id(kind, name)}`" not in text]


@pytest.mark.parametrize("kind", CHECKS)
def test_the_kind_s_page_shows_its_command_and_its_mistakes(kind):
    """The page of the kind's record (refpos.models.kinds: ``doc``), or the one its target names (``page``), shows
    how to run its target and names every mistake the target names; a page without one of them fails."""
    from refpos.models.kinds import KINDS

    page = CHECKS[kind].page or KINDS[kind].doc
    text = (ROOT / page.split("#")[0]).read_text(encoding="utf-8")
    assert page_problems(kind, text) == [], page
    name = next(iter(CHECKS[kind].mistakes))
    assert page_problems(kind, text.replace(f"`{name}`", "").replace(f"`{catalogue_id(kind, name)}`", "")) \
        == [f"mistake {name}"]
    assert page_problems(kind, text.replace(f"refpos check {kind} --call", ""))[0].startswith("the command")


@pytest.mark.parametrize("kind", CHECKS)
def test_the_calls_are_the_contract_s_functions_or_documented(kind):
    """A call named as a contract function takes that function's parameters, with its defaults; refpos's own calls
    (the forms no contract function computes) are documented on docs/diagnosis.md."""
    page = (ROOT / "docs" / "diagnosis.md").read_text(encoding="utf-8")
    for call in CHECKS[kind].calls:
        contract = getattr(adapter, call.__name__, None)
        if contract is None:
            assert f"`{call.__name__}(" in page, f"{call.__name__}: document refpos's own call"
            continue
        ours, theirs = inspect.signature(call).parameters, inspect.signature(contract).parameters
        assert list(ours) == list(theirs), call.__name__
        assert [p.default for p in ours.values()] == [p.default for p in theirs.values()], call.__name__


@pytest.mark.parametrize("kind", CHECKS)
def test_the_contract_function_computes_the_reference(kind):
    """The reference adapter's function on a call's arguments is the kind's reference (the target compares with
    what the spec suite tests)."""
    check = CHECKS[kind]
    for function, arguments in check.examples():
        contract = getattr(adapter, function, None)
        if contract is not None:
            reference, tolerance = check.reference(check.inputs(function, arguments))
            np.testing.assert_allclose(contract(**arguments), reference, rtol=0, atol=np.max(tolerance))


# ------------------------------------------------------------------------------------------ the command line
@pytest.mark.parametrize("kind", CHECKS)
def test_the_command_names_a_mistake_and_passes_the_reference(kind, tmp_path, capsys):
    check = CHECKS[kind]
    function, arguments, name, wrong = next(_outputs(check))
    call = call_file(tmp_path, function, arguments)
    reference, _ = check.reference(check.inputs(function, arguments))
    np.save(tmp_path / "wrong.npy", wrong)
    np.save(tmp_path / "right.npy", reference.astype(np.float32))
    assert main(["check", kind, "--call", str(call), "--candidate", str(tmp_path / "wrong.npy"), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert catalogue_id(kind, name) in [d["id"] for d in result["diagnosis"]]
    assert main(["check", kind, "--call", str(call), "--candidate", str(tmp_path / "wrong.npy")]) == 1
    assert f"diagnosis {catalogue_id(kind, name)}: " in capsys.readouterr().out
    assert main(["check", kind, "--call", str(call), "--candidate", str(tmp_path / "right.npy")]) == 0
    assert f"refpos check {kind}: OK (float32)" in capsys.readouterr().out


def test_the_command_refuses_what_it_cannot_check(tmp_path, capsys):
    function, arguments = CHECKS["fourier"].examples()[0]
    call = call_file(tmp_path, function, arguments)
    reference, _ = CHECKS["fourier"].reference(CHECKS["fourier"].inputs(function, arguments))
    np.save(tmp_path / "y.npy", reference)
    np.save(tmp_path / "half.npy", reference.astype(np.float16))
    y = str(tmp_path / "y.npy")
    cases = [
        (["check", "fourier", "--candidate", y], "needs --call CALL.json"),
        (["check", "fourier", "--call", str(call), "--candidate", str(tmp_path / "half.npy")], "float16"),
        (["check", "fourier", "--call", str(call), "--candidate", y, "--config", str(call)], "does not resolve"),
        (["check", "fourier", "--call", str(tmp_path / "none.json"), "--candidate", y], "none.json"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(("args", "message"), [
    ({"coords": {"npy": "../outside.npy"}}, "'..'"),
    ({"coords": {"npy": "/etc/passwd"}}, "relative to the call file"),
    ({"coords": {"npy": 3}}, '{"npy": "FILE.npy"}'),
    ({"coords": {"npy": "link.npy"}}, "symlink"),
])
def test_a_call_file_reads_only_beside_itself(tmp_path, args, message):
    """An array argument is a plain relative path under the call file's directory: no '..', no absolute path, no
    symlink on the way (the test plants one pointing at a real .npy outside)."""
    inner = tmp_path / "call"
    inner.mkdir()
    np.save(tmp_path / "outside.npy", np.zeros((2, 2)))
    (inner / "link.npy").symlink_to(tmp_path / "outside.npy")
    (inner / "call.json").write_text(json.dumps({"function": "fourier_features", "args": args}), encoding="utf-8")
    with pytest.raises(Unusable, match=message):
        read_call(inner / "call.json")


def test_a_call_file_is_one_function_and_its_arguments(tmp_path):
    path = tmp_path / "call.json"
    for text, message in [('{"function": "f"}', "a call file is"), ('{"function": 1, "args": {}}', "must be a name"),
                          ('{"function": "f", "args": {}, "args": {}}', "duplicate"), ("[1]", "a call file is")]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(Unusable, match=message):
            read_call(path)


@pytest.mark.parametrize("kind", CHECKS)
def test_a_golden_case_of_the_kind_gets_its_target_s_diagnosis(kind):
    """``refpos check CASE`` on a committed case of the kind's functions: a mistake's output fails under the case's
    tolerance and is named by the kind's target. A kind whose record holds no golden case (its ``absent`` says why)
    is skipped, naming the reason."""
    from refpos.check import check_case
    from refpos.models.kinds import KINDS

    if KINDS[kind].golden is None:
        pytest.skip(f"{kind} has no golden case: {KINDS[kind].absent['golden']}")
    from refpos.check.kinds.call import case_arguments
    from refpos.golden.files.manifest import default_golden_dir, load_manifest, read_case

    check = CHECKS[kind]
    signatures = {call.__name__: call for call in check.calls}
    for case in load_manifest(default_golden_dir())["cases"]:
        if case["function"] not in signatures:
            continue
        arrays, problems = read_case(default_golden_dir(), case)
        assert not problems, problems
        arguments = case_arguments(case["parameters"]["call"], arrays["inputs"], signatures[case["function"]],
                                   case["parameters"])
        inputs = check.inputs(case["function"], arguments)
        for name in check.mistakes:
            wrong = check.wrong(inputs, name)
            result = None if wrong is None else check_case(case["id"], wrong)
            if result is not None and not result["ok"] and result["diagnosis"]:
                assert catalogue_id(kind, name) in [d["id"] for d in result["diagnosis"]], (case["id"], name)
                return
    pytest.fail(f"no committed case of {kind} shows a mistake")
