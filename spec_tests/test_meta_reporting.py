"""Meta tests of the suite's reporting and tolerances: a narrow adapter is reported as tested, the header
shows under ``-q``, and the dtype-following checks fail on deliberately wrong adapters.

Each run is a subprocess on a small adapter written into ``tmp_path`` (wrapping :mod:`refpos.testing.adapter`
and changing one thing), as in ``test_meta.py``. They judge the suite, so they run only when the
implementation under test is ``refpos.testing.adapter``.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from support import IMPL_NAME, assert_quoted, assert_within, quoted
from test_meta import FAILED, run_suite

pytestmark = pytest.mark.skipif(
    IMPL_NAME != "refpos.testing.adapter", reason="meta tests judge the suite; they run on refpos.testing.adapter only"
)

PASS_THROUGH = "spec_tests/test_rope_properties.py::test_pass_through_channels_are_unchanged"


def _adapter(tmp_path, name: str, body: str) -> dict[str, str]:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return {"PYTHONPATH": str(tmp_path)}


NARROW = """
    from refpos.testing import adapter as ref

    INFO = {"name": "narrow", "dtype": "float64", "rope_layout": "half"{declared}}

    def apply_rope(x, positions, rope, seq_len=None):
        if rope.get("rope_type", "default") != "default":
            raise NotImplementedError("only default RoPE")
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)
"""


def test_a_narrow_adapter_passes_and_the_report_counts_its_examples(tmp_path):
    """Most drawn examples unsupported: the supported ones run and pass; no health-check skip."""
    env = _adapter(tmp_path, "narrow_adapter", NARROW.replace("{declared}", ""))
    result = run_suite("narrow_adapter", ["-q", "-rs", PASS_THROUGH], env)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "1 passed" in out and "skipped" not in out, out[-3000:]
    assert "property tests run on the supported part of the drawn examples" in out
    assert "drawn examples ran" in out and "only default RoPE" in out


def test_a_declared_narrow_adapter_draws_only_what_it_supports(tmp_path):
    env = _adapter(tmp_path, "declared_adapter", NARROW.replace("{declared}", ', "rope_types": ["default"]'))
    result = run_suite("declared_adapter", ["-q", "-rs", PASS_THROUGH], env)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "1 passed" in out, out[-3000:]
    assert "drawn examples ran" not in out  # nothing was discarded
    assert "declared support (strategies draw only these): rope_types default" in out  # the header, under -q


def test_a_test_none_of_whose_examples_is_supported_is_a_skip(tmp_path):
    env = _adapter(tmp_path, "nothing_adapter", """
        INFO = {"name": "nothing", "dtype": "float64"}

        def apply_rope(x, positions, rope, seq_len=None):
            raise NotImplementedError("no RoPE at all")
    """)
    result = run_suite("nothing_adapter", ["-q", "-rs", PASS_THROUGH], env)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "1 skipped" in out, out[-3000:]
    assert "none of" in out and "drawn examples is supported: nothing_adapter.apply_rope" in out


def test_an_undeclarable_support_is_a_usage_error(tmp_path):
    env = _adapter(tmp_path, "typo_adapter", NARROW.replace("{declared}", ', "rope_types": ["yarn2"]'))
    result = run_suite("typo_adapter", ["-q", PASS_THROUGH], env)
    assert result.returncode not in (0, FAILED) and "INFO['rope_types'] has ['yarn2']" in result.stdout + result.stderr


PASS_THROUGH_MUTANT = """
    import numpy as np
    from refpos.testing import adapter as ref

    INFO = {{"name": "pass-through mutant", "dtype": "{dtype}", "rope_layout": "half"}}

    def apply_rope(x, positions, rope, seq_len=None):
        y = np.array(ref.apply_rope(x, positions, rope, seq_len=seq_len))
        w = rope.get("rotary_dim", rope["head_dim"])
        rest = slice(0, rope["head_dim"] - w) if rope.get("placement") == "last" else slice(w, None)
        y[..., rest] = {change}
        return y
