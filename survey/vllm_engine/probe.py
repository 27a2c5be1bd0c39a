"""One tiny vLLM model run with its attention recorded, in the transformers probe's terms (:mod:`survey.probe`).

vLLM's forward takes the flat token ids of one sequence and their positions (``(T,)``; ``(k, T)`` for a model
whose rotary module is M-RoPE, each of its ``k`` axes given the same positions: text tokens). :func:`probe` runs it
four times on the same tokens, with vLLM's attention layers replaced by the recorder of
:func:`survey.vllm_engine.engine.record_attention`:

* run **A**: the probe positions (:func:`survey.probe.positions_for`, below the config's position limit: vLLM
  sizes its rotary cache by it);
* run **B**: every position 0, the reference of a layer whose input does not depend on positions (the
  comparison undoes the claim's own rotation at position 0, as for transformers' runs at position 0);
* run **C**: A's positions with every rotary module the identity (``rotary_emb`` returns the query and key
  unrotated), the reference of a layer whose input carries an absolute encoding (a learned table);
* run **E**: other tokens at A's positions (a bias that changes with the tokens is content, not position).

A layer is the outermost entry of a layer list being run (``model.layers.3``), as in :mod:`survey.probe`; the
input a layer's attention is compared on is the first floating-point tensor handed to that entry (vLLM's
decoder layers take ``(positions, hidden_states, residual)``). Every ``torch.nn.functional.embedding`` lookup is
recorded (a learned position table is read at the positions plus its offset), and so is the output of every
module whose class name says it is a positional embedding.

vLLM's ALiBi is added inside its attention kernels from the slopes the layer was built with, as
``slope × (key slot − tokens already cached)``: from the key's slot in the sequence, whatever the positions.
For a model whose attention takes ALiBi slopes the recorder hands that bias to the comparison, and the probe's
positions are the slots ``0 … T−1`` (the only positions at which a bias read from slots can be compared with one
read from positions).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from survey import probe as survey_probe
from survey.probe import Call, Probe, Recorder, Run, _np

#: class names of vLLM's rotary modules (``vllm.model_executor.layers.rotary_embedding``)
ROTARY = ("Rotary", "RoPE", "Rope")


class Session:
    """The recorder of the run in progress: :func:`record` (given to ``record_attention``) files each attention
    call under it."""

    recorder: ClassVar[Recorder | None] = None
    inputs: ClassVar[dict[str, list[np.ndarray]]] = {}


def record(module: Any, call: Call) -> None:
    """File one recorded attention call (the stand-in's) with its layer and the input of that layer."""
    recorder = Session.recorder
    if recorder is None:
        return
    call.path = recorder.names.get(id(module), call.path)
    call.layer = recorder.context[0] if recorder.context else None
    if recorder.context:
        path, index, _ = recorder.context[0]
        seen = Session.inputs.get(f"{path}.{index}")
        if seen:
            recorder.run.inputs.setdefault(call.path, []).append(seen[-1])
    recorder.run.calls.append(call)


def rotary_modules(model: Any) -> list[Any]:
    return [m for _, m in model.named_modules() if any(word in type(m).__name__ for word in ROTARY)
            and hasattr(m, "forward_native")]


def mrope_axes(model: Any) -> int:
    """How many position axes the model's rotary modules take (1 unless one is M-RoPE)."""
    for module in rotary_modules(model):
        if "MRotary" in type(module).__name__:
            return len(getattr(module, "mrope_section", None) or (0, 0, 0))
    return 1


def has_alibi(model: Any) -> bool:
    return any(getattr(m, "given", {}).get("alibi_slopes") is not None for m in model.modules())


@contextlib.contextmanager
def _identity_rotary(model: Any) -> Iterator[None]:
    """Every rotary module returns the query and key it was handed (run C)."""
    modules = rotary_modules(model)

    def identity(positions: Any, query: Any, key: Any = None, *args: Any, **kwargs: Any) -> Any:
        return query, key
    for module in modules:
        module.forward = identity
    try:
        yield
    finally:
        for module in modules:
            del module.forward


def _forward(model: Any, config: Any, ids: np.ndarray, positions: np.ndarray, neutral: bool) -> Run:
    """One forward pass recorded (module docstring)."""
    import torch

    from survey.vllm_engine import engine

    recorder = Recorder(model, neutral=False)
    Session.recorder, Session.inputs = recorder, {}

    def entering(path: str, index: int) -> Any:
        def hook(module: Any, args: tuple, kwargs: dict) -> None:
            first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)
                          and a.is_floating_point()), None)
            if first is not None:
                Session.inputs.setdefault(f"{path}.{index}", []).append(_np(first))
        return hook
    handles = []
    for path, layers in model.named_modules():
        if isinstance(layers, torch.nn.ModuleList):
            for index, layer in enumerate(layers):
                handles.append(layer.register_forward_pre_hook(entering(path, index), with_kwargs=True))
                handles.append(layer.register_forward_pre_hook(recorder.enter(path, index)))
                handles.append(layer.register_forward_hook(recorder.leave))
    handles += [m.register_forward_hook(recorder.positional_hook) for _, m in model.named_modules()
                if survey_probe.POSITIONAL_MODULE.fullmatch(type(m).__name__)]
    axes = mrope_axes(model)
    given = np.broadcast_to(positions, (axes, positions.size)).copy() if axes > 1 else positions
    lookup = recorder.embedding(torch.nn.functional.embedding)
    try:
        with survey_probe._patched([(torch.nn.functional, "embedding", lookup)]), \
                (_identity_rotary(model) if neutral else contextlib.nullcontext()):
            engine.forward(model, config, ids, given)
    finally:
        for handle in handles:
            handle.remove()
        Session.recorder = None
    recorder.layers()
    if neutral:
        for call in recorder.run.calls:
            recorder.run.neutralized[call.path] = ["rotary_emb"]
    return recorder.run


def probe(model: Any, config: Any, hf_config: Any) -> Probe:
    """Runs A, B, C and E of ``model`` (built under ``config`` from ``hf_config``), as a :class:`survey.probe.Probe`."""
    positions = survey_probe.positions_for(hf_config)
    p = np.arange(len(positions), dtype=np.int64) if has_alibi(model) else np.asarray(positions, dtype=np.int64)
    ids = survey_probe.token_ids(hf_config, p.size)
    run_a = _forward(model, config, ids, p, neutral=False)
    run_b = _forward(model, config, ids, np.zeros_like(p), neutral=False)
    run_c = _forward(model, config, ids, p, neutral=True)
    run_e = _forward(model, config, survey_probe.token_ids(hf_config, p.size, seed=2), p, neutral=False)
    modules = dict(model.named_modules())
    paths = list(dict.fromkeys(c.path for c in run_a.calls))
    described = {path: (type(m).__name__, any(True for _ in m.parameters())) for path, m in modules.items()
                 if survey_probe.POSITIONAL_MODULE.fullmatch(type(m).__name__)}
    return Probe(p, True, run_a, run_b, run_c, None, run_e,
                 {path: type(modules[path]).__name__ for path in paths if path in modules}, ids, described, None)
