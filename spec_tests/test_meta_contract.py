"""Meta tests of the contract's fit to how libraries are built: each one runs the suite on a small adapter
written into ``tmp_path`` that is built the way a real library is (its tables inside a kernel, its tables
given, negative positions with a meaning) and asserts what the suite must report on it.

Each adapter wraps :mod:`refpos.testing.adapter` and changes one thing, as in ``test_meta_reporting.py``.
They judge the suite, so they run only when the implementation under test is ``refpos.testing.adapter``.
"""

from __future__ import annotations

import textwrap

import pytest
from support import IMPL_NAME
from test_meta import FAILED, run_suite

pytestmark = pytest.mark.skipif(
    IMPL_NAME != "refpos.testing.adapter", reason="meta tests judge the suite; they run on refpos.testing.adapter only"
)

CONTRACT = "spec_tests/test_rope_contract.py"
SCALING = "spec_tests/test_rope_scaling.py"
TABLES = "spec_tests/test_rope_tables.py"


def _run(tmp_path, name: str, body: str, args: list[str]):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")
    result = run_suite(name, ["-q", "-rs", *args], {"PYTHONPATH": str(tmp_path)})
    return result, result.stdout + result.stderr


APPLY_ONLY = """
    import numpy as np
    from refpos.testing import adapter as ref

    INFO = {{"name": "apply_rope only (tables inside a kernel)", "dtype": "float64"{info}}}

    def apply_rope(x, positions, rope, seq_len=None):
        positions = np.asarray(positions)
{body}
"""


def _apply_only(body: str, info: str = "") -> str:
    return APPLY_ONLY.format(info=info, body=textwrap.indent(textwrap.dedent(body), " " * 8))


def test_negative_positions_through_apply_rope_alone_are_checked(tmp_path):
    """An adapter with apply_rope only (no rope_cos_sin) that reads a negative position from the end of its
    table (onnx's reference evaluator): the bad-positions test runs through apply_rope and fails."""
    body = """
        if positions.dtype.kind == "f":
            raise TypeError("positions must be integers")
        table_rows = 4096
        return ref.apply_rope(x, np.where(positions < 0, positions + table_rows, positions), rope, seq_len=seq_len)
    """
    result, out = _run(tmp_path, "wraps_negative", _apply_only(body),
                       [f"{CONTRACT}::test_bad_positions_are_rejected"])
    assert result.returncode == FAILED and "positions=[0,-1]" in out, out[-3000:]


def test_bad_configs_through_apply_rope_alone_are_checked(tmp_path):
    """apply_rope only, accepting a layout the contract does not define (it treats "neox" as half): the
    bad-config test runs through apply_rope and fails on layout=neox."""
    body = """
        if rope.get("layout") == "neox":
            rope = {**rope, "layout": "half"}
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)
    """
    result, out = _run(tmp_path, "neox_half", _apply_only(body), [f"{CONTRACT}::test_bad_rope_configs_are_rejected"])
    assert result.returncode == FAILED and "layout=neox" in out and "1 failed, 9 passed" in out, out[-3000:]


def test_the_contract_helper_calls_an_undefined_layout_bad_input(tmp_path):
    """An adapter that settles its rope dict with ``_contract.kind_and_layout`` (the tutorial's advice) gets a
    ValueError for ``layout="neox"``, so the bad-config test runs (it is not skipped as unsupported)."""
    body = """
        from spec_tests.adapters._contract import kind_and_layout, rope_settings
        kind_and_layout(rope_settings(rope, "demo"), "demo", ("half",))
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)
    """
    result, out = _run(tmp_path, "helper_layouts", _apply_only(body),
                       [f"{CONTRACT}::test_bad_rope_configs_are_rejected[layout=neox-ValueError]"])
    assert result.returncode == 0 and "1 passed" in out and "skipped" not in out, out[-3000:]


