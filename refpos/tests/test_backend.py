"""The backend switch: setter, context manager, REFPOS_BACKEND, clear errors, namespace inference."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import refpos
from refpos import backend


def test_use_backend_is_a_context_manager_and_restores():
    before = refpos.backend.backend_name()
    with refpos.use_backend("array_api_strict") as xp:
        assert refpos.backend.backend_name() == "array_api_strict"
        assert xp.__name__ == "array_api_strict"
        mask = refpos.core.causal_mask(2, 3)
        assert type(mask).__module__.startswith("array_api_strict")
    assert refpos.backend.backend_name() == before


def test_set_backend_is_a_setter():
    before = refpos.backend.backend_name()
    try:
        xp = refpos.set_backend("array_api_strict")
        assert refpos.backend.backend_name() == "array_api_strict" and xp.__name__ == "array_api_strict"
        refpos.set_backend("numpy")
        assert isinstance(refpos.core.causal_mask(2, 2), np.ndarray)
    finally:
        refpos.set_backend(before)


def test_use_backend_switches_on_enter_not_on_construction():
    before = refpos.backend.backend_name()
    other = "array_api_strict" if before != "array_api_strict" else "numpy"
    switch = refpos.use_backend(other)
    assert refpos.backend.backend_name() == before  # made, not entered: nothing changed
    with switch:
        assert refpos.backend.backend_name() == other
        with switch:  # re-entered inside itself: the stack restores the right backend
            assert refpos.backend.backend_name() == other
        assert refpos.backend.backend_name() == other
    assert refpos.backend.backend_name() == before


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="backend must be one of"):
        refpos.use_backend("torch")
    with pytest.raises(ValueError, match="backend must be one of"):
        refpos.set_backend("torch")
    with pytest.raises(TypeError, match="backend must be a str"):
        refpos.use_backend(3)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_cupy_without_cupy_gives_a_clear_error():
    before = refpos.backend.backend_name()
    with pytest.raises(ImportError, match="needs CuPy"):
        refpos.use_backend("cupy")
    with pytest.raises(ImportError, match="needs CuPy"):
        refpos.set_backend("cupy")
    assert refpos.backend.backend_name() == before  # nothing changed


def test_environment_variable_sets_the_default():
    code = "import refpos; print(refpos.backend.backend_name())"
    env = {**os.environ, "REFPOS_BACKEND": "array_api_strict"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "array_api_strict"
    env["REFPOS_BACKEND"] = "tensorflow"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "REFPOS_BACKEND" in bad.stderr


def test_functions_taking_arrays_compute_in_their_namespace():
    import array_api_strict as xs

    q = xs.ones((1, 1, 2, 2), dtype=xs.float64)
    out = refpos.attention(q, q, q)
    assert type(out).__module__.startswith("array_api_strict")
    assert backend.to_numpy(out).tolist() == [[[[1.0, 1.0], [1.0, 1.0]]]]


def test_mixed_libraries_are_rejected():
    import array_api_strict as xs

    with pytest.raises(TypeError, match="one array library"):
        refpos.attention(np.ones((1, 2, 2)), xs.ones((1, 2, 2), dtype=xs.float64), np.ones((1, 2, 2)))


def test_a_with_block_chooses_the_backend_of_its_own_thread_only():
    """Two threads at once, each in its own ``use_backend`` block: each sees its own backend while the other
    holds a different one, and a thread without a block sees the process default."""
    import threading

    both_inside = threading.Barrier(3)
    seen: dict[str, str] = {}

    def run(name: str | None) -> None:
        if name is None:
            both_inside.wait()
            seen["none"] = refpos.backend.backend_name()
            both_inside.wait()
            return
        with refpos.use_backend(name):
            both_inside.wait()  # every thread is inside (or at) its block now
            seen[name] = refpos.backend.backend_name()
            both_inside.wait()

    default = refpos.backend.backend_name()
    threads = [threading.Thread(target=run, args=(n,)) for n in ("numpy", "array_api_strict", None)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"numpy": "numpy", "array_api_strict": "array_api_strict", "none": default}


def test_refpos_s_own_threads_run_in_the_caller_s_backend(monkeypatch):
    """The blocks refpos runs on its thread pool (refpos.parallel) see the backend of the block that called."""
    import threading

    from refpos import parallel

    if parallel._blas_controller() is None:
        pytest.skip("without threadpoolctl the blocks run in the caller's thread")
    monkeypatch.setattr(parallel, "threads_for", lambda work: 2)
    seen = []
    with refpos.use_backend("array_api_strict"):
        parallel.run_blocks([lambda: seen.append((threading.current_thread().name, refpos.backend.backend_name()))] * 4,
                            numpy=True, work=2**20)
    assert all(thread.startswith("refpos") and name == "array_api_strict" for thread, name in seen), seen
