"""A hostile program behind the process protocol (spec_tests/adapters/process.py): every failure costs one call and
is named by its cause, nothing the program writes or forks outlives or outgrows the proxy's bounds.

The child is a small Python program written here (the standard library only, so that it starts in a fraction of a
second): it answers ``__hello__`` as the protocol asks and ``alibi_slopes(n_heads)`` by ``n_heads``, one way of
breaking the protocol per value (:data:`HOSTILE`). ``rope_frequencies`` answers only a program that was greeted,
as the onnxruntime-node adapter does (its rope keys come with the greeting).
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spec_tests.adapters.process import ImplementationCrashed, ProcessImplementation

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the process protocol runs programs in process groups "
                                                           "(POSIX)")

CHILD = textwrap.dedent(r'''
    import json, os, struct, sys, time
    out = sys.stdout.buffer
    greeted = False

    def npy(descr, shape, data):
        header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
        header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
        return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data

    def send(message, arrays=(), sizes=None):
        message["arrays"] = [len(a) for a in arrays] if sizes is None else sizes
        out.write(json.dumps(message).encode() + b"\n" + b"".join(arrays))
        out.flush()

    def slopes(n):
        return npy("<f8", "(%d,)" % n, b"".join(struct.pack("<d", 2.0 ** (-8.0 * (i + 1) / n)) for i in range(n)))

    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            break
        message = json.loads(line)
        for size in message["arrays"]:
            sys.stdin.buffer.read(size)
        call, args = message["call"], message["args"]
        if call == "__hello__":
            greeted = True
            sys.stderr.write("hello received\n"); sys.stderr.flush()
            send({"result": {"protocol": 1, "info": {"name": "hostile", "dtype": "float64"},
                             "functions": ["alibi_slopes", "rope_frequencies"]}})
            continue
        if call == "rope_frequencies":
            if not greeted:
                send({"error": {"type": "ValueError", "message": "unknown rope key rope_type (no __hello__ came)"}})
            else:
                send({"result": [{"$array": 0}, 1.0]}, [npy("<f8", "(1,)", b"\0" * 8)])
            continue
        n = args["n_heads"]
        if n == 2:  # a debugging printf on stdout before the answer
            out.write(b"debug: computing slopes\n"); out.flush()
            send({"result": {"$array": 0}}, [slopes(2)])
        elif n == 3:  # 64 MiB without a newline
            for _ in range(64):
                out.write(b"x" * 2**20)
            out.flush(); time.sleep(60)
        elif n == 4:  # a size of 2**50 bytes
            send({"result": {"$array": 0}}, sizes=[2**50]); time.sleep(60)
        elif n == 5:  # complex numbers
            send({"result": {"$array": 0}}, [npy("<c16", "(1,)", b"\0" * 16)])
        elif n == 6:  # half a JSON object
            out.write(b'{"result": [1, 2\n'); out.flush(); time.sleep(60)
        elif n == 7:  # never answers
            time.sleep(600)
        elif n == 8:  # a forked grandchild, then an abort
            pid = os.fork()
            if pid == 0:
                time.sleep(600); os._exit(0)
            open(os.environ["GRANDCHILD_FILE"], "w").write(str(pid))
            os.abort()
        elif n == 9:  # the cause on stderr, then an abort at once
            for i in range(50):
                sys.stderr.write(f"step {i}\n")
            sys.stderr.write("FATAL: the cause, last\n"); sys.stderr.flush()
            os.abort()
        elif n == 10:  # a negative size
            send({"result": {"$array": 0}}, sizes=[-5]); time.sleep(60)
        elif n == 11:  # a reference to an array it did not send
            send({"result": {"$array": 3}})
        elif n == 12:
            os.abort()
        elif n == 13:  # an .npy header whose shape needs more bytes than the frame has
            send({"result": {"$array": 0}}, [npy("<f8", "(1000,)", b"\0" * 8)])
        else:
            send({"result": {"$array": 0}}, [slopes(n)])
''')


@pytest.fixture
def program(tmp_path, monkeypatch):
    """A proxy for the hostile child (2 s a call, giving up after 3 time-outs in a row)."""
    path = tmp_path / "hostile_child.py"
    path.write_text(CHILD, encoding="utf-8")
    monkeypatch.setenv("GRANDCHILD_FILE", str(tmp_path / "grandchild.pid"))
    made = []

    def make(**kwargs):
        impl = ProcessImplementation([sys.executable, str(path)], **{"timeout": 2.0, **kwargs})
        made.append(impl)
        return impl

    yield make
    for impl in made:
        impl.close()


def _survives(impl):
    """The next call meets a fresh, greeted program."""
    assert impl.function("alibi_slopes")(1).shape == (1,)
    _, factor = impl.function("rope_frequencies")({"rope_type": "default", "head_dim": 2})
    assert factor == 1.0


#: n_heads -> what the message must name (the cause, not a signal)
HOSTILE = {
    2: r"broke the process protocol: a line on stdout that is not a protocol message .*b'debug: computing slopes\\n'",
    3: r"broke the process protocol: a line of more than 16777216 bytes without a newline: b'xxxx",
    4: r"broke the process protocol: the arrays of one message hold 1125899906842624 bytes, more than the",
    5: r"broke the process protocol: array 0 has dtype <c16: the protocol's arrays are",
    6: r"broke the process protocol: a line on stdout that is not a protocol message .*'\{\"result\": \[1, 2\\n'",
    10: r"broke the process protocol: an array size must be a whole number of bytes >= 0, got -5",
    11: r"broke the process protocol: \{'\$array': 3\} names no array of the message",
    13: r"broke the process protocol: array 0: shape \(1000,\) of <f8 needs 8000 bytes, the frame has 8",
}


@pytest.mark.parametrize("n_heads", sorted(HOSTILE))
def test_a_protocol_violation_is_named_by_its_cause_and_costs_one_call(program, n_heads):
    """Each was "killed by SIGKILL" after a wait (or several GiB read for a line without a newline)."""
    impl = program()
    start = time.monotonic()
    with pytest.raises(ImplementationCrashed, match=HOSTILE[n_heads]) as info:
        impl.function("alibi_slopes")(n_heads)
    assert "SIGKILL" not in str(info.value) and type(info.value).__name__ == "ProtocolBroken"
    assert time.monotonic() - start < 10
    _survives(impl)


def test_a_restarted_program_is_greeted_again(program):
    """After an abort the fresh program got no ``__hello__``: every later call needing its lists failed
    ("unknown rope key rope_type"); one abort cost 45 RoPE tests instead of one."""
    impl = program()
    for _ in range(3):
        with pytest.raises(ImplementationCrashed, match="killed by SIGABRT during alibi_slopes"):
            impl.function("alibi_slopes")(12)
        _survives(impl)
    assert impl.starts == 4


def test_consecutive_time_outs_give_up_on_the_program(program):
    """A program that never answers cost the full time-out on every call: the suite would take days."""
    import pytest as _pytest

    impl = program(max_timeouts=3)
    for _ in range(3):
        with pytest.raises(ImplementationCrashed, match=r"did not answer within 2 s during alibi_slopes"):
            impl.function("alibi_slopes")(7)
    start = time.monotonic()
    with pytest.raises(_pytest.skip.Exception, match=r"did not answer 3 calls in a row within 2 s each: the proxy "
                                                     r"gave up on it"):
        impl.function("alibi_slopes")(1)
    assert time.monotonic() - start < 1


def test_an_answer_between_time_outs_resets_the_count(program):
    impl = program(max_timeouts=2)
    for _ in range(3):
        with pytest.raises(ImplementationCrashed, match="did not answer"):
            impl.function("alibi_slopes")(7)
        assert impl.function("alibi_slopes")(16).shape == (16,)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def test_a_forked_grandchild_does_not_outlive_the_program(program, tmp_path):
    impl = program()
    with pytest.raises(ImplementationCrashed, match="killed by SIGABRT"):
        impl.function("alibi_slopes")(8)
    pid = int((tmp_path / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(pid)
    if alive:
        os.kill(pid, 9)
    assert not alive, "the program's grandchild kept running"


def test_the_last_stderr_lines_are_never_lost(program):
    """The stderr tail was read by a thread the message did not wait for: 4 of 20 tries lost the last lines."""
    impl = program()
    for _ in range(20):
        with pytest.raises(ImplementationCrashed, match=r"killed by SIGABRT during alibi_slopes.*: .*\| … \| step 48 "
                                                        r"\| step 49 \| FATAL: the cause, last$"):
            impl.function("alibi_slopes")(9)


def test_the_serving_side_refuses_an_endless_request_line(tmp_path):
    """``python -m spec_tests.adapters.process serve`` reads its requests with the same bounds."""
    import subprocess

    served = subprocess.run([sys.executable, "-m", "spec_tests.adapters.process", "serve", "refpos.testing.adapter"],
                            input=b"x" * (17 * 2**20), capture_output=True, timeout=120, check=False)
    assert served.returncode == 2
    assert b"a line of more than 16777216 bytes without a newline" in served.stderr


# ------------------------------------------------------------------- the project's own JavaScript side
JS_CHILD = textwrap.dedent('''
    'use strict';
    // protocol.js of the onnxruntime-node adapter, serving a function that needs the greeting's rope keys
    const { serve, valueError } = require(process.env.PROTOCOL_JS);
    const contract = { ropeKeys: null };
    serve({ name: 'a JavaScript child', dtype: 'float64' }, {
      alibi_slopes: async ({ n_heads }) => {
        if (n_heads === 12) process.abort();
        return { dtype: '<f8', shape: [n_heads], data: new Float64Array(n_heads).fill(0.5) };
      },
      rope_frequencies: async ({ rope }) => {
        const unknown = Object.keys(rope).filter((k) => !contract.ropeKeys || !contract.ropeKeys.has(k));
        if (unknown.length) throw valueError(`unknown rope keys ${unknown}`);
        return [{ dtype: '<f8', shape: [1], data: new Float64Array([1]) }, 1.0];
      },
    }, (lists) => { contract.ropeKeys = new Set(lists.rope_keys); });
''')


@pytest.fixture
def javascript(tmp_path, monkeypatch):
    import shutil

    node = shutil.which(os.environ.get("REFPOS_NODE", "node"))
    if node is None:
        pytest.skip("needs node (REFPOS_NODE)")
    path = tmp_path / "child.js"
    path.write_text(JS_CHILD, encoding="utf-8")
    monkeypatch.setenv("PROTOCOL_JS", str(Path(__file__).resolve().parents[2] / "spec_tests" / "adapters" /
                                          "onnxruntime_node" / "protocol.js"))
    return [node, str(path)]


def test_the_javascript_adapter_is_greeted_after_a_restart(javascript):
    """The onnxruntime-node adapter's protocol.js, aborted once: the fresh process got no ``__hello__`` and every
    later RoPE call failed with "unknown rope keys rope_type" instead of one test."""
    impl = ProcessImplementation(javascript, timeout=30.0)
    try:
        rope = {"rope_type": "default", "head_dim": 8}
        assert impl.function("rope_frequencies")(rope)[1] == 1.0
        with pytest.raises(ImplementationCrashed, match="killed by SIGABRT during alibi_slopes"):
            impl.function("alibi_slopes")(12)
        assert impl.function("rope_frequencies")(rope)[1] == 1.0
        assert impl.starts == 2
    finally:
        impl.close()


def test_the_javascript_side_names_a_call_before_any_greeting(javascript):
    """A call before ``__hello__`` is answered with an error saying so, not with the first missing key."""
    import json
    import subprocess

    request = json.dumps({"call": "rope_frequencies", "args": {"rope": {"rope_type": "default"}}, "arrays": []})
    answer = subprocess.run(javascript, input=(request + "\n").encode(), capture_output=True, timeout=60, check=False)
    error = json.loads(answer.stdout.splitlines()[0])["error"]
    assert error["type"] == "ProtocolError" and "before any __hello__" in error["message"], error