def test_a_declared_backward_rotation_passes(tmp_path):
    """llama.cpp's K-shift: a negative position rotates backwards. Declared, it passes the bad-positions tests
    (the negative case is skipped with the declaration as reason) and the backward-rotation property."""
    body = """
        from refpos.rope.core import apply_rope as core_apply
        from refpos.backend import to_numpy
        import refpos
        if positions.dtype.kind == "f":
            raise TypeError("positions must be integers")
        cfg = refpos.rope_config_from_params(rope)
        inv, a = refpos.rope_frequencies(cfg, seq_len=seq_len)
        inv = to_numpy(inv)  # a NumPy kernel, whatever refpos's own backend is
        sign = np.where(positions < 0, -1, 1)
        forward = core_apply(np.asarray(x, float), np.abs(positions), cfg, frequencies=(inv * 1.0, a))
        backward = core_apply(np.asarray(x, float), np.abs(positions), cfg, frequencies=(-inv, a))
        return np.where((sign < 0)[..., None], backward, forward)
    """
    info = ', "negative_positions": "rotate"'
    result, out = _run(tmp_path, "k_shift", _apply_only(body, info),
                       [f"{CONTRACT}::test_bad_positions_are_rejected",
                        f"{CONTRACT}::test_negative_positions_rotate_backwards"])
    assert result.returncode == 0 and "3 passed, 1 skipped" in out, out[-3000:]
    assert "negative_positions rotate" in out  # the header says what was declared


def test_a_declared_backward_rotation_that_wraps_fails(tmp_path):
    """The same declaration on an adapter that reads −δ from the end of a table fails the property."""
    body = """
        if positions.dtype.kind == "f":
            raise TypeError("positions must be integers")
        return ref.apply_rope(x, np.where(positions < 0, positions + 200000, positions), rope, seq_len=seq_len)
    """
    info = ', "negative_positions": "rotate"'
    result, out = _run(tmp_path, "k_shift_wrong", _apply_only(body, info),
                       [f"{CONTRACT}::test_negative_positions_rotate_backwards"])
    assert result.returncode == FAILED, out[-3000:]


def test_an_off_by_one_longrope_switch_through_apply_rope_alone_is_caught(tmp_path):
    """apply_rope only, switching to the long factors at seq_len >= L0 (one token early): the LongRoPE
    boundary is tested through apply_rope, so the mistake fails (it used to skip the whole test)."""
    body = """
        if rope.get("rope_type") == "longrope":
            length = int(positions.max()) + 1 if seq_len is None else seq_len
            seq_len = length + 1  # the switch one token early: L0 already reads the long factors
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)
    """
    result, out = _run(tmp_path, "longrope_early", _apply_only(body),
                       [f"{SCALING}::test_longrope_switches_after_the_original_length_through_apply_rope"])
    assert result.returncode == FAILED, out[-3000:]


def test_linear_scaling_through_apply_rope_alone_is_checked(tmp_path):
    """apply_rope only, with linear scaling ignored: the linear test needs the frequencies only for its
    tolerance (the reference's), so it runs and fails."""
    body = """
        if rope.get("rope_type") == "linear":
            rope = {k: v for k, v in rope.items() if k != "factor"} | {"rope_type": "default"}
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)
    """
    result, out = _run(tmp_path, "linear_ignored", _apply_only(body),
                       [f"{SCALING}::test_linear_equals_positions_divided_by_the_factor"])
    assert result.returncode == FAILED, out[-3000:]


TABLES_KERNEL = """
    import numpy as np
    from refpos.testing import adapter as ref

    INFO = {{"name": "a kernel that takes cos/sin caches", "dtype": "float64", "rope_tables": "input"}}

    def apply_rope_tables(x, positions, cos, sin, rope):
        positions = np.asarray(positions)
        if positions.dtype.kind == "f":
            raise TypeError("positions must be integers")
        {change}
        return ref.apply_rope_tables(x, positions, cos, sin, rope)
{extra}
"""


def test_a_tables_kernel_is_tested_on_the_rotation(tmp_path):
    result, out = _run(tmp_path, "tables_kernel", TABLES_KERNEL.format(change="pass", extra=""), [TABLES])
    assert result.returncode == 0 and " passed" in out and " failed" not in out, out[-3000:]
    assert "rope_tables input" in out


def test_a_tables_kernel_that_clips_to_the_last_row_fails(tmp_path):
    """onnx's reference evaluator reads a position past the cache as its last row: caught."""
    change = "positions = np.clip(positions, 0, cos.shape[0] - 1)"
    result, out = _run(tmp_path, "tables_clip", TABLES_KERNEL.format(change=change, extra=""),
                       [f"{TABLES}::test_given_tables_refuse_positions_outside_the_rows"])
    assert result.returncode == FAILED and "one-past-the-last-row" in out, out[-3000:]


