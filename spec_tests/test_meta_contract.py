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
        import refpos
        if positions.dtype.kind == "f":
            raise TypeError("positions must be integers")
        cfg = refpos.rope_config_from_params(rope)
        inv, a = refpos.rope_frequencies(cfg, seq_len=seq_len)
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


def test_the_readme_table_of_declarations_is_the_registry():
    """spec_tests/README.md's "What an adapter declares" is rendered from refpos/testing/declarations.py."""
    from support import ROOT

    from refpos.testing import declarations

    readme = (ROOT / "spec_tests" / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- declarations:begin -->\n", 1)[1].split("\n<!-- declarations:end -->", 1)[0]
    assert table == declarations.markdown_table(), "re-render the table from refpos/testing/declarations.py"
