"""Fuzzing what refpos does with golden directories and candidates it did not make: verify, the writer, check.

Three Hypothesis properties, each derandomized (one fixed sequence of examples, the same in CI and on every
machine) with a fixed number of examples and a deadline per example (the time budget: measured 10 s for the
three together on a 2-core machine shared with other work, load average 12):

* **verify is verified**: any change of a case that regeneration does not reproduce (a field, a tolerance, an
  array's dtype or shape, an output or input added or dropped, the parameters) makes ``golden verify`` report
  a problem, or the manifest is refused whole; a changed directory never verifies;
* **the writer keeps its promises**: whatever ``--out`` holds (a user's files, a symlink to outside as the
  manifest, a case file or a case directory, another model's goldens, a FIFO), ``golden model`` either writes
  a directory that verifies or refuses in one line; it never changes a byte outside ``--out`` nor a file no
  refpos manifest lists;
* **check gives a verdict or one line**: any candidate file (crafted ``.npy`` headers, any payload) is exit 0,
  1 or 2 with one line on stderr, and exit 0 only for a table within tolerance of the reference.

The meta tests at the end show each property failing on a mutant of the code it guards. docs/security.md
lists the groups.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import refpos
from refpos.cli import main
from refpos.golden import generate
from refpos.golden.files import manifest as golden
from refpos.golden.files import store
from refpos.golden.files.npy import npy_bytes
from refpos.golden.generate import verify
from refpos.tests.hostile import MODEL as CONFIG
from refpos.tests.hostile import write_model
from refpos.tests.test_hostile_fuzz import npy_files

FUZZ = settings(max_examples=40, deadline=timedelta(seconds=10), derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
POSITIONS = [0, 1, 7, 40]


def _write(root: Path, name: str = "toy", positions: list[int] = POSITIONS) -> None:
    write_model(root, CONFIG, name, positions)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-model") / "g"
    _write(root)
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and not p.is_symlink()}


# -------------------------------------------------------------------------------------- verify is verified
def _changes() -> st.SearchStrategy:
    """(case suffix, what to change, a value) triples: each a change regeneration does not reproduce."""
    case = st.sampled_from(["/frequencies", "/cos-sin", "/apply"])
    field = st.tuples(st.sampled_from(["function", "family", "description"]),
                      st.sampled_from(["alibi_slopes", "rope_cos_sin", "x", ""]))
    tolerance = st.tuples(st.sampled_from(["atol", "rtol", "ulps"]), st.sampled_from([2.0, 10.0, 1e300]),
                          st.sampled_from(["float64", "float32", "bfloat16", "float16"]))
    what = st.one_of(
        st.tuples(st.just("field"), field),
        st.tuples(st.just("tolerance"), tolerance),
        st.tuples(st.just("add output"), st.sampled_from(["evil", "y2"])),
        st.tuples(st.just("add input"), st.sampled_from(["extra"])),
        st.tuples(st.just("drop"), st.sampled_from(["outputs", "inputs"])),
        st.tuples(st.just("primary"), st.just(None)),
        st.tuples(st.just("parameter"), st.sampled_from([("seq_len", 7), ("model", "other"), ("notes", ["x"])])),
        st.tuples(st.just("dtype"), st.sampled_from(["float32", "int64"])),
        st.tuples(st.just("id"), st.sampled_from(["rope/other/apply", "rope/toy/apply2"])),
    )
    return st.tuples(case, what)


def _apply_change(manifest: dict, suffix: str, what: tuple) -> None:
    case = next(c for c in manifest["cases"] if c["id"].endswith(suffix))
    kind, value = what
    primary = case["primary_output"]
    if kind == "field":
        key, new = value
        case[key] = new if case[key] != new else new + "!"
    elif kind == "tolerance":
        key, factor, dtype = value
        entry = case["outputs"][primary]["tolerance"][dtype]
        old = entry[key]
        entry[key] = [a * factor + 1e-300 for a in old] if isinstance(old, list) else old * factor + 1e-300
    elif kind in ("add output", "add input"):
        where = "outputs" if kind == "add output" else "inputs"
        source = case["outputs"][primary] if where == "outputs" else next(iter(case["inputs"].values()), None)
        if source is None:  # a case without inputs: add an output instead
            where, source = "outputs", case["outputs"][primary]
        case[where][value] = dict(source)
    elif kind == "drop":
        arrays = case[value] if case[value] and (value == "inputs" or len(case[value]) > 1) else case["outputs"]
        name = sorted(arrays)[-1]
        del arrays[name]
        if name == primary:
            case["primary_output"] = sorted(case["outputs"])[0] if case["outputs"] else primary
    elif kind == "primary":
        others = [n for n in case["outputs"] if n != primary]
        case["primary_output"] = others[0] if others else primary + "?"
    elif kind == "parameter":
        key, new = value
        case["parameters"][key] = new
    elif kind == "dtype":
        case["outputs"][primary]["dtype"] = value
    else:
        case["id"] = value


def verify_contract(root: Path, change) -> None:
    """A changed manifest is refused whole, or verify reports at least one problem."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "g"
        shutil.copytree(root, work)
        manifest = json.loads((work / "manifest.json").read_text(encoding="utf8"))
        _apply_change(manifest, *change)
        (work / "manifest.json").write_text(json.dumps(manifest), encoding="utf8")
        try:
            problems = verify(work)
        except golden.GoldenError:
            return
        assert problems, f"{change}: verified"


