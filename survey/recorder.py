"""The hooks and patches of one recorded forward (:class:`Recorder`, run by :func:`_forward`): what transformers'
code did with positions, as the records of :mod:`survey.records`.

Every call of an eager attention function (each modeling module's ``eager_attention_forward`` and its
variants, the way transformers 5.x models reach attention) is recorded: the calling module, the query and
key it was handed, the additive mask, and every other tensor argument (T5's ``position_bias``). The call
returns zeros in place of the attention output, so each layer's input is the same in every run whatever
attention did. In a run that neutralizes, the rotary tables handed to each attention module are replaced by
the identity (:func:`_identity`).

Every call of a modeling module's rotary apply function (a module-level function, or a class's method:
RoFormer's ``apply_rotary_position_embeddings``) is recorded too, with the query and key it rotates
(:func:`rotated`) before and after, its other tensor arguments by digest, and the module that called it (a
layer's attention or its indexer). Also recorded: every ``torch.nn.functional.embedding`` lookup (the table
it read, by parameter name, and the indices), every row of a parameter or buffer read by indexing it with
integer positions (CTRL), the output of every positional-embedding module hooked, and every return value of
the modeling module's ALiBi builders and T5-style bucket functions, with the module that called it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from survey.records import Applied, Built, Call, Lookup, Run

#: attribute names of the eager attention functions transformers' modeling modules pass to
#: ``ALL_ATTENTION_FUNCTIONS.get_interface`` (``eager_attention_forward`` and its variants)
EAGER = re.compile(r"\w*eager_attention_forward")
#: module-level functions that build an ALiBi bias, and methods that bucket relative positions
ALIBI = re.compile(r"\w*alibi\w*")
BUCKET = re.compile(r"_?relative_position_bucket")
#: the relative positions a bucket function is also evaluated at: every distance to 4096 each way (past the
#: largest distance a T5 config of the survey sets, so every logarithmic bucket and the saturation are
#: reached) and the survey's largest position
SWEEP = np.concatenate([[-131071], np.arange(-4096, 4097), [131071]]).astype(np.int64)
#: module-level functions that apply a rotation (read where attention is computed inline)
APPLY = re.compile(r"apply_rotary\w*|apply_rope\w*")
#: keyword arguments through which a decoder hands each layer its rotary tables
ROTARY_KWARGS = ("position_embeddings", "freqs_cis", "rotary_pos_emb", "rotary_emb")


def _np(t: Any) -> np.ndarray:
    import torch

    t = t.detach()
    if t.is_complex():
        return t.to(torch.complex128).numpy().copy()
    if t.dtype == torch.bool or not t.is_floating_point():
        return t.numpy().copy()
    return t.to(torch.float64).numpy().copy()


def digest(x: np.ndarray) -> str:
    """A short digest of an array's shape and bytes: equal digests, equal arrays."""
    import hashlib

    return hashlib.sha1(repr(x.shape).encode() + np.ascontiguousarray(x).tobytes()).hexdigest()[:16]


def squeezed(x: np.ndarray) -> np.ndarray:
    """``x`` without its leading axes of size 1 (a table broadcast as ``[None, None, T, d]`` is its ``(T, d)``)."""
    while x.ndim > 2 and x.shape[0] == 1:
        x = x[0]
    return x


#: parameter names of an apply function that hold the query and the key it rotates
QUERY_KEY = re.compile(r"q|k|xq|xk|query\w*|key\w*")


def rotated(function: Any, args: tuple, kwargs: dict) -> tuple[list[Any], list[Any]]:
    """The query and key a rotary apply function rotates, and its other tensor arguments (its tables).

    The arguments named as a query or key (:data:`QUERY_KEY`) where the signature names them (RoFormer's
    ``(sinusoidal_pos, query_layer, key_layer)`` takes its table first), else its first two tensors."""
    import torch

    bound: dict[str, Any] = {}
    with contextlib.suppress(TypeError, ValueError):
        bound = dict(inspect.signature(function).bind(*args, **kwargs).arguments)
    tensors = [(name, v) for name, v in bound.items() if isinstance(v, torch.Tensor)]
    named = [v for name, v in tensors if QUERY_KEY.fullmatch(name)]
    if named:
        return named[:2], [v for name, v in tensors if not QUERY_KEY.fullmatch(name)]
    found = [a for a in args if isinstance(a, torch.Tensor)]
    return found[:2], found[2:] + [v for v in kwargs.values() if isinstance(v, torch.Tensor)]