"""


@pytest.mark.parametrize(("dtype", "change", "outcome"), [
    pytest.param("float64", "np.nextafter(y[..., rest], np.inf)", FAILED, id="float64-one-ulp-off-fails"),
    pytest.param("float32", "y[..., rest].astype(np.float32)", 0, id="float32-stored-input-passes"),
    pytest.param("float32", "y[..., rest] * (1 + 1e-6)", FAILED, id="float32-1e-6-off-fails"),
])
def test_pass_through_follows_the_declared_dtype(tmp_path, dtype, change, outcome):
    env = _adapter(tmp_path, "pass_mutant", PASS_THROUGH_MUTANT.format(dtype=dtype, change=change))
    result = run_suite("pass_mutant", ["-q", PASS_THROUGH], env)
    assert result.returncode == outcome, (result.stdout + result.stderr)[-3000:]


def test_deinterleaved_logits_catch_a_scaled_layout(tmp_path):
    env = _adapter(tmp_path, "deint_mutant", """
        import numpy as np
        from refpos.testing import adapter as ref

        INFO = {"name": "deinterleaved scaled", "dtype": "float64", "rope_layout": "half"}

        def apply_rope(x, positions, rope, seq_len=None):
            y = np.asarray(ref.apply_rope(x, positions, rope, seq_len=seq_len))
            return y * 1.001 if rope.get("layout") == "deinterleaved" else y
    """)
    test = "spec_tests/test_rope_properties.py::test_deinterleaved_and_interleaved_give_the_same_logits"
    result = run_suite("deint_mutant", ["-q", test], env)
    assert result.returncode == FAILED, (result.stdout + result.stderr)[-3000:]


def test_the_padding_scenario_checks_padding_and_the_masked_row_policy_apart(tmp_path):
    """An attention whose fully masked rows are NaN (torch.softmax) fails only the padding-query test."""
    env = _adapter(tmp_path, "nan_rows", """
        import numpy as np
        from refpos.testing import adapter as ref

        INFO = {"name": "NaN for fully masked rows", "dtype": "float64"}
        apply_rope = ref.apply_rope

        def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None):
            out = np.array(ref.attention(q, k, v, bias, mask, scale, causal, softcap))
            if mask is not None:
                dead = ~np.asarray(mask).any(axis=-1)  # (..., Tq): query rows that see no key
                out[np.broadcast_to(dead, out.shape[:-1])] = np.nan
            return out
    """)
    golden = "spec_tests/test_golden.py::test_scenario_left_padded_batch"
    assert run_suite("nan_rows", ["-q", golden], env).returncode == 0
    assert run_suite("nan_rows", ["-q", golden + "_padding_queries"], env).returncode == FAILED


def test_quoted_values_carry_half_a_unit_of_their_last_digit():
    values, half_units = quoted(["0.905551", "9.9999999833e-05", "12"])
    np.testing.assert_array_equal(values, [0.905551, 9.9999999833e-05, 12.0])
    assert_within(half_units, [5e-7, 5e-16, 0.5], rtol=1e-15)  # 0.5·10^-k in float64: one rounding

    float32, float64 = (type("Adapter", (), {"INFO": {"dtype": d}}) for d in ("float32", "float64"))

    # 0.9055514861 (4.86e-7 off the quoted digits) is within the quoting for both dtypes
    assert_quoted(np.array([0.9055514861]), ["0.905551"], float64)
    assert_quoted(np.array([0.9055514861 + 5e-7]), ["0.905551"], float32)  # plus float32 rounding
    with pytest.raises(AssertionError, match="outside the quoting"):
        assert_quoted(np.array([0.9055514861 + 5e-7]), ["0.905551"], float64)


def test_softmax_cases_a_float32_input_cannot_say_are_skipped(tmp_path):
    env = _adapter(tmp_path, "f32_softmax", """
        import numpy as np
        from refpos.testing import adapter as ref

        INFO = {"name": "float32 softmax", "dtype": "float32"}

        def softmax(logits, mask=None, fully_masked="zeros"):
            return ref.softmax(np.asarray(logits, dtype=np.float32).astype(np.float64), mask, fully_masked)
    """)
    test = "spec_tests/test_attention.py::test_softmax_is_stable_for_huge_logits"
    result = run_suite("f32_softmax", ["-q", "-rs", test], env)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "2 passed, 1 skipped" in out, out[-3000:]
    assert "float32 cannot represent 1e+15 − 1 apart from 1e+15" in out


def test_the_adapter_tutorial_quotes_the_example_adapter():
    """Every python block of docs/write-an-adapter.md is copied from spec_tests/examples/numpy_adapter.py."""
    from support import ROOT

    if not (ROOT / "docs").is_dir():
        pytest.skip("the documentation is the repository's: an installed suite (refpos suite) carries no docs/")
    page = (ROOT / "docs" / "write-an-adapter.md").read_text(encoding="utf-8")
    example = (ROOT / "spec_tests" / "examples" / "numpy_adapter.py").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in page.split("```python\n")[1:]]
    assert len(blocks) >= 5
    for block in blocks:
        assert block in example, f"docs/write-an-adapter.md quotes code not in the example adapter:\n{block}"


def test_the_matrix_page_is_rendered_from_stored_results(tmp_path, monkeypatch):
    """A stored run renders as passes / diverges (linked to its evidence) / not provided."""
    import json

    from spec_tests import matrix

    result = {"adapter": "spec_tests.adapters.fake", "info": {"name": "fake 1.0", "dtype": "float32"},
              "date": "2026-01-01 00:00 UTC", "wall_s": 1, "exit_code": 0, "command": "REFPOS_IMPL=... pytest",
              "counts": {"passed": 1, "xfailed": 1, "skipped": 1},
              "tests": {"spec_tests/test_alibi.py::test_slopes_spec_values[n=1]": ["passed", ""],
                        "spec_tests/test_t5.py::test_causal_bucket_table": ["xfailed", "reason: fake buckets "
                                                                         "(spec_tests/adapters/torchtune.xfails.txt:3)"],
                        "spec_tests/test_attention.py::test_gqa_head_mapping_is_floor_division": ["skipped", "no"]}}
    (tmp_path / "fake.json").write_text(json.dumps(result), encoding="utf-8")
    monkeypatch.setattr(matrix, "RESULTS", tmp_path)
    page = matrix.render()
    row = next(line for line in page.splitlines() if line.startswith("| `fake 1.0`"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    columns = list(matrix.COLUMNS)
    assert cells[2 + columns.index("ALiBi")] == "passes (1)"
    assert cells[2 + columns.index("T5")] == "[diverges (1/1)](#divergences-fake)"
    assert cells[2 + columns.index("attention core")] == "not provided"
    assert ("`spec_tests/test_t5.py::test_causal_bucket_table` — known divergence: fake buckets (evidence: "
            "`spec_tests/adapters/torchtune.xfails.txt:3`)") in page


def test_matrix_rerun_replaces_only_the_failed_outcomes(tmp_path, monkeypatch):
    """``matrix rerun`` runs the stored failures again and merges their new outcomes; a test id the rerun
    does not report is an error, not a silent keep."""
    import json

    from spec_tests import matrix

    stored = {"adapter": "spec_tests.adapters.fake", "info": {"name": "fake 1.0"}, "date": "2026-01-01 00:00 UTC",
              "wall_s": 1, "exit_code": 1, "command": "REFPOS_IMPL=... pytest",
              "counts": {"failed": 1, "passed": 1},
              "tests": {"spec_tests/test_t5.py::test_a[x=1]": ["failed", "boom"],
                        "spec_tests/test_t5.py::test_b": ["passed", ""]}}
    (tmp_path / "fake.json").write_text(json.dumps(stored), encoding="utf-8")
    monkeypatch.setattr(matrix, "RESULTS", tmp_path)
    targets = []

    def fake_pytest(impl, name, ids, extra):
        targets.append(list(ids))
        return {"spec_tests/test_t5.py::test_a[x=1]": ["xfailed", "reason: known"]}, {}, "CMD", 2.0, 0

    monkeypatch.setattr(matrix, "_pytest", fake_pytest)
    result = matrix.rerun("fake", [])
    assert targets == [["spec_tests/test_t5.py::test_a[x=1]"]]
    assert result["tests"] == {"spec_tests/test_t5.py::test_a[x=1]": ["xfailed", "reason: known"],
                               "spec_tests/test_t5.py::test_b": ["passed", ""]}
    assert result["counts"] == {"xfailed": 1, "passed": 1}
    assert result["reruns"][0]["tests"] == 1 and result["command"] == "REFPOS_IMPL=... pytest"
    assert json.loads((tmp_path / "fake.json").read_text(encoding="utf-8"))["counts"] == {"xfailed": 1, "passed": 1}
    monkeypatch.setattr(matrix, "_pytest", lambda impl, name, ids, extra: ({}, {}, "CMD", 1.0, 0))
    stored["tests"]["spec_tests/test_t5.py::test_b"] = ["failed", "again"]
    (tmp_path / "fake.json").write_text(json.dumps(stored), encoding="utf-8")
    with pytest.raises(SystemExit, match="did not report"):
        matrix.rerun("fake", [])


def test_the_matrix_renders_where_only_tox_is_installed():
    """``tox -e peers`` renders the page in an environment with tox alone: the matrix module imports only
    the standard library (the golden manifest is read as JSON)."""
    import ast
    import sys
    from pathlib import Path

    from spec_tests import matrix

    tree = ast.parse(Path(matrix.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {"." * node.level + (node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}  # a relative import counts as outside the standard library
    outside = sorted(imported - set(sys.stdlib_module_names) - {"__future__"})
    assert not outside, f"spec_tests/matrix.py imports {outside}: render would fail in tox -e peers"


def test_the_golden_cases_count_in_the_column_of_their_rule():
    """A golden RoPE case belongs to the column of the rule its model resolves to (the manifest's
    parameters.rope), a layout case to layouts, another family's case to its family's column."""
    from spec_tests import matrix

    def column(case_id):
        return matrix._column_of(f"spec_tests/test_golden.py::test_golden_case[{case_id}]")

    assert column("rope/meta-llama--Llama-3.1-8B/apply") == ["llama3"]
    assert column("rope/openai--gpt-oss-20b/cos-sin") == ["YaRN"]
    assert column("rope/microsoft--Phi-3.5-mini-instruct/frequencies") == ["LongRoPE"]
    assert "layouts" in column("rope-layout/deinterleaved")
    assert "alibi/slopes-n1" in {c["id"] for c in matrix.json.loads(matrix.MANIFEST.read_text())["cases"]}
    assert column("alibi/slopes-n1") == ["ALiBi"]  # another family's case: the column of its family
    deberta = [c["id"] for c in matrix.json.loads(matrix.MANIFEST.read_text())["cases"] if c["family"] == "deberta"]
    assert deberta and all(column(case_id) == ["DeBERTa"] for case_id in deberta)
    assert column("shaw/attention-k2") == []  # a family without a column


def test_the_example_adapter_knows_the_contract_keys():
    """The example adapter (NumPy only) keeps its own list of the contract's rope keys: it must be the
    contract's list (spec_tests/adapters/_contract.py), or the tutorial teaches a stale contract."""
    from spec_tests.adapters._contract import ROPE_KEYS
    from spec_tests.examples.numpy_adapter import KNOWN_ROPE_KEYS

    assert KNOWN_ROPE_KEYS == set(ROPE_KEYS), (f"missing {sorted(set(ROPE_KEYS) - KNOWN_ROPE_KEYS)}, "
                                               f"extra {sorted(KNOWN_ROPE_KEYS - set(ROPE_KEYS))}")