def test_a_tables_kernel_fed_the_references_tables_is_refused(tmp_path):
    """A kernel that takes its tables, with an apply_rope that feeds it refpos's tables, would be credited with
    every scaling rule: declaring ``rope_tables = "input"`` makes that a usage error before any test runs."""
    extra = """
    def apply_rope(x, positions, rope, seq_len=None):
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)  # refpos's tables, not the kernel's
"""
    result, out = _run(tmp_path, "tables_fed", TABLES_KERNEL.format(change="pass", extra=extra), [TABLES])
    assert result.returncode not in (0, FAILED) and "provides ['apply_rope']" in out, out[-3000:]


def test_the_matrix_credits_a_tables_kernel_with_no_rule():
    from spec_tests import matrix

    tests = {"spec_tests/test_rope_tables.py::test_given_tables_ignore_the_scaling_rule": ["passed", ""],
             "spec_tests/test_golden.py::test_golden_case[rope/openai--gpt-oss-20b/cos-sin]": ["passed", ""]}
    info = {"name": "kernel", "rope_tables": "input"}
    assert matrix._cell("kernel", "rotation (tables given)", tests, info) == "passes (1)"
    assert matrix._cell("kernel", "YaRN", tests, info) == matrix.TABLES_GIVEN
    assert matrix._cell("kernel", "YaRN", tests, {"name": "builds its tables"}) == "passes (1)"


@pytest.mark.parametrize("page", ["spec_tests/README.md", "docs/write-an-adapter.md"])
def test_the_table_of_declarations_is_the_registry(page):
    """spec_tests/README.md's "What an adapter declares" and the tutorial's table are rendered from
    refpos/testing/declarations.py: every declaration, with what it does."""
    from support import ROOT

    from refpos.testing import declarations

    if not (ROOT / page).is_file():
        pytest.skip(f"{page} is the repository's: an installed suite (refpos suite) carries no docs/")
    text = (ROOT / page).read_text(encoding="utf-8")
    table = text.split("<!-- declarations:begin -->\n", 1)[1].split("\n<!-- declarations:end -->", 1)[0]
    assert table == declarations.markdown_table(), "re-render the table from refpos/testing/declarations.py"



def test_the_table_of_bad_inputs_is_the_registry():
    """docs/write-an-adapter.md lists the bad inputs an adapter must refuse as refpos/testing/bad_inputs.py
    renders them: the records test_rope_contract.py runs, each with its error and why it is bad."""
    from support import ROOT

    from refpos.testing import bad_inputs

    page = ROOT / "docs" / "write-an-adapter.md"
    if not page.is_file():
        pytest.skip("docs/ is the repository's: an installed suite (refpos suite) carries no docs/")
    text = page.read_text(encoding="utf-8")
    table = text.split("<!-- bad-inputs:begin -->\n", 1)[1].split("\n<!-- bad-inputs:end -->", 1)[0]
    assert table == bad_inputs.markdown_table(), "re-render the table from refpos/testing/bad_inputs.py"
    rows = table.splitlines()[2:]
    assert len(rows) == len(bad_inputs.BAD_ROPE_CONFIGS) + len(bad_inputs.BAD_POSITIONS)
    assert all("`ValueError`" in row or "`TypeError`" in row for row in rows)

# ------------------------------------------------------------------------------------ reporting
COUNTING = """
    import os
    from pathlib import Path
    from refpos.testing import adapter as ref

    INFO = {{"name": "half only", "dtype": "float64", "rope_layouts": ["half"]}}
    CALLS = Path(os.environ["CALLS_FILE"])

    def apply_rope(x, positions, rope, seq_len=None):
        with CALLS.open("a") as f:
            f.write(rope.get("layout", "half") + "\\n")
        {body}
"""


