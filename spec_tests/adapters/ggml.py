"""Adapter: llama.cpp's ggml (CPU backend), its calls in a child process (spec_tests/adapters/process.py).

Run (``tox -e ggml`` builds ggml from the llama-cpp-python source package on PyPI and runs this)::

    export REFPOS_GGML_LIB=$(python -m spec_tests.adapters.build_ggml)
    REFPOS_IMPL=spec_tests.adapters.ggml python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/ggml.xfails.txt

ggml aborts the process on a failed ``GGML_ASSERT``; its ctypes calls (``spec_tests/adapters/_ggml_calls.py``,
where what is wired and how is described) therefore run in a child served over the process protocol, and
an abort fails the one test that caused it (``ImplementationCrashed``, with ggml's message).
"""

from __future__ import annotations

import sys

from spec_tests.adapters.process import install_command

# GGML_NO_BACKTRACE: ggml's abort then prints its assert line only, not a debugger's backtrace (seconds a crash)
install_command(globals(), [sys.executable, "-m", "spec_tests.adapters.process", "serve",
                            "spec_tests.adapters._ggml_calls"], env={"GGML_NO_BACKTRACE": "1"})