# ------------------------------------------------------------------------------------ fixed shapes
RECORDING = """
    import json
    import os
    from refpos.testing import adapter as ref

    INFO = {"name": "recording", "dtype": "float64", "rope_layout": "half"}

    def _record(name, *arrays):
        with open(os.environ["SHAPES_FILE"], "a", encoding="utf-8") as f:
            f.write(json.dumps([os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0], name,
                                [list(getattr(a, "shape", ())) for a in arrays]]) + "\\n")

    def apply_rope(x, positions, rope, seq_len=None):
        _record("apply_rope", x, positions)
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)

    def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None):
        _record("attention", q, k, v)
        return ref.attention(q, k, v, bias=bias, mask=mask, scale=scale, causal=causal, softcap=softcap)

    def local_attention(q, k, v, window=None, attention_chunk=None, scale=None, softcap=None):
        _record("local_attention", q, k, v)
        return ref.local_attention(q, k, v, window=window, attention_chunk=attention_chunk, scale=scale,
                                   softcap=softcap)
"""
SHAPED = ["spec_tests/test_attention.py", "spec_tests/test_local_attention.py", "spec_tests/test_rope_properties.py"]


def _shapes_per_test(tmp_path, shapes: str) -> dict[str, set]:
    import json

    calls = tmp_path / f"shapes-{shapes}.jsonl"
    env = {**_adapter(tmp_path, "recording_adapter", RECORDING), "SHAPES_FILE": str(calls), "REFPOS_SHAPES": shapes}
    result = run_suite("recording_adapter", ["-q", "-p", "no:xdist", *SHAPED], env)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert f"'REFPOS_SHAPES': '{shapes}'" in result.stdout  # the header shows the setting
    seen: dict[str, set] = {}
    for line in calls.read_text(encoding="utf-8").splitlines():
        test, name, arrays = json.loads(line)
        seen.setdefault(f"{test} {name}", set()).add(json.dumps(arrays))
    return seen


