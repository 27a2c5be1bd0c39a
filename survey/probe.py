"""One tiny model run with its attention recorded: what transformers' own code does with positions.

:func:`probe` instantiates a model (random weights, float32, eager attention) and runs one forward pass
twice on the same tokens:

* run **A** with the position ids :data:`POSITIONS` (where the model takes ``position_ids``);
* run **B** with every position 0 and, for every attention module that receives ``position_embeddings``
  (the cos/sin pair or complex ``freqs_cis`` a decoder hands each layer), those replaced by the identity
  (cos 1, sin 0; 1 + 0i): the query and key a layer hands to attention in run B are the ones *before* any
  rotation.

Every call of an eager attention function (each modeling module's ``eager_attention_forward`` and its
variants, the way transformers 5.x models reach attention) is recorded: the calling module, the query and
key it was handed, the additive mask, and every other tensor argument (T5's ``position_bias``). The call
returns zeros in place of the attention output, so each layer's input is the same in both runs whatever
attention did: the query before rotation of layer ``l`` in run A is its query in run B (checked: the
hidden states entering each attention module must be equal in both runs).

Every call of a modeling module's rotary apply function is recorded too, with its input and output and the
module that called it (a layer's attention or its indexer): the rotation as a map, where its input still has
the projection's channel order. The attention mask is passed explicitly (all ones) wherever the forward takes
one (:func:`inputs_for`). After these runs, the same tokens run once per case of :mod:`survey.cases`: every
threshold the config states crossed, left padding, a masked token, packed sequences, decoding steps whose id is
not their slot (:class:`Case`: the inputs each was given, and what the model did).

Also recorded, in run A: every ``torch.nn.functional.embedding`` lookup (the table it read, by parameter
name, and the indices: a learned position table is read at the positions plus an offset), every row of a
parameter or buffer read by indexing it with integer positions (a table read without an embedding call: CTRL),
the output of every module whose class name says it is a positional embedding (sinusoid tables built in code), and
every return value of the modeling module's ALiBi builders and T5-style bucket functions (for models that
compute attention inline).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: the position ids of run A: small ones (where every rule agrees), and large enough ones that a wrong
#: frequency, layout or offset shows (the rotation error bound grows with p; see survey.compare)
POSITIONS = (0, 1, 2, 5, 17, 100, 999, 4001)
#: tokens put before the probe's in run D (models without position ids)
SHIFT = 3
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
POSITIONAL_MODULE = re.compile(r".*Positional\w*Embedding.*|.*Position\w*Embedding.*")


@dataclass
class Call:
    """One call of an eager attention function."""

    path: str  # the calling module's qualified name in the model
    layer: tuple[str, int] | None  # (layer list's path, index) of the outermost layer list being run
    query: np.ndarray  # (B, H, T, d) as handed to attention (float64 copy of the float32 tensor)
    key: np.ndarray
    mask: np.ndarray | None
    tensors: dict[str, np.ndarray]  # other tensor arguments (position_bias, ...)
    scaling: float | None


@dataclass
class Lookup:
    """One ``torch.nn.functional.embedding`` call: the table (parameter name), its rows, what it read."""

    table: str
    indices: np.ndarray
    rows: int
    vectors: np.ndarray
    trained: bool  # the table is a trainable parameter (a learned table; a frozen one holds a sinusoid)


@dataclass
class Built:
    """One call of an ALiBi builder or a bucket function: its name, its scalar and tensor arguments, its
    result, and the layer being run (as :attr:`Call.layer`)."""

    name: str
    arguments: dict[str, Any]
    output: np.ndarray
    layer: tuple[str, int] | None
    #: of a bucket function: its output for the relative positions :data:`SWEEP` (the other arguments as
    #: given), where a sequence of a few tokens reaches only the exact buckets of short distances
    swept: np.ndarray | None = None
    #: the module whose forward called it: a layer's attention, or a stack that computes one bias for all its
    #: layers before running them (MPNet's encoder)
    caller: str = ""


@dataclass
class Applied:
    """One call of a modeling module's rotary apply function (``apply_rotary_pos_emb`` ...): the query (and
    key, where it takes both) before and after, the layer being run (as :attr:`Call.layer`) and the module
    that called it (``caller``: a layer's attention, or its indexer). The input is the query as the projection
    made it, before any regrouping of its channels: where a channel permutation is visible."""

    name: str
    before: list[np.ndarray]
    after: list[np.ndarray]
    layer: tuple[str, int] | None
    caller: str = ""
    #: digests (:func:`digest`, leading axes of size 1 dropped) of the call's other tensor arguments: the
    #: tables it rotates by (RoFormer's sinusoid table, read from an embedding, is a rotation's table)
    tables: list[str] = field(default_factory=list)


@dataclass
class Run:
    calls: list[Call] = field(default_factory=list)
    #: attention module path -> the hidden states it was handed (first tensor argument)
    inputs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    #: attention module path -> names of the rotary keyword arguments replaced by the identity
    neutralized: dict[str, list[str]] = field(default_factory=dict)
    #: module path -> the tensor keyword arguments it was handed (alibi, position_bias, ...)
    handed: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    lookups: list[Lookup] = field(default_factory=list)
    #: rows of a parameter or buffer read by indexing it with integer positions (CTRL's sinusoid table,
    #: ``pos_encoding[position_ids, :]``): where a table is read without an embedding call
    indexed: list[Lookup] = field(default_factory=list)
    positional: dict[str, np.ndarray] = field(default_factory=dict)  # module path -> output
    builders: list[Built] = field(default_factory=list)
    applied: list[Applied] = field(default_factory=list)
    #: attention module path -> a digest of each hidden-state input (:func:`digest`): whether two runs' layers
    #: read the same input, kept where the inputs themselves are not
    digests: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Case:
    """One more forward of the probe's tokens with other inputs, and what the model did with them.

    Each case states every input a layer could read its positions from, so that a claim is graded on the one
    its record says it reads: ``position_ids`` (what was passed; None where the model was left to choose),
    ``slots`` (each token's slot: its index plus the tokens already cached, transformers' ``cache_position``)
    and ``attention_mask`` (the 2-D mask passed over every key, cached ones first; None where none was).
    ``run`` holds the calls of the case's last forward (the decoding step for ``decoding``); its hidden-state
    inputs are kept as digests only. ``error`` says why the model did not run it (a table of fewer rows, a
    cache the model does not take)."""

    name: str
    position_ids: np.ndarray | None
    slots: np.ndarray
    attention_mask: np.ndarray | None
    run: Run | None = None
    error: str = ""
    #: the tokens run (the probe's own, or more for a decoding case's prefill)
    input_ids: np.ndarray | None = None
    #: how many of the last tokens were the run's queries (one for a decoding step; 0: every token)
    queries: int = 0
    #: the indices of the keys the calls keep (None: every key): a cache padded with zeros is stored without them
    kept: np.ndarray | None = None


@dataclass
class Probe:
    """What one model's forward passes showed."""

    positions: np.ndarray  # what run A passed as position ids (or the model's own 0..T-1)
    position_ids_taken: bool
    a: Run
    b: Run  # every position 0, rotary tables the identity
    c: Run  # run A's positions, rotary tables the identity (for models whose layer inputs depend on positions)
    #: for a model that takes no position ids: the same tokens after :data:`SHIFT` others, so they sit at
    #: positions SHIFT ... SHIFT + T - 1 (None where position ids are taken)
    d: Run | None
    #: other tokens at run A's positions (to tell a position bias from a content one)
    e: Run | None
    module_types: dict[str, str]  # attention module path -> class name (inline ones where no call was made)
    input_ids: np.ndarray
    #: positional-embedding module path -> (class name, whether it has trainable parameters)
    positional: dict[str, tuple[str, bool]] = field(default_factory=dict)
    #: where run A passed position ids: the same tokens without them, at the model's own positions (a learned
    #: table is read at those plus the family's offset: RoBERTa counts from padding_idx + 1); None otherwise
    own: Run | None = None
    #: the same tokens with other inputs (:func:`cases_for`): thresholds crossed, left padding, packed
    #: sequences, a decoding step whose id is not its slot
    cases: list[Case] = field(default_factory=list)
    #: the engine whose code ran (transformers here; another engine fills the same records)
    engine: str = "transformers"
    #: what the model changed of its own accord during the run (:func:`switched`: BigBird's attention type)
    notes: list[str] = field(default_factory=list)


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


def token_ids(config: Any, length: int, seed: int = 0) -> np.ndarray:
    """``length`` token ids that are none of the ids the config names (image, audio, pad ... tokens)."""
    named: set[int] = set()

    def collect(values: dict[str, Any]) -> None:
        for key, value in values.items():
            if isinstance(value, dict):
                collect(value)
            elif isinstance(key, str) and key.endswith(("_id", "_ids", "_index")):
                for v in value if isinstance(value, list) else [value]:
                    if isinstance(v, int):
                        named.add(v)

    values = config.to_dict()
    collect(values)
    sizes = [v for d in (values, values.get("text_config") or {}) if isinstance(v := d.get("vocab_size"), int)]
    pool = [i for i in range(5, min([1000, *sizes])) if i not in named]
    return np.random.default_rng(seed).choice(pool, size=length, replace=False).astype(np.int64)


def inputs_for(model: Any, ids: np.ndarray, positions: np.ndarray | None) -> tuple[dict[str, Any], bool]:
    """The keyword arguments of a text forward pass, and whether the model takes ``position_ids``.

    The attention mask is passed explicitly (all ones) wherever the forward takes one: left to itself,
    transformers reads position ids that do not count up by one as sequences packed together and masks
    every query off the keys before its gap, so a bias carried in the mask would be seen on almost no entry."""
    import torch

    params = inspect.signature(model.forward).parameters
    if "input_ids" not in params:
        raise NotReached(f"its forward takes no input_ids ({', '.join(list(params)[:3])}, ...)")
    inputs: dict[str, Any] = {"input_ids": torch.as_tensor(ids)[None]}
    if "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = torch.as_tensor(ids)[None]
    for name in MASKS:
        if name in params:
            inputs[name] = torch.ones((1, ids.size), dtype=torch.long)
    if "use_cache" in params:
        inputs["use_cache"] = False
    taken = positions is not None and "position_ids" in params
    if taken:
        inputs["position_ids"] = torch.as_tensor(positions)[None]
    return inputs, taken


#: the 2-D attention masks a forward may take (each passed explicitly, over its own tokens)
MASKS = ("attention_mask", "decoder_attention_mask")


class NotReached(Exception):
    """The model cannot be run generically: the message says why."""


#: config keys bounding the positions a model may be run at (a learned table's rows)
POSITION_LIMITS = ("max_position_embeddings", "n_positions", "max_source_positions", "max_target_positions", "n_ctx")


def positions_for(config: Any) -> tuple[int, ...]:
    """:data:`POSITIONS`, those at or past the model's smallest position limit replaced by the largest ones
    below it (a learned table of 512 rows is read at 0 ... 511)."""
    values = config.to_dict()
    limits = [v for key in POSITION_LIMITS for d in (values, values.get("text_config") or {})
              if isinstance(v := d.get(key), int) and not isinstance(v, bool) and v > len(POSITIONS)]
    if not limits:
        return POSITIONS
    limit = min(limits)
    kept = [p for p in POSITIONS if p < limit]
    extra = [p for p in range(limit - 1, -1, -1) if p not in kept][: len(POSITIONS) - len(kept)]
    return tuple(sorted(kept + extra))


def attention_like(model: Any) -> list[str]:
    """Paths of the modules whose class is an attention (name ending in ``Attention``, or torch's
    ``MultiheadAttention``): where a model that calls no eager attention function computes it inline."""
    return [path for path, m in model.named_modules() if path and type(m).__name__.endswith("Attention")]


def _ran(model: Any, paths: list[str], inputs: dict[str, Any]) -> list[str]:
    """Those of the modules ``paths`` that run in a forward of ``inputs`` (FLAVA's image encoder does not run on
    token ids: its attention modules are no layers of this run)."""
    import torch

    modules = dict(model.named_modules())
    seen: set[str] = set()
    handles = [modules[path].register_forward_pre_hook(lambda module, args, path=path: seen.add(path))
               for path in paths]
    with removed(handles), torch.no_grad():
        model(**inputs)
    return [path for path in paths if path in seen]


#: a layer of a module path: the first layer list's entry on it (``model.encoder.layers.3.self_attn``)
LAYER = re.compile(r"^(.*?)\.(\d+)(\.|$)")


def layer_of(path: str) -> tuple[str, int] | None:
    """``(layer list path, index)`` of the first layer list entry on module path ``path``, or None."""
    found = LAYER.match(path)
    return (found.group(1), int(found.group(2))) if found else None


def inline_beside(called: list[str], layers: set[Any], paths: list[str]) -> list[str]:
    """Those attention modules of ``paths`` that may compute attention inline: no caller of an eager attention
    function (``called``), containing none and sitting in none, in a layer where no call was made
    (BigBird-Pegasus's encoder multiplies its query and key inline while its decoder calls the eager function);
    every one where no call was made at all. Which of them ran is for :func:`_ran` to say."""
    def related(path: str) -> bool:
        return any(path == c or path.startswith(c + ".") or c.startswith(path + ".") for c in called)
    if not called:
        return paths
    return [path for path in paths if not related(path) and (layer := layer_of(path)) is not None
            and layer not in layers]


def attention_types(model: Any) -> dict[str, str]:
    """Module path -> its ``attention_type`` (BigBird's ``block_sparse`` or ``original_full``), where it has one."""
    return {path: value for path, m in model.named_modules()
            if isinstance(value := getattr(m, "attention_type", None), str)}


def switched(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """A note for each attention type the model changed during its run, on the outermost module that changed:
    BigBird switches ``block_sparse`` to ``original_full`` for a sequence shorter than its blocks, so the
    block-sparse path is not what ran (nor what was compared)."""
    changed = [path for path in before if after.get(path, before[path]) != before[path]]
    outer = [path for path in changed if not any(path.startswith(o + ".") for o in changed if o != path)]
    return [f"{path or 'the model'} switched attention_type {before[path]} to {after[path]} for the survey's "
            f"{'short ' if after[path] == 'original_full' else ''}sequence: the {before[path]} path is not compared"
            for path in outer]


def probe(model: Any, config: Any, positions: tuple[int, ...] | None = None, with_cases: bool = True) -> Probe:
    """Run ``model`` (built from ``config``) and return what its attention saw (see the module docstring);
    ``with_cases``: the other inputs of :mod:`survey.cases` too."""
    import torch

    model.eval()
    positions = positions_for(config) if positions is None else positions
    ids = token_ids(config, len(positions))
    p = np.asarray(positions, dtype=np.int64)
    inputs_a, taken = inputs_for(model, ids, p)
    # a first run finds the attention modules (those that call an eager attention function, and those that
    # compute attention inline in a layer that calls none)
    scout = Recorder(model, neutral=False)
    positional = [m for _, m in model.named_modules() if POSITIONAL_MODULE.fullmatch(type(m).__name__)]
    types_before = attention_types(model)
    run_a = _forward(model, inputs_a, scout, [], positional)
    modules = dict(model.named_modules())
    called = list(dict.fromkeys(c.path for c in run_a.calls))
    candidates = inline_beside(called, {c.layer for c in run_a.calls}, attention_like(model))
    paths = called + (_ran(model, candidates, inputs_a) if candidates else [])
    attention = [modules[path] for path in paths if path in modules]
    run_a = _forward(model, inputs_a, Recorder(model, neutral=False), attention, positional)
    inputs_b = dict(inputs_a)
    if taken:
        inputs_b["position_ids"] = torch.zeros_like(inputs_a["position_ids"])
    run_b = _forward(model, inputs_b, Recorder(model, neutral=True), attention, positional)
    run_c = _forward(model, inputs_a, Recorder(model, neutral=True), attention, positional)
    run_own = None
    if taken:
        inputs_own = {k: v for k, v in inputs_a.items() if k != "position_ids"}
        run_own = _forward(model, inputs_own, Recorder(model, neutral=False), attention, positional)
    inputs_e = {k: torch.as_tensor(token_ids(config, len(positions), seed=2))[None]
                if k in ("input_ids", "decoder_input_ids") else v for k, v in inputs_a.items()}
    run_e = _forward(model, inputs_e, Recorder(model, neutral=False), attention, positional)
    run_d = None
    if not taken:
        prefix = torch.as_tensor(token_ids(config, SHIFT, seed=1))[None]
        inputs_d = {k: torch.cat([prefix if k.endswith("input_ids") else torch.ones_like(prefix), v], dim=-1)
                    if k in ("input_ids", "decoder_input_ids", *MASKS) else v for k, v in inputs_a.items()}
        run_d = _forward(model, inputs_d, Recorder(model, neutral=False), attention, positional)
    described = {path: (type(m).__name__, any(True for _ in m.parameters())) for path, m in model.named_modules()
                 if POSITIONAL_MODULE.fullmatch(type(m).__name__)}
    from survey import cases

    own_positions = p if taken else np.arange(len(positions))
    more = [cases.run_case(model, case, ids, inputs_a, attention, positional)
            for case in cases.cases_for(config.to_dict(), own_positions, taken)] if with_cases else []
    return Probe(own_positions, taken, run_a, run_b, run_c, run_d, run_e,
                 {path: type(modules[path]).__name__ for path in paths if path in modules}, ids, described, run_own,
                 more, notes=switched(types_before, attention_types(model)))
