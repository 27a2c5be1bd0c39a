r"""The position terms an attention module adds to its logits, observed where no module outputs them: the logits
its softmax is fed when its query and key projections are replaced.

A relative position bias or decomposed term computed inside an attention module's own forward (Swin's gathered
table, Swin v2's MLP of log-spaced offsets, SAM's and ViTDet's per-axis tables read at each offset) is no module's
output. What the forward feeds its softmax is ``s = q·kᵀ·scale (+ terms) (+ mask)``. With the key projection
replaced by zero (weight and bias) every key is ``0``, so ``q·kᵀ = 0`` exactly (and so is Swin v2's cosine of
normalised vectors: ``0/max(‖0‖, ε) = 0``), and ``s`` *is* the position terms; the attention mask its forward
takes (``attention_mask``: a shifted window's, which is no position) is left out of that run. With the query
projection's weight replaced by zero and its bias by a seeded draw ``c``, every query is ``c`` wherever it sits (a
padded patch too): the terms that read the query (SAM's ``q·R_h[Δy] + q·R_w[Δx]``, a speech encoder's
``q·E[clip(j − i)]``) are then known from ``c`` and the tables alone. A query projection without a bias is given
one, ``c``, for that forward (removed after).

Where the forward hands its terms to ``scaled_dot_product_attention`` as a floating ``attn_mask`` (Granite Speech's
conformer), that call's softmax input is ``q·kᵀ·scale + attn_mask`` with ``q·kᵀ = 0``: the mask *is* the softmax
input, and it is recorded as the first softmax's would be (a boolean mask adds no terms and is not recorded).

The projections are found by name among the attention module's children (:data:`QUERY`, :data:`KEY` or a
:data:`KEY_VALUE` projection whose output is ``[k | v]``, or one fused :data:`FUSED` projection whose output is
``[q | k | v]``); the softmax input by a
:class:`torch.overrides.TorchFunctionMode` that records the first ``softmax`` called while the module's forward
runs. One extra forward of the whole model records every such module; the weights are restored however it ends.
Nothing of the module's own code is reproduced: the comparison (:mod:`survey.pixel_kinds`) judges ``s`` against
refpos's terms of the recorded weights and ``c``.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from survey.probe import removed

#: the children names of a query, a key and a fused ``[q | k | v]`` projection
QUERY = ("query", "q_proj", "q", "to_q", "linear_q")
KEY = ("key", "k_proj", "k", "linear_k")
KEY_VALUE = ("to_kv",)
FUSED = ("qkv", "qkv_proj")
#: the most logit matrices ``(N, N)`` kept of one module (the first window's heads come first), and the most
#: entries: past them, evenly spaced query rows of each matrix
MATRICES = 32
ELEMENTS = 250_000


def projections(attention: Any) -> tuple[Any, Any, bool] | None:
    """``(query, key, fused)``: the attention module's query and key projections (the same module, ``fused``,
    where one projection makes ``[q | k | v]``); ``None`` where it has neither form."""
    children = dict(attention.named_children())
    query = next((children[n] for n in QUERY if n in children and hasattr(children[n], "weight")), None)
    key = next((children[n] for n in (*KEY, *KEY_VALUE) if n in children and hasattr(children[n], "weight")), None)
    if query is not None and key is not None:
        return query, key, False
    fused = next((children[n] for n in FUSED if n in children and hasattr(children[n], "weight")), None)
    return None if fused is None else (fused, fused, True)


def _replace(query: Any, key: Any, fused: bool, generator: Any) -> np.ndarray:
    """Zero both projections' weights and the key's bias; the query's bias a seeded draw (float32 values), which
    is returned (a query without a bias is given one, removed after the forward by :func:`position_logits`)."""
    import torch

    width = query.weight.shape[0] // 3 if fused else query.weight.shape[0]
    drawn = torch.randn(width, generator=generator, dtype=torch.float64).to(torch.float32)
    with torch.no_grad():
        for projection in (query, key):
            projection.weight.zero_()
            if projection.bias is not None:
                projection.bias.zero_()
        if query.bias is None:
            query.bias = torch.nn.Parameter(torch.zeros(query.weight.shape[0], dtype=query.weight.dtype),
                                            requires_grad=False)
        query.bias[:width] = drawn.to(query.bias.dtype)
    return drawn.numpy()


def _kept(logits: Any) -> tuple[np.ndarray, np.ndarray]:
    """The first :data:`MATRICES` ``(N, N)`` matrices of the logits and, where they hold more than
    :data:`ELEMENTS` entries, evenly spaced query rows of them; with the rows' indices."""
    import torch

    n = logits.shape[-1]
    matrices = logits.detach().reshape(-1, logits.shape[-2], n)[:MATRICES]
    rows = min(matrices.shape[1], max(1, ELEMENTS // (matrices.shape[0] * n)))
    index = np.unique(np.linspace(0, matrices.shape[1] - 1, rows).round().astype(np.int64))
    kept = matrices[:, torch.as_tensor(index)]
    dtype = torch.float64 if kept.dtype == torch.float64 else torch.float32
    return kept.to(dtype).numpy().copy(), index


def position_logits(model: Any, inputs: dict[str, Any], owners: list[str]) -> tuple[dict[str, tuple], str]:
    """``(recorded, raised)``: owner path -> ``(logits, rows, query)``, the softmax input of each attention module
    named in ``owners`` (module docstring; its first matrices and the query rows kept, :func:`_kept`) in one
    forward with its query and key projections replaced, and the query bias ``c`` drawn. A module without the
    projections, or whose forward calls no softmax, is left out; a forward that raises leaves out everything, and
    ``raised`` names what it raised (empty where it ran), so a row that finds no logits says why."""
    import torch
    from torch.overrides import TorchFunctionMode

    softmax = {torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax}
    attention = torch.nn.functional.scaled_dot_product_attention
    modules = dict(model.named_modules())
    found = {path: projections(modules[path]) for path in dict.fromkeys(owners) if path in modules}
    found = {path: p for path, p in found.items() if p is not None}
    if not found:
        return {}, ""
    running: list[str] = []
    recorded: dict[str, Any] = {}

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in softmax and running and running[-1] not in recorded:
                recorded[running[-1]] = args[0]
            if func is attention and running and running[-1] not in recorded:
                mask = kwargs.get("attn_mask") if kwargs else None
                mask = args[3] if mask is None and len(args) > 3 else mask
                if isinstance(mask, torch.Tensor) and mask.is_floating_point():
                    recorded[running[-1]] = mask
            return func(*args, **(kwargs or {}))

    saved = {path: [t.detach().clone() for p in found[path][:2] for t in (p.weight, p.bias) if t is not None]
             for path in found}
    unbiased = [found[path][0] for path in found if found[path][0].bias is None]
    generator = torch.Generator().manual_seed(41)
    drawn = {path: _replace(*found[path], generator) for path in found}
    handles = []
    def entered(module: Any, args: tuple, kwargs: dict, key: str) -> tuple[tuple, dict]:
        running.append(key)
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
        if bound.arguments.get("attention_mask") is not None:
            bound.arguments["attention_mask"] = None
        return bound.args, bound.kwargs

    for path in found:
        handles.append(modules[path].register_forward_pre_hook(
            lambda m, a, k, key=path: entered(m, a, k, key), with_kwargs=True))
        handles.append(modules[path].register_forward_hook(lambda m, a, out: running.pop() and None))
    raised = ""
    try:
        with removed(handles), torch.no_grad(), Recorder():
            model(**inputs)
    except Exception as exc:  # the forward does not run with these projections: nothing observed this way
        recorded.clear()
        raised = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    finally:
        for projection in unbiased:  # the bias given for this forward removed
            projection.bias = None
        with torch.no_grad():
            for path, tensors in saved.items():
                live = [t for p in found[path][:2] for t in (p.weight, p.bias) if t is not None]
                for target, value in zip(live, tensors, strict=True):
                    target.copy_(value)
    return {path: (*_kept(logits), drawn[path]) for path, logits in recorded.items()
            if isinstance(logits, torch.Tensor) and logits.ndim >= 2 and logits.is_floating_point()}, raised