def test_fixed_shapes_draw_one_shape_per_call_site(tmp_path):
    """REFPOS_SHAPES=fixed (a JIT library compiles per input shape): every property test of the attention and
    RoPE files calls each function with at most 2 distinct shapes (a test that compares a prefix or a cached step
    with the whole makes two), where the drawn sizes give many; the values still vary."""
    drawn, fixed = _shapes_per_test(tmp_path, "drawn"), _shapes_per_test(tmp_path, "fixed")
    assert set(fixed) == set(drawn), "the same tests call the same functions"
    print(f"distinct (test, function, shape): drawn {sum(map(len, drawn.values()))}, fixed "
          f"{sum(map(len, fixed.values()))} over {len(fixed)} call sites")
    widest = max(len(shapes) for shapes in fixed.values())
    assert widest <= 2, {site: shapes for site, shapes in fixed.items() if len(shapes) > 2}
    assert sum(map(len, drawn.values())) > 3 * sum(map(len, fixed.values())), (drawn, fixed)


# ------------------------------------------------------------------------------------ the guides' adapters
#: the example adapters the docs show, with the folder that holds each (None: importable as it is)
EXAMPLES = {"my_rope": "docs/examples", "spec_tests.examples.numpy_adapter": None}


@pytest.mark.parametrize("module", list(EXAMPLES))
def test_the_guides_example_adapters_pass_the_whole_suite(module):
    """docs/validate.md's my_rope and docs/write-an-adapter.md's numpy_adapter: every test passes or is skipped
    for what the adapter does not provide or declares it leaves out (INFO), none fails."""
    from support import ROOT

    folder = EXAMPLES[module]
    if not (ROOT / "docs").is_dir():  # the wheel's test (refpos/tests/test_wheel.py) runs the pages' commands
        pytest.skip("docs/ is the repository's: from a wheel, test_wheel.py runs the guides' suite commands")
    env = {"PYTHONPATH": str(ROOT / folder)} if folder else {}
    result = run_suite(module, ["-q", "spec_tests", "--ignore-glob=spec_tests/test_meta*.py"], env)
    tail = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert " passed" in tail and "failed" not in tail and "error" not in tail, tail