def test_a_layout_test_needing_an_undeclared_layout_skips_before_calling(tmp_path):
    """A half-only adapter (declared): the deinterleaved tests say what they need and call nothing (they used
    to draw hundreds of examples, each calling the library, before "none supported")."""
    calls = tmp_path / "calls.txt"
    body = """if rope.get("layout", "half") != "half":
            raise NotImplementedError("half only")
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)"""
    (tmp_path / "half_only.py").write_text(textwrap.dedent(COUNTING.format(body=body)), encoding="utf-8")
    tests = ["spec_tests/test_rope_properties.py::test_deinterleaved_is_interleaved_written_half_split",
             "spec_tests/test_rope_properties.py::test_deinterleaved_and_interleaved_give_the_same_logits",
             "spec_tests/test_rope_properties.py::test_half_and_interleaved_are_conjugate_by_the_fixed_permutation"]
    result = run_suite("half_only", ["-q", "-rs", *tests], {"PYTHONPATH": str(tmp_path), "CALLS_FILE": str(calls)})
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "3 skipped" in out and "needs INFO['rope_layouts']" in out, out[-3000:]
    assert not calls.exists() or not calls.read_text(), f"the library was called: {calls.read_text()[:200]}"


def test_the_partial_coverage_report_survives_xdist(tmp_path):
    """A narrow adapter under ``-n 2`` (the mode the tutorial recommends): the summary still lists the property
    tests that ran on part of their drawn examples."""
    body = """if rope.get("rope_type", "default") != "default":
            raise NotImplementedError("only default RoPE")
        return ref.apply_rope(x, positions, rope, seq_len=seq_len)"""
    source = COUNTING.format(body=body).replace(', "rope_layouts": ["half"]', "")
    (tmp_path / "narrow_x.py").write_text(textwrap.dedent(source), encoding="utf-8")
    test = "spec_tests/test_rope_properties.py::test_pass_through_channels_are_unchanged"
    result = run_suite("narrow_x", ["-q", "-n", "2", test],
                       {"PYTHONPATH": str(tmp_path), "CALLS_FILE": str(tmp_path / "c.txt")})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "property tests run on the supported part of the drawn examples" in out and "only default RoPE" in out


def test_a_nan_output_is_reported_as_nan(tmp_path):
    body = """import numpy as np
        y = np.array(ref.apply_rope(x, positions, rope, seq_len=seq_len))
        y[..., 0, 0] = np.nan
        return y"""
    source = COUNTING.format(body=body).replace(', "rope_layouts": ["half"]', "")
    (tmp_path / "nan_out.py").write_text(textwrap.dedent(source), encoding="utf-8")
    test = "spec_tests/test_golden.py::test_golden_case[rope/meta-llama--Llama-2-7b-hf/apply]"
    result = run_suite("nan_out", ["-q", test], {"PYTHONPATH": str(tmp_path), "CALLS_FILE": str(tmp_path / "c.txt")})
    out = result.stdout + result.stderr
    assert result.returncode == FAILED, out[-3000:]
    assert "1 NaN entries where the reference is a number (the first at index (0, 0))" in out, out[-3000:]
    assert "inf×" not in out and "= inf" not in out, out[-3000:]


def test_grouped_query_attention_needs_a_grouped_example(tmp_path):
    """An attention that refuses every call with H > H_kv: the GQA property fails (it used to pass on its
    H = H_kv examples alone)."""
    adapter = """
        from refpos.testing import adapter as ref

        INFO = {"name": "no GQA", "dtype": "float64"}

        def attention(q, k, v, bias=None, mask=None, scale=None, causal=False, softcap=None):
            if q.shape[1] != k.shape[1]:
                raise NotImplementedError("multi-head attention only")
            return ref.attention(q, k, v, bias, mask, scale, causal, softcap)
    """
    (tmp_path / "no_gqa.py").write_text(textwrap.dedent(adapter), encoding="utf-8")
    test = "spec_tests/test_attention.py::test_grouped_query_attention_equals_mha_with_repeated_kv"
    result = run_suite("no_gqa", ["-q", test], {"PYTHONPATH": str(tmp_path)})
    out = result.stdout + result.stderr
    assert result.returncode == FAILED and "no example with H > H_kv ran" in out, out[-3000:]


