"""Adapter: onnxruntime-node from npm, its com.microsoft RotaryEmbedding, MultiHeadAttention, GroupQueryAttention.

A JavaScript adapter (Softmax is ai.onnx Softmax-13). ``tox -e ort-node-contrib`` installs onnxruntime-node with
npm and runs it::

    npm install --ignore-scripts --prefix DIR onnxruntime-node@1.30.0   # the CPU binaries ship in the package
    NODE_PATH=DIR/node_modules REFPOS_IMPL=spec_tests.adapters.ort_node_contrib python -m pytest spec_tests \\
        --xfails-file spec_tests/adapters/ort_node_contrib.xfails.txt

The adapter is the Node.js program ``spec_tests/adapters/onnxruntime_node/adapter.js com.microsoft`` (one ONNX model of
one operator per call; what is wired and how is described at its top), served over the process protocol of
spec_tests/adapters/process.py.
"""

from spec_tests.adapters.process import install_command, node_program

install_command(globals(), node_program("onnxruntime_node/adapter.js", "com.microsoft"))
