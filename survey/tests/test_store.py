"""Stored observations read back as they were written, with nothing unpickled."""

from __future__ import annotations

import json

import numpy as np
import pytest

from survey import probe, run, store


def observation() -> run.Observation:
    call = probe.Call("model.layers.0.self_attn", ("model.layers", 0), np.arange(6.0).reshape(1, 1, 2, 3),
                      np.ones((1, 1, 2, 3), dtype=np.float64), None, {"position_bias": np.zeros((1, 2, 2))}, 0.5)
    recorded = probe.Run(calls=[call], inputs={"model.layers.0.self_attn": [np.eye(2)]})
    case = probe.Case("decoding", np.array([0, 32767]), np.arange(2), np.ones(2, dtype=np.int64),
                      probe.Run(calls=[call]), queries=1, kept=np.array([0, 1]))
    seen = probe.Probe(np.array([0, 5]), True, recorded, probe.Run(), probe.Run(), None, None,
                       {"model.layers.0.self_attn": "LlamaAttention"}, np.array([3, 4]),
                       {"embed_positions": ("LearnedPositionalEmbedding", True)}, cases=[case])
    row = run.Row("llama", "not reached", observed=["rope"], notes=["a note"])
    return run.Observation({"model_type": "llama", "id2label": {0: "a"}, "pair": (1, 2)}, seen, row)


def test_an_observation_reads_back_as_written(tmp_path):
    path = store.path_of(tmp_path, "llama")
    store.save(observation(), path)
    back = store.load(path)
    original = observation()
    assert back.config == original.config and back.row == original.row
    call, first = back.run.a.calls[0], original.run.a.calls[0]
    assert (call.path, call.layer, call.scaling) == (first.path, first.layer, first.scaling)
    assert np.array_equal(call.query, first.query) and np.array_equal(call.tensors["position_bias"],
                                                                      first.tensors["position_bias"])
    assert back.run.positional == original.run.positional and back.run.d is None
    case = back.run.cases[0]
    assert (case.name, case.queries, case.position_ids.tolist(), case.kept.tolist()) == ("decoding", 1, [0, 32767],
                                                                                        [0, 1])
    assert back.engine == "transformers" and back.stacks == {}
    assert store.load(path).config == back.config and store.to_bytes(back) == store.to_bytes(store.load(path))


def test_a_type_the_survey_does_not_store_is_refused(tmp_path):
    path = tmp_path / "x.npz"
    text = json.dumps({"__type__": "Popen", "fields": {}})
    np.savez(path, observation=np.array(text))
    with pytest.raises(ValueError, match="Popen"):
        store.load(path)


def test_observations_of_other_versions_are_refused(tmp_path):
    store.write_environment(tmp_path, {"transformers": "5.24.0", "torch": "2.13.0"})
    store.check_environment(tmp_path, {"transformers": "5.24.0", "torch": "2.13.0"})
    with pytest.raises(SystemExit, match=r"5\.25\.0"):
        store.check_environment(tmp_path, {"transformers": "5.25.0", "torch": "2.13.0"})


def test_an_observing_process_may_take_its_memory_bound_beyond_its_imports():
    """The address-space bound is counted from what the process mapped importing torch and transformers (a CUDA
    build of torch maps about 8 GiB of libraries: a bound of 8 GiB from zero left no room for any model)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch", reason="imports torch: pip install torch transformers")
    pytest.importorskip("transformers", reason="imports transformers")
    code = ("import resource; from survey import stored; stored.quiet(); "
            "print(resource.getrlimit(resource.RLIMIT_AS)[0] - stored.mapped_bytes())")
    room = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "SURVEY_MEMORY_GB": "2"}).stdout)
    assert 1.5 * 2**30 < room <= 2 * 2**30


def test_every_observation_has_the_same_room_however_much_the_process_holds():
    """A process that observes one model type after another (a worker, the tests' shared fixture) holds more as it
    goes: the bound is counted again before each observation, so the next one has its full room. With 2 GiB of
    room, 1.5 GiB held and the bound counted again, 1.5 GiB more is allocated (a bound counted once would refuse
    it)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch", reason="imports torch: pip install torch transformers")
    pytest.importorskip("transformers", reason="imports transformers")
    code = ("from survey import stored; stored.quiet(); held = bytearray(3 * 2**29); stored.quiet(); "
            "more = bytearray(3 * 2**29); print(len(held) + len(more))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "SURVEY_MEMORY_GB": "2"})
    assert done.returncode == 0 and int(done.stdout) == 3 * 2**30, done.stderr[-300:]


def test_the_mapped_address_space_is_zero_where_it_cannot_be_read(monkeypatch):
    """Where ``/proc/self/statm`` cannot be read (not Linux), the bound counts from zero, as it did before."""
    import builtins

    from survey import stored

    assert stored.mapped_bytes() > 0
    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    assert stored.mapped_bytes() == 0