def test_a_verbatim_copy_of_hfs_t5_buckets_equals_hf(tmp_path):
    """transformers' own bucket formula, copied without the argument checks transformers lacks: every "equal
    to HF" case passes; only the bad-input test asks for the ValueError."""
    pytest.importorskip("transformers")
    adapter = """
        import math
        import numpy as np

        INFO = {"name": "HF's T5 buckets, copied", "dtype": "float64"}

        def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
            rel = np.asarray(relative_position, dtype=np.int64)
            out = np.zeros_like(rel)
            if bidirectional:
                num_buckets //= 2
                out += (rel > 0).astype(np.int64) * num_buckets
                rel = np.abs(rel)
            else:
                rel = -np.minimum(rel, 0)
            max_exact = num_buckets // 2
            small = rel < max_exact
            with np.errstate(divide="ignore", invalid="ignore"):  # log(0) for the small ones, never picked
                large = max_exact + (np.log(rel.astype(np.float32) / max_exact) / math.log(max_distance / max_exact)
                                     * (num_buckets - max_exact)).astype(np.int64)
            large = np.minimum(large, num_buckets - 1)
            return out + np.where(small, rel, large)
    """
    (tmp_path / "hf_t5_copy.py").write_text(textwrap.dedent(adapter), encoding="utf-8")
    result = run_suite("hf_t5_copy", ["-q", "spec_tests/test_anchors_encodings.py", "-k", "t5_buckets_equal_hf"],
                       {"PYTHONPATH": str(tmp_path)})
    out = result.stdout + result.stderr
    assert result.returncode == 0 and " failed" not in out, out[-3000:]


INTERLEAVED_ONLY = """
    from refpos.testing import adapter as ref

    INFO = {{"name": "interleaved only (Meta's reference code)", "dtype": "float64", "rope_layouts": ["interleaved"]}}

    def apply_rope(x, positions, rope, seq_len=None):
        if rope.get("layout", "half") != "interleaved":
            raise NotImplementedError("interleaved only")
        return ref.apply_rope(x, positions, {{**rope, "layout": "{computes}"}}, seq_len=seq_len)
"""


def test_goldens_are_replayed_in_a_declared_layout(tmp_path):
    """An interleaved-only library (Meta's llama-models, mistral-inference): the half-layout model goldens
    are replayed through the fixed permutation and pass (they used to be skipped)."""
    (tmp_path / "meta_style.py").write_text(textwrap.dedent(INTERLEAVED_ONLY.format(computes="interleaved")),
                                            encoding="utf-8")
    tests = ["spec_tests/test_golden.py::test_golden_case[rope/meta-llama--Llama-3.1-8B/apply]",
             "spec_tests/test_golden.py::test_golden_case[rope/deepseek-ai--DeepSeek-V3/apply]"]
    result = run_suite("meta_style", ["-q", "-rs", *tests], {"PYTHONPATH": str(tmp_path)})
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "2 passed" in out, out[-3000:]


def test_a_layout_swap_fails_the_replayed_goldens_and_the_layout_cases(tmp_path):
    """The same adapter rotating half pairs while it claims interleaved: the conversion does not hide it (the
    replayed model goldens and the unconverted layout cases fail)."""
    (tmp_path / "swapped.py").write_text(textwrap.dedent(INTERLEAVED_ONLY.format(computes="half")), encoding="utf-8")
    tests = ["spec_tests/test_golden.py::test_golden_case[rope/meta-llama--Llama-3.1-8B/apply]",
             "spec_tests/test_golden.py::test_golden_case[rope-layout/interleaved]"]
    result = run_suite("swapped", ["-q", *tests], {"PYTHONPATH": str(tmp_path)})
    out = result.stdout + result.stderr
    assert result.returncode == FAILED and "2 failed" in out, out[-3000:]


HARD_CODED = """
    from refpos.testing import adapter as ref

    LLAMA3 = {{"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}}
    INFO = {{"name": "Meta's apply_scaling (llama3 constants fixed)", "dtype": "float64",
            "rope_types": ["llama3"]{declared}}}

    def rope_frequencies(rope, seq_len=None):
        if any(rope.get(key) != value for key, value in LLAMA3.items()):
            raise NotImplementedError("apply_scaling fixes factor 8, low 1, high 4, original 8192")
        return ref.rope_frequencies(rope, seq_len=seq_len)
"""


def test_hard_coded_constants_declared_are_drawn(tmp_path):
    """Meta's Llama 3 ``apply_scaling`` fixes its four numbers: declared in INFO["rope_constants"], the llama3
    property tests draw them and discard no example (most were discarded before)."""
    declared = ', "rope_constants": {"llama3": LLAMA3}'
    (tmp_path / "fixed_llama3.py").write_text(textwrap.dedent(HARD_CODED.format(declared=declared)), encoding="utf-8")
    tests = [f"{SCALING}::test_llama3_bands", f"{SCALING}::test_frequencies_are_positive_finite_and_at_most_one"]
    result = run_suite("fixed_llama3", ["-q", "-rs", *tests], {"PYTHONPATH": str(tmp_path)})
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "drawn examples ran" not in out, out[-3000:]
    assert "rope_constants" in out  # the header says what was declared


