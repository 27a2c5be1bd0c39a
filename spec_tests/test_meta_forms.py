"""Meta tests: no false alarm on a correct float32 form, and no pass for a wrong one.

``spec_tests/float32_forms/`` holds plain float32 implementations of every contract function that computes
floating-point values (RoPE of every rule, the attention core, the relative biases, the sinusoids and sin–cos
grids, the vision grids and the convolutional positions), written from the formulas in NumPy float32 arithmetic,
one per form a correct implementation may take: ω and the angles by ``pow`` (transformers), ``exp_log`` (MLX) or
a ``running_product`` (ggml); the softmax max-subtracted or by log-sum-exp. Each runs through the whole suite
(every property test and every golden case) and must pass it with 0 failures; the same implementation with one
intermediate rounded to bfloat16 (ω, the angles, the softmax's logits, the attention's logits, ALiBi's
slope·distance, T5's log-bucket ratio, the 2-D sin–cos angles) must fail it.

The examples per property follow ``REFPOS_FORMS_PROFILE``: ``tox -e meta`` sets ``refpos.portability`` (10 per
test, about 2 minutes on two cores), ``tox -e float32-forms`` ``refpos.thorough`` (1000 per test); without it
the module is skipped (the suite run on the reference, ``refpos suite``, would spend those minutes). They judge
the suite, so they run only when the implementation under test is ``refpos.testing.adapter``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from support import IMPL_NAME, ROOT
from test_meta import FAILED, run_suite

PROFILE = os.environ.get("REFPOS_FORMS_PROFILE", "")
pytestmark = [
    pytest.mark.skipif(IMPL_NAME != "refpos.testing.adapter",
                       reason="meta tests judge the suite; they run on refpos.testing.adapter only"),
    pytest.mark.skipif(not PROFILE, reason="the float32 forms run with REFPOS_FORMS_PROFILE set (tox -e meta, "
                                           "tox -e float32-forms)"),
]

#: (angle form, softmax form): every form of each kind at least once
FORMS = [("pow", "max"), ("exp_log", "logsumexp"), ("running_product", "max")]
#: the test files that must catch each deliberate mistake (spec_tests/float32_forms/, ``wrong``)
CATCHES = {
    "frequencies": ["spec_tests/test_rope_scaling.py", "spec_tests/test_golden.py"],
    "angles": ["spec_tests/test_rope_properties.py", "spec_tests/test_sinusoidal.py"],
    "softmax": ["spec_tests/test_attention.py"],
    "attention": ["spec_tests/test_attention.py"],
    "alibi": ["spec_tests/test_alibi.py"],
    "t5": ["spec_tests/test_t5.py"],
    "sincos2d": ["spec_tests/test_sincos2d.py"],
}


def _adapter(tmp_path, angles: str, softmax: str, wrong: str | None = None) -> tuple[str, dict[str, str]]:
    name = f"float32_{angles}_{softmax}" + (f"_wrong_{wrong}" if wrong else "")
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""
        from spec_tests.float32_forms import *  # noqa: F403
        from spec_tests.float32_forms import configure

        configure({angles!r}, {softmax!r}, wrong={wrong!r})
    """), encoding="utf-8")
    return name, {"PYTHONPATH": str(tmp_path)}


@pytest.mark.parametrize(("angles", "softmax"), FORMS, ids=[f"{a}-{s}" for a, s in FORMS])
def test_a_correct_float32_form_passes_the_whole_suite(tmp_path, angles, softmax):
    name, extra = _adapter(tmp_path, angles, softmax)
    env = {k: v for k, v in os.environ.items() if k not in ("REFPOS_XFAILS_FILE", "REFPOS_SKIPS_FILE")}
    env.update(REFPOS_IMPL=name, REFPOS_HYPOTHESIS_PROFILE=PROFILE,
               PYTHONPATH=os.pathsep.join(filter(None, [extra["PYTHONPATH"], env.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:randomly",
               "spec_tests", "--ignore-glob=spec_tests/test_meta*.py", "-o", "addopts="]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    tail = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-2000:]
    print(f"{name} ({PROFILE}): {tail}")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in tail and "failed" not in tail and "error" not in tail, tail
    assert f"hypothesis profile {PROFILE}" in result.stdout


@pytest.mark.parametrize("wrong", list(CATCHES))
@pytest.mark.parametrize(("angles", "softmax"), FORMS, ids=[f"{a}-{s}" for a, s in FORMS])
def test_the_same_form_with_a_bfloat16_step_fails(tmp_path, angles, softmax, wrong):
    name, env = _adapter(tmp_path, angles, softmax, wrong)
    result = run_suite(name, ["-q", "-x", *CATCHES[wrong]], env)
    out = result.stdout + result.stderr
    assert result.returncode == FAILED, f"{name}: the suite did not fail\n{out[-3000:]}"
