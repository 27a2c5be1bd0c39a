"""Meta tests: the suite proves its own power, and its plumbing works.

* Every mutant of :data:`mutants.MUTANTS` (a deliberately wrong adapter: one known mistake) makes the
  spec test files listed for it fail, and the same files pass on :mod:`refpos.testing.adapter`.
* ``--xfails-file`` / ``--skips-file`` mark and skip tests with their reasons (a listed test that passes fails
  the run: a stale entry) and warn about entries that
  match no test; functions an adapter lacks and ``NotImplementedError`` become skips.

Each run is a subprocess ``REFPOS_IMPL=... python -m pytest -x -q <files>`` with ``REFPOS_META_RUN=1``
(a derandomized profile of at most 10 examples without shrinking: only pass/fail matters here). The
meta tests judge the suite, not an implementation, so they run only when the implementation under test
is ``refpos.testing.adapter``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import IMPL_NAME, ROOT

from refpos.check.catalogue import BY_ID, MISTAKES, Mistake
from spec_tests.mutants import MUTANTS, Mutant

pytestmark = pytest.mark.skipif(
    IMPL_NAME != "refpos.testing.adapter", reason="meta tests judge the suite; they run on refpos.testing.adapter only"
)

#: a run that ends in test failures (pytest exit code 1), not in errors, usage errors or no tests
FAILED = 1


def run_suite(impl: str, args: list[str], extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # PYTHONDONTWRITEBYTECODE would make every run recompile (and re-rewrite) its imports: ~2 s each
    dropped = ("REFPOS_XFAILS_FILE", "REFPOS_SKIPS_FILE", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(REFPOS_IMPL=impl, REFPOS_META_RUN="1")
    for key, value in (extra_env or {}).items():  # PYTHONPATH is put in front of the inherited one, not over it
        env[key] = os.pathsep.join([value, env[key]]) if key == "PYTHONPATH" and env.get(key) else value
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--assert=plain",
               "-W", "ignore::DeprecationWarning",
               *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def catching_files(name: str) -> list[str]:
    files = list(MUTANTS[name].catches)
    missing = [f for f in files if not (ROOT / f).is_file()]
    assert not missing, f"mutant {name}: the catalogue names test files that do not exist: {missing}"
    return files


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_suite_catches_the_mutant(name):
    result = run_suite(f"spec_tests.mutants.{name}", ["-q", "-x", *catching_files(name)])
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
    assert result.returncode == FAILED, (
        f"mutant {name} ({MUTANTS[name].mistake}: {MUTANTS[name].entry.description}) was not caught by "
        f"{MUTANTS[name].catches}: "
        f"pytest exit code {result.returncode}\n{tail}"
    )
    assert " failed" in tail and "error" not in tail.split("\n")[-1], tail


def test_the_same_files_pass_on_the_reference():
    files = sorted({f for name in MUTANTS for f in catching_files(name)})
    result = run_suite("refpos.testing.adapter", ["-q", "-x", *files])
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
    assert result.returncode == 0, f"the catching files fail on refpos.testing.adapter:\n{tail}"


@pytest.mark.parametrize(("name", "rope"), [
    ("rope_float32_angles", {"head_dim": 64}),
    ("rope_attention_factor_squared", {"head_dim": 64, "rope_type": "yarn", "factor": 4.0,
                                       "original_max_position_embeddings": 4096}),
], ids=["rope_float32_angles-default", "rope_attention_factor_squared-yarn"])
def test_table_mutants_reach_apply_rope(name, rope):
    """A mutant of the cos/sin tables shows its mistake in ``apply_rope`` too, not only in ``rope_cos_sin``:
    every path of apply_rope (the NumPy fast form included) consumes the readable form's tables, so the
    mutants patch that one helper and switch nothing off."""
    import importlib

    import numpy as np

    from refpos.testing import adapter

    mutant = importlib.import_module(f"spec_tests.mutants.{name}")
    x = np.random.default_rng(0).standard_normal((2, 5, 64))
    positions = np.array([0, 1, 1000, 50_000, 100_000])
    for function in ("apply_rope", "rope_cos_sin"):
        args = (x, positions, rope) if function == "apply_rope" else (positions, rope)
        wrong, right = getattr(mutant, function)(*args), getattr(adapter, function)(*args)
        assert not np.allclose(wrong, right, rtol=1e-6, atol=0), function


def test_every_mutant_module_is_catalogued():
    modules = {p.stem for p in (ROOT / "spec_tests" / "mutants").glob("*.py")
               if not p.stem.startswith("_") and p.stem != "matrix"}
    assert modules == set(MUTANTS), f"not in MUTANTS: {modules - set(MUTANTS)}; missing: {set(MUTANTS) - modules}"


def catalogue_problems(mutants: dict[str, Mutant], mistakes: tuple[Mistake, ...]) -> list[str]:
    """What breaks the one catalogue of mistakes (refpos.check.catalogue) shared with the mutants: a mutant
    naming an uncatalogued id, an entry with neither a mutant nor a reason, or with both."""
    ids = {m.id for m in mistakes}
    problems = [f"mutant {name} implements {m.mistake!r}, not in refpos/data/mistakes.toml"
                for name, m in mutants.items() if m.mistake not in ids]
    implemented = {m.mistake for m in mutants.values()}
    for mistake in mistakes:
        if mistake.id not in implemented and not mistake.no_mutant.strip():
            problems.append(f"{mistake.id}: no mutant implements it and no_mutant gives no reason")
        if mistake.id in implemented and mistake.no_mutant:
            problems.append(f"{mistake.id}: a mutant implements it, but no_mutant says {mistake.no_mutant!r}")
    return problems


def test_the_mutants_share_the_one_catalogue_of_mistakes():
    assert catalogue_problems(MUTANTS, MISTAKES) == []


def test_each_mutant_module_declares_its_catalogue_id():
    import importlib

    for name, mutant in MUTANTS.items():
        info = importlib.import_module(f"spec_tests.mutants.{name}").INFO
        assert info["mistake"] == mutant.mistake, (name, info["mistake"], mutant.mistake)
        assert info["mistake_description"] == BY_ID[mutant.mistake].description


def test_a_broken_catalogue_is_reported():
    entry = BY_ID["layout_swap"]
    orphan = Mistake("never_tested", "rope", "d", "e", "docs/diagnosis.md#layout_swap")
    stale = Mistake("layout_swap", "rope", "d", "e", "docs/diagnosis.md#layout_swap", no_mutant="none yet")
    problems = catalogue_problems({"m": Mutant("no_such_id", ()), "n": Mutant("layout_swap", ())},
                                  (entry, orphan, stale))
    expected = ("mutant m implements 'no_such_id'", "never_tested: no mutant", "layout_swap: a mutant implements it")
    assert len(problems) == 3 and all(p.startswith(e) for p, e in zip(problems, expected, strict=True)), problems


# ------------------------------------------------------------------------------------ plumbing
PARTIAL_ADAPTER = '''
"""An adapter with only a softmax that does not support the NaN policy, and an attention."""
from refpos.testing.adapter import attention, _out, _in
import refpos
INFO = {"name": "partial", "dtype": "float64"}

def softmax(logits, mask=None, fully_masked="zeros"):
    if fully_masked != "zeros":
        raise NotImplementedError("only the 'zeros' policy")
    return _out(refpos.core.softmax.softmax(_in(logits), mask=_in(mask)))
'''


def test_xfails_skips_missing_functions_and_not_implemented(tmp_path: Path):
    (tmp_path / "partial_adapter.py").write_text(textwrap.dedent(PARTIAL_ADAPTER), encoding="utf-8")
    target = "spec_tests/test_attention.py"
    (tmp_path / "xfails.txt").write_text(
        "# known divergences of partial_adapter\n"
        f"{target}::test_softmax_is_stable_for_huge_logits  # demo: expected to fail\n"
        f"{target}::test_no_such_test  # a typo: warned about\n",
        encoding="utf-8",
    )
    (tmp_path / "skips.txt").write_text("test_attention.py::test_gqa_head_mapping_is_floor_division  # too slow\n",
                                        encoding="utf-8")
    result = run_suite("partial_adapter", ["-rsxX", target, "--xfails-file", str(tmp_path / "xfails.txt"),
                                           "--skips-file", str(tmp_path / "skips.txt")],
                       {"PYTHONPATH": str(tmp_path)})
    out = result.stdout + result.stderr
    # the listed test passes: a stale entry, which fails the run (strict xfail) and names its line
    assert result.returncode == FAILED, out
    assert "3 failed" in out and "[XPASS(strict)] demo: expected to fail" in out, out[-3000:]  # its 3 cases
    assert f"({tmp_path / 'xfails.txt'}:2): the test passes: the entry is stale, delete it" in out
    assert "implementation partial_adapter" in out and "'name': 'partial'" in out  # the header
    assert "test_no_such_test" in out and "matches no test" in out
    assert "too slow" in out
    assert "does not support this case: only the 'zeros' policy" in out  # NotImplementedError -> skip
    assert "partial_adapter does not provide chunked_attention" in out  # missing function -> skip


def test_the_readme_documents_every_reference_adapter_function():
    from refpos.testing import adapter

    readme = (ROOT / "spec_tests" / "README.md").read_text(encoding="utf-8")
    contract = readme.split("<!-- contract:begin -->", 1)[1].split("<!-- contract:end -->", 1)[0]
    public = [name for name, value in vars(adapter).items()  # its own functions and those it gathers from
              if not name.startswith("_") and callable(value)  # refpos.testing.adapter_* modules
              and getattr(value, "__module__", "").startswith(adapter.__name__)]
    missing = [name for name in public if f"**`{name}(" not in contract]
    assert not missing, f"spec_tests/README.md does not document adapter functions {missing}"


def test_the_example_adapter_passes_what_it_implements():
    files = ["spec_tests/test_attention.py", "spec_tests/test_alibi.py", "spec_tests/test_t5.py",
             "spec_tests/test_sinusoidal.py", "spec_tests/test_rope_vectors.py"]
    result = run_suite("spec_tests.examples.numpy_adapter", ["-q", *files])
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
    assert result.returncode == 0 and " passed" in tail, tail


def test_tolerances_follow_the_declared_dtype_and_the_position():
    import types

    import numpy as np
    import support

    f32, f64 = types.SimpleNamespace(INFO={"dtype": "float32"}), types.SimpleNamespace(INFO={"dtype": "float64"})
    assert support.tolerance(f64)["rtol"] == 1e-13 and support.tolerance(f32)["rtol"] == 1e-6
    positions = np.array([1, 1000, 100000])
    atol = support.tolerance_array(f32, np.cos(positions * 1.0), "phase", positions=positions)
    assert atol[0] < atol[1] < atol[2]
    # a correct float32 phase path at p = 1e5 passes under a float32 claim and fails under a float64 one
    float32_cos = np.cos(np.float32(100000.0) * np.float32(1.0)).astype(np.float64)
    reference = np.cos(100000.0)
    support.assert_close(np.array([float32_cos]), np.array([reference]), f32, "phase", positions=np.array([100000]))
    with pytest.raises(AssertionError, match="phase rule, dtype float64"):
        support.assert_close(np.array([float32_cos]), np.array([reference]), f64, "phase",
                             positions=np.array([100000]))


def test_entries_match_node_ids_at_boundaries():
    from conftest import Entry

    entry = Entry("test_t5.py::test_direction_rules", "reason", "f:1")
    assert entry.matches("spec_tests/test_t5.py::test_direction_rules")
    assert entry.matches("spec_tests/test_t5.py::test_direction_rules[1-2]")
    assert not entry.matches("spec_tests/test_t5.py::test_direction_rules_more")
    assert Entry("spec_tests/test_t5.py", "r", "f:2").matches("spec_tests/test_t5.py::test_x")