def _modeling_modules() -> list[Any]:
    return [m for name, m in list(sys.modules.items())
            if name.startswith("transformers.models.") and ".modeling_" in name and m is not None]


@contextlib.contextmanager
def removed(handles: list[Any]) -> Iterator[None]:
    """Run the block with torch hooks ``handles`` registered, and remove every one of them however it ends."""
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def _patched(targets: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """Set ``(owner, attribute, value)`` for the duration, restoring every one after (an attribute a class
    inherited, ``torch.Tensor.__getitem__``, is deleted again)."""
    saved = [(owner, name, owner.__dict__.get(name, _INHERITED) if isinstance(owner, type) else getattr(owner, name))
             for owner, name, _ in targets]
    try:
        for owner, name, value in targets:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            if value is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


#: what :func:`_patched` saves for an attribute a class does not define itself
_INHERITED = object()


class Recorder:
    """The patches and hooks of one run."""

    def __init__(self, model: Any, neutral: bool, keep_inputs: bool = True) -> None:
        self.model, self.neutral, self.keep_inputs = model, neutral, keep_inputs
        self.names = {id(m): name for name, m in model.named_modules()}
        self.params = {id(p): name for name, p in model.named_parameters()}
        self.params.update({id(b): name for name, b in model.named_buffers()})
        self.run = Run()
        #: the layer lists' entries being run, outermost first: (list path, index, layers of the list run before);
        #: records take the outermost, and :meth:`layers` turns it into (list path, layer)
        self.context: list[tuple[str, int, int]] = []
        self.entered: dict[str, int] = {}  # layer list path -> how many of its layers have started
        self.runs: dict[tuple[str, int], int] = {}  # (layer list path, index) -> times that layer ran

    # ------------------------------------------------------------------ attention functions
    def eager(self, original: Any) -> Any:
        def capture(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *args: Any, **kwargs: Any):
            import torch

            out, weights = original(module, query, key, value, attention_mask, *args, **kwargs)
            tensors = {k: _np(v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
            scaling = kwargs.get("scaling")
            layer = self.context[0] if self.context else None
            self.run.calls.append(Call(self.names.get(id(module), "?"), layer, _np(query), _np(key),
                                       None if attention_mask is None else _np(attention_mask), tensors,
                                       float(scaling) if isinstance(scaling, (int, float)) else None))
            return torch.zeros_like(out), weights
        return capture

    def embedding(self, original: Any) -> Any:
        def lookup(input: Any, weight: Any, *args: Any, **kwargs: Any):
            out = original(input, weight, *args, **kwargs)
            self.run.lookups.append(Lookup(self.params.get(id(weight), "?"), _np(input), int(weight.shape[0]),
                                           _np(out), bool(weight.requires_grad)))
            return out
        return lookup

    def indexing(self, original: Any) -> Any:
        """``Tensor.__getitem__`` recording the rows read of a parameter or buffer at integer indices (a tensor
        of them, alone or followed by full slices)."""
        import torch

        def getitem(tensor: Any, index: Any):
            out = original(tensor, index)
            name = self.params.get(id(tensor))
            if name is None or tensor.ndim != 2:
                return out
            rows, *rest = index if isinstance(index, tuple) else (index,)
            if isinstance(rows, torch.Tensor) and not rows.is_floating_point() and rows.dtype != torch.bool \
                    and all(isinstance(r, slice) and r == slice(None) for r in rest):
                self.run.indexed.append(Lookup(name, _np(rows), int(tensor.shape[0]), _np(out),
                                               bool(tensor.requires_grad)))
            return out
        return getitem

    def builder(self, name: str, original: Any, sweep: bool = False) -> Any:
        """``original`` recorded; ``sweep``: a bucket function, evaluated at :data:`SWEEP` too."""
        def build(*args: Any, **kwargs: Any):
            import torch

            out = original(*args, **kwargs)
            bound = {}
            with contextlib.suppress(TypeError, ValueError):
                bound = dict(inspect.signature(original).bind(*args, **kwargs).arguments)
            keep = {k: (_np(v) if hasattr(v, "detach") else v) for k, v in bound.items()
                    if isinstance(v, (int, float, bool, str)) or hasattr(v, "detach")}
            relative = bound.get("relative_position")
            swept = None
            if sweep and isinstance(relative, torch.Tensor):
                grid = torch.as_tensor(SWEEP, dtype=relative.dtype, device=relative.device)
                swept = _np(original(**{**bound, "relative_position": grid}))
            if hasattr(out, "detach"):
                self.run.builders.append(Built(name, keep, _np(out), self.context[0] if self.context else None,
                                               swept, self._caller()))
            return out
        return build

    def _caller(self) -> str:
        """The path of the module whose method called the patched function whose wrapper calls this (``self``
        of the frame two up), or "" where that is no module of the model."""
        caller = sys._getframe(2).f_locals.get("self")
        return self.names.get(id(caller), "") if caller is not None else ""

    def apply(self, name: str, original: Any) -> Any:
        """``original``, a rotary apply function, recorded: the query and key it rotates (:func:`rotated`) before
        and after, and its other tensor arguments by digest."""
        def rotate(*args: Any, **kwargs: Any):
            import torch

            caller = self._caller()
            out = original(*args, **kwargs)
            inputs, others = rotated(original, args, kwargs)
            outputs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
                       if isinstance(o, torch.Tensor)][: len(inputs)]
            self.run.applied.append(Applied(name, [_np(x) for x in inputs], [_np(x) for x in outputs],
                                            self.context[0] if self.context else None, caller,
                                            [digest(squeezed(_np(x))) for x in others]))
            return out
        return rotate

    def patches(self) -> list[tuple[Any, str, Any]]:
        import torch

        targets: list[tuple[Any, str, Any]] = []
        for module in _modeling_modules():
            for name, value in list(vars(module).items()):
                if not callable(value):
                    continue
                if EAGER.fullmatch(name) and inspect.isfunction(value):
                    targets.append((module, name, self.eager(value)))
                elif APPLY.fullmatch(name) and not isinstance(value, type):  # a function, or a kernel's wrapper
                    targets.append((module, name, self.apply(f"{module.__name__}.{name}", value)))
                elif (ALIBI.fullmatch(name) or BUCKET.fullmatch(name)) and inspect.isfunction(value):
                    targets.append((module, name, self.builder(f"{module.__name__}.{name}", value,
                                                               sweep=bool(BUCKET.fullmatch(name)))))
                elif isinstance(value, type) and value.__module__ == module.__name__:
                    for attr, member in list(value.__dict__.items()):
                        if BUCKET.fullmatch(attr):
                            wrap = functools.partial(self.builder, sweep=True)
                        elif APPLY.fullmatch(attr):  # RoFormer's staticmethod apply_rotary_position_embeddings
                            wrap = self.apply
                        else:
                            continue
                        if isinstance(member, staticmethod):
                            targets.append((value, attr, staticmethod(wrap(f"{value.__name__}.{attr}",
                                                                           member.__func__))))
                        elif inspect.isfunction(member):  # a method: the wrapper receives self first
                            targets.append((value, attr, wrap(f"{value.__name__}.{attr}", member)))
        targets.append((torch.nn.functional, "embedding", self.embedding(torch.nn.functional.embedding)))
        targets.append((torch.Tensor, "__getitem__", self.indexing(torch.Tensor.__getitem__)))
        return targets

    # ------------------------------------------------------------------ module hooks
    def pre_hook(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        import torch

        path = self.names.get(id(module), "?")
        first = next((a for a in args if isinstance(a, torch.Tensor)),
                     kwargs.get("hidden_states") if isinstance(kwargs.get("hidden_states"), torch.Tensor) else None)
        if first is not None:
            value = _np(first)
            self.run.digests.setdefault(path, []).append(digest(value))
            if self.keep_inputs:
                self.run.inputs.setdefault(path, []).append(value)
        handed = {k: _np(v) for k, v in kwargs.items() if isinstance(v, torch.Tensor) and k != "hidden_states"}
        if handed:
            self.run.handed.setdefault(path, {}).update(handed)
        if not self.neutral:
            return None
        replaced = []
        for name in ROTARY_KWARGS:
            value = kwargs.get(name)
            identity = _identity(value)
            if identity is not None:
                kwargs = {**kwargs, name: identity}
                replaced.append(name)
        for i, value in enumerate(args):  # tables handed by position (DiaDecoderLayer's self_attention)
            identity = _identity(value) if isinstance(value, (tuple, list)) else None
            if identity is not None:
                args = (*args[:i], identity, *args[i + 1:])
                replaced.append(f"argument {i}")
        self.run.neutralized[path] = replaced
        return args, kwargs

    def enter(self, path: str, index: int) -> Any:
        """Layer ``index`` of list ``path`` starts; the context holds its index in the list and how many of the
        list's layers ran before it (:meth:`layers` chooses between them once the run is over)."""
        def hook(module: Any, args: tuple) -> None:
            count = self.entered.get(path, 0)
            self.entered[path] = count + 1
            self.runs.setdefault((path, index), 0)
            self.runs[(path, index)] += 1
            self.context.append((path, index, count))
        return hook

    def layers(self) -> None:
        """Each record's layer: its index in its list, or, in a list one of whose layers ran more than once
        (ALBERT runs one shared layer as every layer), the number of the list's layers run before it. A list
        whose layers each ran at most once keeps its indices (Mllama's text pass skips its cross-attention
        layers)."""
        repeated = {path for (path, _), n in self.runs.items() if n > 1}

        def which(where: Any) -> tuple[str, int] | None:
            if where is None:
                return None
            path, index, count = where
            return (path, count) if path in repeated else (path, index)
        for record in (*self.run.calls, *self.run.builders, *self.run.applied):
            record.layer = which(record.layer)

    def leave(self, module: Any, args: tuple, output: Any) -> None:
        self.context.pop()

    def positional_hook(self, module: Any, args: tuple, output: Any) -> None:
        import torch

        if isinstance(output, torch.Tensor):
            self.run.positional[self.names.get(id(module), "?")] = _np(output)


def _identity(value: Any) -> Any:
    """The rotary tables ``value`` replaced by the identity rotation, or None when it is not one.

    A pair of real tables is (cos, sin) in most families and (sin, cos) in GPT-J: the sine is told by its
    values at the first token, which sits at position 0 in every run that neutralizes (sin 0 = 0, while
    cos 0 is the attention factor). A pair where that does not single out one table is left alone."""
    import torch

    if isinstance(value, torch.Tensor) and value.is_complex():
        return torch.ones_like(value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            isinstance(v, torch.Tensor) and v.is_floating_point() and v.ndim >= 2 for v in value):
        zero_at_first = [bool(torch.all(v[..., 0, :] == 0)) for v in value]
        if zero_at_first == [False, True]:
            return type(value)((torch.ones_like(value[0]), torch.zeros_like(value[1])))
        if zero_at_first == [True, False]:
            return type(value)((torch.zeros_like(value[0]), torch.ones_like(value[1])))
    return None


def _forward(model: Any, inputs: dict[str, Any], recorder: Recorder, attention_modules: list[Any],
             positional_modules: list[Any]) -> Run:
    import torch

    handles = [m.register_forward_pre_hook(recorder.pre_hook, with_kwargs=True) for m in attention_modules]
    for path, layers in model.named_modules():
        if isinstance(layers, torch.nn.ModuleList):
            for index, layer in enumerate(layers):
                handles.append(layer.register_forward_pre_hook(recorder.enter(path, index)))
                handles.append(layer.register_forward_hook(recorder.leave))
    handles += [m.register_forward_hook(recorder.positional_hook) for m in positional_modules]
    with removed(handles), _patched(recorder.patches()), torch.no_grad():
        model(**inputs)
    recorder.layers()
    return recorder.run
