"""Meta tests of the tolerance model (docs/conventions.md#tolerances): correct code in every form the model
admits passes, the declared forms are the bound in force and the header says so, and a mistake of the
catalogue still fails in the lowest precision.

Each run is a subprocess on a small adapter written into ``tmp_path``, as in ``test_meta_reporting.py``;
they judge the suite, so they run only when the implementation under test is ``refpos.testing.adapter``.
"""

from __future__ import annotations

import textwrap
import types

import numpy as np
import pytest
from support import IMPL_NAME, assert_close
from test_meta import FAILED, run_suite

from refpos.golden.exact.emulations import angles_float32

pytestmark = pytest.mark.skipif(
    IMPL_NAME != "refpos.testing.adapter", reason="meta tests judge the suite; they run on refpos.testing.adapter only"
)

FLOAT16 = """
    import numpy as np
    from refpos.testing import adapter as ref

    INFO = {{"name": "float16 rotation", "dtype": "float16"{forms}}}

    def _f16(a):
        return np.asarray(a, dtype=np.float16).astype(np.float64)

    def apply_rope(x, positions, rope, seq_len=None):
        {body}

    def rope_cos_sin(positions, rope, seq_len=None):
        cos, sin = ref.rope_cos_sin(positions, rope, seq_len=seq_len)
        return _f16(cos), _f16(sin)

    rope_frequencies = ref.rope_frequencies
"""
#: the exact rotation of the float16-stored input, rounded to float16 (the fused form)
CORRECT = "return _f16(ref.apply_rope(_f16(x), positions, rope, seq_len=seq_len))"
#: the same with ω rounded to float16 first (the catalogue's bf16_angles)
ROUNDED_ANGLES = """import refpos
        cfg = refpos.rope_config_from_params(rope)
        length = int(np.max(positions)) + 1 if seq_len is None else seq_len
        inv, a = refpos.rope_frequencies(cfg, seq_len=length)
        from refpos.rope.core import apply_rope as core_apply
        return _f16(core_apply(_f16(x), positions, cfg, frequencies=(_f16(inv), a)))"""


def _run(tmp_path, name: str, forms: str, body: str, args: list[str]):
    source = FLOAT16.format(forms=forms, body=body)
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    result = run_suite(name, ["-q", *args], {"PYTHONPATH": str(tmp_path)})
    return result, result.stdout + result.stderr


def test_a_correct_float16_rotation_passes_the_goldens_and_the_mrope_property(tmp_path):
    """The exact rotation of the float16-stored input, rounded to float16: the golden apply_rope cases (54 of
    them failed under a rule in ulps of the output entry, up to 32× their tolerance) and the M-RoPE axis
    property (a slow pair moved by a few positions rounds to the same float16 value) pass."""
    result, out = _run(tmp_path, "f16_fused", "", CORRECT,
                       ["-n", "2", "spec_tests/test_golden.py", "-k", "apply",
                        "spec_tests/test_mrope.py::test_each_axis_moves_exactly_its_pairs"])
    assert result.returncode == 0 and " failed" not in out, out[-3000:]


def test_rounded_angles_still_fail_in_float16(tmp_path):
    """ω rounded to float16 (bf16_angles of the catalogue) fails the goldens even under every float16 form."""
    result, out = _run(tmp_path, "f16_rounded", "", ROUNDED_ANGLES,
                       ["spec_tests/test_golden.py", "-k", "Llama-3.1-8B/apply or Qwen2-7B-Instruct/apply"])
    assert result.returncode == FAILED, out[-3000:]


def test_the_header_prints_the_declared_forms(tmp_path):
    result, out = _run(tmp_path, "f16_declared", ', "forms": ["running_product", "fused_float32"]', CORRECT,
                       ["spec_tests/test_golden.py", "-k", "Llama-2-7b-hf/apply"])
    assert result.returncode == 0, out[-3000:]
    assert "declared forms running_product, fused_float32" in out
    assert "running_product (angles: |δφ| ≤ |p|·2^-24·(3 + 3·j + 1·ln(1/ω_j))·ω_j)" in out


def test_a_form_the_dtype_does_not_admit_is_a_usage_error(tmp_path):
    result, out = _run(tmp_path, "f16_wrong_form", ', "forms": ["float32_rotation"]', CORRECT,
                       ["spec_tests/test_golden.py", "-k", "Llama-2-7b-hf/apply"])
    assert result.returncode not in (0, FAILED) and "not a form of float16" in out, out[-3000:]


def test_a_running_product_float32_path_is_within_its_declared_tolerance():
    """ggml's angles (θ_j = p·s^j by a running float32 product) at head size 512, θ = 1e4, positions to 2²⁰:
    6.4·p·max ω·2⁻²⁴ from float64, 2.1× the one constant c = 3 of the rule the forms replaced; within the
    bound of the declared running_product form (and of every float32 form when none is declared)."""
    positions = np.array([1, 1000, 65537, 2**20])
    d = 512
    inv_freq = 1e4 ** -(np.arange(0, d, 2) / d)
    cos32 = np.cos(angles_float32("running_product", positions, 1e4, d)).astype(np.float64)
    exact = np.cos(positions[:, None] * inv_freq)
    for info in ({"dtype": "float32", "forms": ["running_product"]}, {"dtype": "float32"}):
        assert_close(cos32, exact, types.SimpleNamespace(INFO=info), "phase", positions=positions,
                     inv_freq=inv_freq, what="ggml's cos")
    with pytest.raises(AssertionError, match="phase rule"):  # the pow form alone does not admit it
        assert_close(cos32, exact, types.SimpleNamespace(INFO={"dtype": "float32", "forms": ["pow"]}), "phase",
                     positions=positions, inv_freq=inv_freq, what="ggml's cos")
