"""Adapter: onnxruntime-node from npm, its com.microsoft RotaryEmbedding, MultiHeadAttention, GroupQueryAttention.

A JavaScript adapter (Softmax is ai.onnx Softmax-13).

Run (``tox -e ort-node-contrib`` installs onnxruntime-node with npm and runs this)::

    npm install --ignore-scripts --prefix DIR onnxruntime-node@1.30.0   # the CPU binaries ship in the package
    NODE_PATH=DIR/node_modules REFPOS_IMPL=spec_tests.adapters.ort_node_contrib python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/ort_node_contrib.xfails.txt

The adapter is the Node.js program ``spec_tests/adapters/onnxruntime_node/adapter.js com.microsoft`` (one ONNX model
of one operator per call; what is wired and how is described at its top), served over the process
protocol of spec_tests/adapters/process.py; this module only starts it.
"""

from __future__ import annotations

import os
from pathlib import Path

from spec_tests.adapters.process import ProcessImplementation

PROGRAM = Path(__file__).resolve().parent / "onnxruntime_node" / "adapter.js"
ProcessImplementation([os.environ.get("REFPOS_NODE", "node"), str(PROGRAM), "com.microsoft"],
                      timeout=float(os.environ.get("REFPOS_PROCESS_TIMEOUT", "120"))).install(globals())
