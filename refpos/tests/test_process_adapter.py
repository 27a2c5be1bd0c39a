"""The process protocol of ``spec_tests/adapters/process.py``: an adapter in another process, crashes contained.

Each test starts a small Python adapter as the child (``python -m spec_tests.adapters.process serve``), so the
protocol's framing, its typed errors, a child that aborts and one that hangs are each shown on real pipes.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from spec_tests.adapters.process import ImplementationCrashed, ImplementationError, ProcessImplementation

CHILD = textwrap.dedent('''
    import os, time
    import numpy as np
    INFO = {"name": "a child for the protocol tests", "dtype": "float64", "rope_layout": "half"}

    def alibi_slopes(n_heads):
        if n_heads == 13:
            os.abort()  # what a native library's failed assert does
        if n_heads == 14:
            os._exit(3)
        if n_heads < 1:
            raise ValueError(f"n_heads must be >= 1, got {n_heads}")
        if n_heads == 15:
            raise KeyError("an error outside the contract's three")
        return 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)

    def rope_frequencies(rope, seq_len=None):
        if rope.get("rope_type", "default") != "default":
            raise NotImplementedError("default only")
        d = rope["head_dim"]
        return rope["rope_theta"] ** (-np.arange(0, d, 2) / d), float("inf") if seq_len == -1 else 1.0

    def softmax(logits, mask=None, fully_masked="zeros"):
        time.sleep(30)
''')


@pytest.fixture
def child(tmp_path, monkeypatch) -> ProcessImplementation:
    (tmp_path / "protocol_child.py").write_text(CHILD, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    impl = ProcessImplementation([sys.executable, "-m", "spec_tests.adapters.process", "serve", "protocol_child"],
                                 timeout=5.0)
    yield impl
    impl.close()


def test_hello_lists_the_functions_and_info(child):
    namespace: dict = {}
    child.install(namespace)
    assert namespace["INFO"]["name"] == "a child for the protocol tests"
    assert child.hello["functions"] == ["alibi_slopes", "rope_frequencies", "softmax"]
    assert callable(namespace["__getattr__"]("alibi_slopes"))
    with pytest.raises(AttributeError, match="does not provide attention"):
        namespace["__getattr__"]("attention")


def test_every_function_the_suite_asks_for_crosses_the_protocol():
    """The reference adapter served over the protocol provides every function the spec suite requires by
    name, those it re-exports from its sibling modules (apply_rope_tables, apply_vision_rope, ...) included:
    a contract function the proxy does not know would be a skip for every program, unseen."""
    import re
    from pathlib import Path

    spec = Path(__file__).resolve().parents[2] / "spec_tests"
    asked = {name for path in spec.glob("test_*.py")
             for call in re.findall(r"require\(impl,((?:\s*\"\w+\",?)+)", path.read_text(encoding="utf-8"))
             for name in re.findall(r"\"(\w+)\"", call)}
    assert {"apply_rope", "apply_rope_tables", "apply_vision_rope", "local_attention", "query_scale"} <= asked
    impl = ProcessImplementation([sys.executable, "-m", "spec_tests.adapters.process", "serve",
                                  "refpos.testing.adapter"], timeout=60.0)
    try:
        assert sorted(asked - set(impl.hello["functions"])) == []
    finally:
        impl.close()


def test_arrays_dicts_and_floats_round_trip(child):
    slopes = child.function("alibi_slopes")(8)
    np.testing.assert_array_equal(slopes, 2.0 ** (-np.arange(1, 9.0)))  # bit for bit through .npy
    inv_freq, factor = child.function("rope_frequencies")({"rope_theta": 1e4, "head_dim": 8}, seq_len=-1)
    assert inv_freq.dtype == np.float64 and inv_freq.shape == (4,) and factor == float("inf")


def test_contract_errors_keep_their_type(child):
    with pytest.raises(ValueError, match="n_heads must be >= 1"):
        child.function("alibi_slopes")(0)
    with pytest.raises(NotImplementedError, match="default only"):
        child.function("rope_frequencies")({"rope_type": "linear", "rope_theta": 1e4, "head_dim": 8})
    with pytest.raises(ImplementationError, match="KeyError"):
        child.function("alibi_slopes")(15)


def test_an_abort_is_a_named_failure_and_the_child_restarts(child):
    slopes = child.function("alibi_slopes")
    with pytest.raises(ImplementationCrashed, match=r"killed by SIGABRT during alibi_slopes"):
        slopes(13)
    assert slopes(4).shape == (4,)  # a fresh child answers the next call
    with pytest.raises(ImplementationCrashed, match=r"exited with status 3 during alibi_slopes"):
        slopes(14)
    assert slopes(2).shape == (2,)


def test_a_hung_call_is_killed_after_the_timeout(child):
    with pytest.raises(ImplementationCrashed, match=r"did not answer within 5 s during softmax"):
        child.function("softmax")(np.zeros((2, 3)))
    assert child.function("alibi_slopes")(1).shape == (1,)


GGML_CHILD = textwrap.dedent('''
    import numpy as np
    from refpos.tools.bench_native import ROPE_VISION, Graph, load_ggml
    import ctypes
    INFO = {"name": "ggml with a failed assert", "dtype": "float32", "rope_layout": "half"}

    def apply_rope(x, positions, rope, seq_len=None):
        lib = load_ggml()
        graph = Graph(lib, 2**20)
        a = graph.tensor(np.zeros((4, 1, 8), dtype=np.float32))
        p = graph.tensor(np.zeros(16, dtype=np.int32))
        sections = (ctypes.c_int * 4)(1, 1, 0, 0)
        # VISION mode wants n_dims == head_size / 2: 8 fails GGML_ASSERT(n_dims == ne0/2) and ggml aborts
        out = lib.ggml_rope_multi(graph.ctx, a, p, None, 8, sections, ROPE_VISION, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0)
        return graph.compute(out, (4, 1, 8), 1)()
''')


def test_a_real_ggml_abort_is_a_named_failure(tmp_path, monkeypatch):
    """ggml's failed assert aborts its process: through the protocol it is this call's failure, with ggml's
    message, and the next call runs in a fresh child (needs ggml: ``REFPOS_GGML_LIB``)."""
    from refpos.tools.bench_native import load_ggml

    if load_ggml() is None:
        pytest.skip("needs ggml: REFPOS_GGML_LIB (python -m spec_tests.adapters.build_ggml)")
    (tmp_path / "ggml_child.py").write_text(GGML_CHILD, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    impl = ProcessImplementation([sys.executable, "-m", "spec_tests.adapters.process", "serve", "ggml_child"],
                                 timeout=60.0, env={"GGML_NO_BACKTRACE": "1"})
    try:
        for _ in range(2):  # the second call meets a restarted child, and the same assert
            with pytest.raises(ImplementationCrashed, match=r"killed by SIGABRT during apply_rope.*GGML_ASSERT"):
                impl.function("apply_rope")(np.zeros((1, 8)), np.zeros(1, dtype=np.int64), {"head_dim": 8})
    finally:
        impl.close()


def _node_with_onnxruntime() -> bool:
    import shutil
    import subprocess

    node = shutil.which("node")
    return node is not None and subprocess.run([node, "-e", "require.resolve('onnxruntime-node')"],
                                               capture_output=True, check=False).returncode == 0


def test_the_javascript_adapter_answers_over_the_protocol():
    """The JavaScript adapter (spec_tests/adapters/onnxruntime_node/adapter.js): its INFO (the rotation takes its
    tables), a rotation with the caller's tables equal to the reference within float32 rounding, and the
    contract's errors, its key list told by the proxy's hello (needs node and onnxruntime-node on NODE_PATH:
    tox -e ort-node)."""
    if not _node_with_onnxruntime():
        pytest.skip("needs node and onnxruntime-node (npm install --ignore-scripts onnxruntime-node; NODE_PATH)")
    import refpos
    from spec_tests.adapters.process import node_program

    impl = ProcessImplementation(node_program("onnxruntime_node/adapter.js", "ai.onnx"), timeout=60.0)
    try:
        assert impl.hello["info"]["name"].startswith("onnxruntime-node")
        assert impl.hello["info"]["rope_tables"] == "input"
        assert "apply_rope_tables" in impl.hello["functions"] and "apply_rope" not in impl.hello["functions"]
        rope = {"rope_type": "yarn", "rope_theta": 1e4, "head_dim": 8, "factor": 4.0,
                "original_max_position_embeddings": 16, "ntk_rule": None}  # a contract key; the rule is the tables'
        config = refpos.rope_config_from_params(rope)
        cos, sin = refpos.rope_cos_sin(np.arange(40), config)  # (40, 8), the half layout: the pairs' (40, 4)
        x = np.random.default_rng(0).standard_normal((2, 5, 8))
        positions = np.array([39, 0, 7, 7, 2])
        rotate = impl.function("apply_rope_tables")
        got = rotate(x, positions, cos[:, :4], sin[:, :4], rope)
        np.testing.assert_allclose(got, refpos.apply_rope(x, positions, config), atol=1e-5, rtol=0)
        with pytest.raises(ValueError, match="unknown rope keys"):
            rotate(x, positions, cos[:, :4], sin[:, :4], {**rope, "not_a_key": 1})
        with pytest.raises(ValueError, match="positions must be < 39"):
            rotate(x, positions, cos[:39, :4], sin[:39, :4], rope)
    finally:
        impl.close()


def test_the_c_example_adapter_is_green_through_refpos_suite(tmp_path):
    """spec_tests/examples/c_adapter (RoPE in C over the process protocol), built with the system's ``cc`` and run
    by ``refpos suite`` through the proxy: every RoPE test it can take passes, the others are skips (the whole
    suite takes about a minute on two cores; these files are where its passes are)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        pytest.skip("needs a C compiler (cc, or CC)")
    source = Path(__file__).resolve().parents[2] / "spec_tests" / "examples" / "c_adapter"
    program = tmp_path / "rope_adapter"
    build = subprocess.run([compiler, "-std=c99", "-O2", "-o", str(program), str(source / "adapter.c"),
                            str(source / "protocol.c"), "-lm"], capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr
    files = [f"spec_tests/test_{name}.py" for name in ("rope_contract", "rope_properties", "rope_vectors",
                                                          "rope_scaling", "golden")]
    env = {**os.environ, "REFPOS_PROCESS": str(program), "REFPOS_PROCESS_TIMEOUT": "60",
           "PYTHONPATH": str(source.parents[2])}
    only_rope_goldens = ["-k", "not test_golden or rope"]  # the golden cases of other families are skips anyway
    run = subprocess.run([sys.executable, "-m", "refpos", "suite", "--impl", "spec_tests.adapters.process", "-q",
                          *files, *only_rope_goldens], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=600, check=False)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= 100 and "failed" not in summary and "error" not in summary, summary