@FUZZ
@given(_changes())
@example(("/apply", ("add output", "evil")))
@example(("/cos-sin", ("field", ("function", "alibi_slopes"))))
@example(("/frequencies", ("tolerance", ("atol", 1e300, "float64"))))
def test_verify_finds_every_change_regeneration_does_not_reproduce(model_dir, change):
    verify_contract(model_dir, change)


# -------------------------------------------------------------------------------- the writer keeps promises
PLANTS = ["user file at the top", "user file in cases/", "manifest symlink to outside", "case file symlink to outside",
          "case directory symlink to outside", "another model's goldens", "a FIFO as the manifest", "old goldens",
          "a file where a case file goes"]


def _plant(out: Path, outside: Path, what: str) -> None:
    if what in ("old goldens", "case file symlink to outside", "case directory symlink to outside"):
        _write(out, positions=[0, 2, 3])
    if what == "user file at the top":
        (out / "notes.txt").write_text("mine", encoding="utf8")
    elif what == "user file in cases/":
        (out / "cases").mkdir(parents=True, exist_ok=True)
        (out / "cases" / "notes.txt").write_text("mine", encoding="utf8")
    elif what == "manifest symlink to outside":
        (out / "manifest.json").symlink_to(outside / "precious.txt")
    elif what == "case file symlink to outside":
        target = out / "cases/rope/toy/apply/y.npy"
        target.unlink()
        target.symlink_to(outside / "precious.txt")
    elif what == "case directory symlink to outside":
        shutil.rmtree(out / "cases/rope/toy/cos-sin")
        (out / "cases/rope/toy/cos-sin").symlink_to(outside, target_is_directory=True)
    elif what == "another model's goldens":
        _write(out, name="other")
    elif what == "a FIFO as the manifest":
        os.mkfifo(out / "manifest.json")
    elif what == "a file where a case file goes":
        _write(out, positions=[0, 2, 3])
        (out / "cases/rope/toy/frequencies/extra.npy").write_bytes(b"mine")


def writer_contract(plants: list[str], force: bool) -> None:
    """Outside bytes never change; files no manifest listed never change; the run verifies or is one line."""
    with tempfile.TemporaryDirectory() as tmp:
        out, outside = Path(tmp) / "out", Path(tmp) / "outside"
        out.mkdir()
        outside.mkdir()
        (outside / "precious.txt").write_text("precious", encoding="utf8")
        for what in plants:
            with contextlib.suppress(FileExistsError, FileNotFoundError, golden.GoldenError, store.StoreError):
                _plant(out, outside, what)
        before_outside = _tree(outside)
        listed = set()
        if (out / "manifest.json").is_file() and not (out / "manifest.json").is_symlink():  # not a FIFO: no hang
            listed = set(store.listed_files(json.loads((out / "manifest.json").read_text(encoding="utf8"))))
        mine = {rel: data for rel, data in _tree(out).items()  # not refpos's: its manifest, journal, staging
                if rel not in listed and rel != "manifest.json" and not rel.startswith(".refpos-")}
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(CONFIG), encoding="utf8")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["golden", "model", str(config), "--out", str(out), "--no-certify", "--name", "toy",
                         "--positions", ",".join(map(str, POSITIONS)), *(["--force"] if force else [])])
        assert _tree(outside) == before_outside, plants
        after = _tree(out)
        assert all(after.get(rel) == data for rel, data in mine.items()), (plants, sorted(mine))
        if code == 0:
            assert verify(out) == [], plants
        else:
            assert code == 2 and err.getvalue().count("\n") == 1, (plants, err.getvalue())


