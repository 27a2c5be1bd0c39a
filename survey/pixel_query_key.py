"""What each attention layer adds to its query, key and value inputs, recorded on a pixel run (DETR's sine map on
the queries and keys of its encoder, the object queries on its decoder's).

A model that hands a position embedding to its attention modules (DETR's ``position_embeddings`` and, in the
decoder's cross-attention, ``encoder_position_embeddings``; Table Transformer's ``object_queries`` and
``spatial_position_embeddings``) adds it inside the attention's forward, to the inputs of some of its projections:
nothing of it is a parameter the survey's sites find. :func:`capture_query_key` runs the model once more with a hook
on every module whose class is named for attention and that holds projections named :data:`PROJECTIONS`
(``q_proj``, ``k_proj``, ``v_proj``); at its first call it keeps the states it was handed (:data:`STATES`, by
name; the first positional argument as ``hidden_states``) and the first input of each projection. What a
projection's input gained is then its input minus the states it projects
(:mod:`survey.pixel_kinds.sincos2d_query_key`): found by what the model computed, whatever its keywords are
named.

Plain recording: nothing here asks refpos.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the states an attention forward projects: its own tokens and, in a cross-attention, the memory's
STATES = ("hidden_states", "key_value_states", "encoder_hidden_states")
#: the projections whose inputs show what the query, key and value gained
PROJECTIONS = ("q_proj", "k_proj", "v_proj")
#: the largest tensor kept (elements)
MAX_ELEMENTS = 2_000_000
#: the one entry kept of an attention call whose projections were fed their states unchanged (:func:`adds`)
UNCHANGED = "unchanged"


def _array(value: Any) -> np.ndarray | None:
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() <= MAX_ELEMENTS:
        return value.detach().double().cpu().numpy()
    return None


def capture_query_key(model: Any, inputs: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """Per attention module with projections (module docstring), path → ``{name: tensor}``: the states of its first
    call, and each projection's first input as ``<projection>.input`` — or ``{UNCHANGED: []}`` where each projection
    was fed its states as they are (:func:`adds`). Empty where no such module ran (or the forward failed: the pixel
    run's own capture says why)."""
    import torch

    found: dict[str, dict[str, np.ndarray]] = {}
    handles = []
    attention = {name: module for name, module in model.named_modules() if "Attention" in type(module).__name__
                 and all(isinstance(getattr(module, p, None), torch.nn.Module) for p in PROJECTIONS)}

    def keep(path: str) -> Any:
        def hook(module: Any, args: tuple, kwargs: dict[str, Any]) -> None:
            if path in found:
                return
            named = {name: _array(value) for name, value in kwargs.items() if name in STATES}
            if args and "hidden_states" not in named:
                named["hidden_states"] = _array(args[0])
            found[path] = {name: value for name, value in named.items() if value is not None}
        return hook

    def projection(path: str, name: str) -> Any:
        def hook(module: Any, args: tuple) -> None:
            if path in found and f"{name}.input" not in found[path] and args:
                value = _array(args[0])
                if value is not None:
                    found[path][f"{name}.input"] = value
        return hook

    for path, module in attention.items():
        handles.append(module.register_forward_pre_hook(keep(path), with_kwargs=True))
        for name in PROJECTIONS:
            handles.append(getattr(module, name).register_forward_pre_hook(projection(path, name)))
    try:
        with torch.no_grad():
            model(**inputs)
    except Exception:  # the pixel run's capture of this size ran: a failure here leaves nothing recorded
        return {}
    finally:
        for handle in handles:
            handle.remove()
    return {path: call if adds(call) else {UNCHANGED: np.zeros(0)} for path, call in found.items()}


def adds(call: dict[str, np.ndarray]) -> bool:
    """Whether a projection's input differs from the states it projects (:data:`STATES`: the query its module's
    tokens, the key and value the memory's where one was handed, else the tokens): something was added inside the
    attention. A call where nothing was is kept as :data:`UNCHANGED` alone (a model's attention of the usual form
    adds nothing: its states are not kept, and the record stays small)."""
    tokens = call.get("hidden_states")
    memory = next((call[k] for k in STATES[1:] if k in call), tokens)
    pairs = (("q_proj.input", tokens), ("k_proj.input", memory), ("v_proj.input", memory))
    return any(name in call and states is not None and not (call[name].shape == states.shape
                                                              and np.array_equal(call[name], states))
               for name, states in pairs)