def test_an_undeclarable_constant_is_a_usage_error(tmp_path):
    declared = ', "rope_constants": {"llama3": {"head_dim": 128}}'
    (tmp_path / "bad_constant.py").write_text(textwrap.dedent(HARD_CODED.format(declared=declared)), encoding="utf-8")
    result = run_suite("bad_constant", ["-q", f"{SCALING}::test_llama3_bands"], {"PYTHONPATH": str(tmp_path)})
    out = result.stdout + result.stderr
    assert result.returncode not in (0, FAILED) and "has ['head_dim']" in out, out[-3000:]


# ------------------------------------------------------------------- vision RoPE, local attention, query scale
LAYERS = """
    import numpy as np
    from refpos.testing import adapter as ref

    INFO = {{"name": "{name}", "dtype": "float64"}}

    {body}
"""
VISION = "spec_tests/test_vision_rope.py"
LOCAL = "spec_tests/test_local_attention.py"


@pytest.mark.parametrize(("name", "body", "target"), [
    pytest.param("llama4_axes_swapped", """
    def apply_vision_rope(x, positions, rope):
        if rope["form"] == "llama4":  # the first quarter of the pairs read h, as Qwen2-VL's, not w
            rope = {**rope, "form": "axial", "sections": [rope["head_dim"] // 4] * 2, "layout": "interleaved"}
        return ref.apply_vision_rope(x, positions, rope)
    """, VISION, id="llama4-axes-swapped"),
    pytest.param("pixtral_as_qwen", """
    def apply_vision_rope(x, positions, rope):
        if rope["form"] == "pixtral":  # the frequencies of a head of D/2 per coordinate, not D's even and odd ones
            rope = {**rope, "form": "qwen2_vl"}
        return ref.apply_vision_rope(x, positions, rope)
    """, VISION, id="pixtral-frequencies-of-qwen2-vl"),
    pytest.param("window_one_wider", """
    def local_attention(q, k, v, window=None, attention_chunk=None, scale=None, softcap=None):
        return ref.local_attention(q, k, v, None if window is None else window + 1, attention_chunk, scale, softcap)
    """, f"{LOCAL}::test_local_attention_equals_softmax_over_the_nearby_keys", id="window-one-key-wider"),
    pytest.param("chunks_from_the_first_query", """
    def local_attention(q, k, v, window=None, attention_chunk=None, scale=None, softcap=None):
        if attention_chunk is None:
            return ref.local_attention(q, k, v, window, None, scale, softcap)
        t_q, t_k = q.shape[-2], k.shape[-2]
        i = np.arange(t_k - t_q, t_k)[:, None] - (t_k - t_q)  # chunks counted from the first query
        j = np.arange(t_k)[None, :] - (t_k - t_q)
        mask = (j <= i) & (np.floor_divide(j, attention_chunk) == np.floor_divide(i, attention_chunk))
        return ref.attention(q, k, v, mask=mask, scale=scale, softcap=softcap)
    """, f"{LOCAL}::test_local_attention_equals_softmax_over_the_nearby_keys", id="chunks-from-the-first-query"),
    pytest.param("temperature_without_plus_one", """
    def query_scale(positions, scale):
        if scale.get("rule") == "llama4_temperature":  # floor(p / f) instead of floor((p + 1) / f)
            p = np.asarray(positions).astype(np.float64)
            return 1.0 + scale["attn_scale"] * np.log1p(np.floor(p / scale["floor_scale"]))
        return ref.query_scale(positions, scale)
    """, f"{LOCAL}::test_query_scale_steps_at_its_boundaries", id="llama4-temperature-one-position-late"),
])
def test_the_layer_tests_catch_a_wrong_implementation(tmp_path, name, body, target):
    source = LAYERS.format(name=name, body=textwrap.indent(textwrap.dedent(body), "    ").strip())
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    result = run_suite(name, ["-q", "-x", target], {"PYTHONPATH": str(tmp_path)})
    assert result.returncode == FAILED, (result.stdout + result.stderr)[-3000:]