@FUZZ
@given(st.lists(st.sampled_from(PLANTS), max_size=3, unique=True), st.booleans())
@example(["user file in cases/"], True)
@example(["manifest symlink to outside"], True)
@example(["case file symlink to outside"], False)
def test_the_writer_never_writes_outside_nor_over_what_no_manifest_lists(plants, force):
    original = os.fsync
    os.fsync = lambda fd: None  # durability is not what is tested here; 20 times faster
    try:
        writer_contract(plants, force)
    finally:
        os.fsync = original


# --------------------------------------------------------------------------------- check gives a verdict
REFERENCE = np.asarray(refpos.encodings.sinusoidal.sinusoidal(np.arange(4), 8))


def _candidates() -> st.SearchStrategy[bytes]:
    tables = st.sampled_from([REFERENCE, REFERENCE[:0], REFERENCE[:3], REFERENCE.T, REFERENCE[None],
                              REFERENCE.astype(np.float32), REFERENCE + 1e-3, REFERENCE.astype(np.int64),
                              np.full((4, 8), np.nan), REFERENCE[:, :4]]).map(npy_bytes)
    return st.one_of(tables, npy_files())


def check_contract(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "candidate.npy"
        path.write_bytes(data)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["check", "sinusoid", "--dim", "8", "--length", "4", "--candidate", str(path)])
        assert code in (0, 1, 2), (code, err.getvalue())
        if code == 2:
            assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue(), err.getvalue()
        if code == 0:
            candidate = np.load(path, allow_pickle=False)
            assert candidate.shape == REFERENCE.shape
            assert np.allclose(candidate, REFERENCE, rtol=0, atol=1e-5), candidate


@FUZZ
@given(_candidates())
@example(npy_bytes(REFERENCE[:0]))
@example(npy_bytes(REFERENCE[None]))
def test_check_gives_a_verdict_or_one_line_for_any_candidate(data):
    check_contract(data)


# -------------------------------------------------------------------------------------- meta tests
def _fails(call) -> None:
    with pytest.raises((AssertionError, ExceptionGroup)):
        call()


def test_the_verify_property_fails_when_verify_compares_only_tolerances(monkeypatch, model_dir):
    """The old verify: fields, extra outputs and inputs never compared."""
    monkeypatch.setattr(generate, "CASE_FIELDS", ("parameters",))
    real = generate.case_problems

    def partial(case, new, arrays, certify=False):
        return [p for p in real(case, new, arrays, certify=certify) if "not made by the generator" not in p]
    monkeypatch.setattr(generate, "case_problems", partial)
    _fails(lambda: test_verify_finds_every_change_regeneration_does_not_reproduce(model_dir))


def test_the_writer_property_fails_when_the_writer_removes_what_it_did_not_list(monkeypatch):
    """The old writer: ``cases/`` and ``inputs/`` removed whole (rmtree) before writing, listed or not."""
    real = store._Writer.write

    def rmtree_first(self, force):
        for sub in ("cases", "inputs"):
            shutil.rmtree(Path(self.dir.path) / sub, ignore_errors=True)
        return real(self, force)
    monkeypatch.setattr(store._Writer, "write", rmtree_first)
    _fails(lambda: test_the_writer_never_writes_outside_nor_over_what_no_manifest_lists())


def test_the_check_property_fails_when_an_empty_candidate_passes(monkeypatch):
    """Every comparison of nothing passes: a check without the refusal of an empty candidate."""
    import refpos.cli.check as cli_check

    real = cli_check._dispatch

    def mutant(args):
        try:
            empty = np.load(args.candidate, allow_pickle=False).size == 0
        except Exception:
            empty = False
        if empty:
            return {"target": "sinusoid", "dtype": "float64", "ok": True, "max_abs_error": 0.0, "max_ratio": 0.0,
                    "worst_index": [], "n_outside": 0, "n": 0, "diagnosis": []}
        return real(args)
    monkeypatch.setattr(cli_check, "_dispatch", mutant)
    _fails(lambda: test_check_gives_a_verdict_or_one_line_for_any_candidate())
