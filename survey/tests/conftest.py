"""One observation per model type for the whole run: the comparison, mutant and sample tests judge the same
stored runs of transformers' code (observing a model type with every case takes seconds to a minute on one core)."""

from __future__ import annotations

from typing import Any

import pytest

import refpos


@pytest.fixture(autouse=True)
def _numpy_backend():
    """The survey compares transformers' tensors with refpos's answers in NumPy, as ``python -m survey`` runs,
    whatever backend the rest of the test run uses (the array-api-strict run of ``tox``)."""
    with refpos.use_backend("numpy"):
        yield


@pytest.fixture(scope="session")
def observation():
    """``observation(name)``: model type ``name`` (or a switch variant, ``falcon[alibi=true]``) observed once
    (:func:`survey.run.observe_quietly`), the same object for every test that asks."""
    pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
    pytest.importorskip("transformers", reason="the survey runs transformers' code")
    from survey import catalogue, stored
    from survey.run import observe_quietly

    cache: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in cache:
            stored.quiet()  # the memory bound counted from what this process holds now, as each worker does
            cache[name] = observe_quietly(catalogue.find(name))
        return cache[name]
    return get


@pytest.fixture(scope="session")
def observed(observation):
    """``observed(name)``: ``(config dict, probe)`` of the shared observation of ``name``."""
    def get(name: str) -> tuple[dict[str, Any], Any]:
        seen = observation(name)
        assert seen.run is not None, f"{name}: transformers not run ({seen.row.cause})"
        return seen.config, seen.run
    return get


@pytest.fixture(scope="session")
def vllm_observe():
    """``vllm_observe(architecture)``: one architecture of vLLM's registry observed on vLLM (its engine started
    once; :func:`survey.vllm_engine.run.observe_quietly`); the test is skipped where vLLM is not installed."""
    pytest.importorskip("torch", reason="the vLLM survey runs vLLM's model code: tox -e survey-vllm")
    pytest.importorskip("vllm.model_executor.models.registry", reason="vLLM: tox -e survey-vllm")
    from survey.vllm_engine import configs, engine, run

    engine.start()
    by_name = {a.name: a for a in configs.architectures()}
    return lambda architecture: run.observe_quietly(by_name[architecture])