def test_a_library_taking_the_length_from_the_positions_can_be_expressed(tmp_path):
    """A LongRoPE kernel picking its factors from the batch's positions, with no seq_len argument: declared,
    the suite drops seq_len where it is the batch's own length and discards the other examples with the reason
    (it used to fail every call with an unexpected seq_len)."""
    adapter = """
        from refpos.testing import adapter as ref

        INFO = {"name": "LongRoPE factors from the batch", "dtype": "float64", "seq_len": "positions"}

        def apply_rope(x, positions, rope):
            return ref.apply_rope(x, positions, rope)  # L = max(positions) + 1, always
    """
    (tmp_path / "length_from_batch.py").write_text(textwrap.dedent(adapter), encoding="utf-8")
    tests = [f"{SCALING}::test_longrope_switches_after_the_original_length_through_apply_rope",
             "spec_tests/test_golden.py::test_golden_case[rope/microsoft--Phi-3.5-mini-instruct/apply]",
             "spec_tests/test_golden.py::test_golden_case[rope-boundary/microsoft--Phi-3.5-mini-instruct/apply-L4097]"]
    result = run_suite("length_from_batch", ["-q", "-rs", *tests], {"PYTHONPATH": str(tmp_path)})
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "2 passed, 1 skipped" in out, out[-3000:]
    assert "takes L from the batch's positions" in out  # the boundary case asks for L = 4097 at positions < 4096


MROPE = """
import numpy as np
from refpos.testing import adapter as ref

INFO = {"name": "NAME", "dtype": "float64", "mrope": DECLARED}


def rope_cos_sin(positions, rope, seq_len=None):
    if FOURTH_READ_AS_T and rope.get("mrope_section") is not None and len(rope["mrope_section"]) == 4:
        s = rope["mrope_section"]  # the fourth row ignored: its pairs read t
        rope = {**rope, "mrope_section": [s[0] + s[3], s[1], s[2]]}
        positions = np.asarray(positions)[:3] if np.ndim(positions) > 1 else positions
    if CALLS:
        open(CALLS, "a").write("call\\n")
    return ref.rope_cos_sin(positions, rope, seq_len=seq_len)
"""


def _mrope_adapter(tmp_path, name: str, declared: str, fourth_read_as_t: bool = False, calls: str = "") -> dict:
    source = (MROPE.replace("NAME", name).replace("DECLARED", declared)
              .replace("FOURTH_READ_AS_T", str(fourth_read_as_t)).replace("CALLS", repr(calls)))
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    return {"PYTHONPATH": str(tmp_path)}


@pytest.mark.parametrize(("fourth_read_as_t", "outcome"), [(False, 0), (True, FAILED)],
                         ids=["four-rows-declared-passes", "fourth-row-read-as-t-fails"])
def test_a_fourth_position_row_is_expressible(tmp_path, fourth_read_as_t, outcome):
    """ggml's rope_multi reads four rows (llama.cpp sets the fourth to 0 for image tokens): declared, the suite
    tests it, and an implementation that reads the fourth row's pairs from t fails."""
    name = "e_read_as_t" if fourth_read_as_t else "ggml_like"
    env = _mrope_adapter(tmp_path, name, '["contiguous", "interleaved", "four_rows"]', fourth_read_as_t)
    tests = ["spec_tests/test_mrope.py::test_a_fourth_row_reads_the_pairs_the_round_robin_leaves",
             "spec_tests/test_mrope.py::test_each_axis_moves_exactly_its_pairs"]
    result = run_suite(name, ["-q", "-rs", *tests], env)
    out = result.stdout + result.stderr
    assert result.returncode == outcome, out[-3000:]
    if outcome == 0:
        assert "2 passed" in out, out[-3000:]


def test_an_adapter_without_mrope_skips_its_tests_before_calling(tmp_path):
    calls = tmp_path / "calls.txt"
    env = _mrope_adapter(tmp_path, "no_mrope", "[]", calls=str(calls))
    result = run_suite("no_mrope", ["-q", "-rs", "spec_tests/test_mrope.py::test_each_axis_moves_exactly_its_pairs"],
                       env)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "1 skipped" in out and "no M-RoPE assignment" in out, out[-3000:]
    assert not calls.exists(), "the library was called"
