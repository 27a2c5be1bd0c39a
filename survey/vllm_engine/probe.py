"""One tiny vLLM model run with its attention recorded, in the transformers probe's terms (:mod:`survey.probe`).

vLLM's forward takes the flat token ids of one sequence and their positions (``(T,)``; ``(k, T)`` for a model
whose rotary module is M-RoPE, each of its ``k`` axes given the same positions: text tokens). :func:`probe` runs it
four times on the same tokens, with vLLM's attention layers replaced by the recorder of
:func:`survey.vllm_engine.engine.record_attention`:

* run **A**: the probe positions (:func:`survey.probe.positions_for`, below the config's position limit: vLLM
  sizes its rotary cache by it; where they lie past the cache's rows, below them: vLLM sizes it by a length the
  limits do not name);
* run **B**: every position 0, the reference of a layer whose input does not depend on positions (the
  comparison undoes the claim's own rotation at position 0, as for transformers' runs at position 0);
* run **C**: A's positions with every rotary module the identity (``rotary_emb`` returns the query and key
  unrotated), the reference of a layer whose input carries an absolute encoding (a learned table);
* run **E**: other tokens at A's positions (a bias that changes with the tokens is content, not position).

A layer is the outermost entry of a layer list being run (``model.layers.3``), as in :mod:`survey.probe`; the
input a layer's attention is compared on is the first floating-point tensor handed to that entry (vLLM's
decoder layers take ``(positions, hidden_states, residual)``); where vLLM splits each of the config's layers into
several entries (:data:`SPLIT_LAYERS`), an entry is numbered as the config's layer it belongs to. Every
``torch.nn.functional.embedding`` lookup is recorded (a learned position table is read at the positions plus its
offset), and so is the output of every module whose class name says it is a positional embedding.

vLLM's ALiBi is added inside its attention kernels from the slopes the layer was built with, as
``slope × (key slot − tokens already cached)``: from the key's slot in the sequence, whatever the positions.
For a model whose attention takes ALiBi slopes the recorder hands that bias to the comparison, and run A's
positions are the slots ``0 … T−1``; the cases below set the positions apart from the slots.

Every call of a rotary module is recorded too (:func:`_rotary_hooks`): the query and key it was handed and what it
returned, as a :class:`survey.probe.Applied` of the layer being run (and every call of a transformers modeling
module's rotary apply function, where vLLM runs a language model through its Transformers backend: PaliGemma's),
so that :func:`survey.rotation.check_map` compares the rotation as a map on the projection's own channel order (a
reference taken after vLLM's rotation at position 0 would hide any permutation of channels: a half, an interleaved
and a deinterleaved claim agree on it).

After these runs, the same tokens run once per case of :mod:`survey.cases` that vLLM's inputs can state
(:func:`cases_for`): vLLM's forward takes the positions explicitly and no attention mask or cache (its attention
metadata says which tokens a sequence holds), so the cases are the position ids alone: the ids up to each length
the config states less one, itself and plus one, twice the largest, 131071, and two sequences' ids packed into one
(gapped ids). The left-padded, masked and decoding cases state a mask or a cache: they are not run. A case whose
ids lie past the rows of a rotary module's cache (vLLM sizes it by the config's length) is recorded with vLLM's
error, not compared.

The positions vLLM is handed are not always the ids transformers takes for the same rows. vLLM's RoBERTa counts
them from 0 and adds ``pad_token_id + 1`` itself (:data:`OFFSET_BY_ENGINE`); transformers' RoBERTa takes its
table's rows as ids (refpos's ``row_ids``). The probe states, as the ids refpos is asked about, what transformers
would be handed for the rows vLLM reads: vLLM's positions plus that offset (:func:`id_offset`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from survey import probe as survey_probe
from survey.probe import Call, Case, Probe, Recorder, Run, _np

#: class names of vLLM's rotary modules (``vllm.model_executor.layers.rotary_embedding``)
ROTARY = ("Rotary", "RoPE", "Rope")


class Session:
    """The recorder of the run in progress: :func:`record` (given to ``record_attention``) files each attention
    call under it."""

    recorder: ClassVar[Recorder | None] = None
    inputs: ClassVar[dict[str, list[np.ndarray]]] = {}


def record(module: Any, call: Call) -> None:
    """File one recorded attention call (the stand-in's) with its layer and the input of that layer (its digest,
    and the input itself where the run keeps inputs)."""
    recorder = Session.recorder
    if recorder is None:
        return
    call.path = recorder.names.get(id(module), call.path)
    call.layer = recorder.context[0] if recorder.context else None
    if recorder.context:
        path, index, _ = recorder.context[0]
        seen = Session.inputs.get(f"{path}.{index}")
        if seen:
            recorder.run.digests.setdefault(call.path, []).append(survey_probe.digest(seen[-1]))
            if recorder.keep_inputs:
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


def cache_rows(model: Any) -> int | None:
    """The fewest positions a rotary module of ``model`` holds in its cosine and sine cache (None: none has one)."""
    import torch

    rows = [int(cache.shape[0]) for m in rotary_modules(model)
            if isinstance(cache := getattr(m, "cos_sin_cache", None), torch.Tensor) and cache.ndim == 2]
    return min(rows) if rows else None


#: vLLM model classes whose layer list splits each decoder layer of the config into blocks of its own, and into
#: how many: ``Cosmos3EdgeForCausalLM`` builds Cosmos3 Edge's text model as Nemotron-H layers, an attention block
#: then an MLP block for each layer the config counts (``cosmos3_edge.py``: ``_to_nemotron_h_config`` sets
#: ``layers_block_type = ["full_attention", "mlp"] * num_hidden_layers``), so its attention block ``2i`` is the
#: config's layer ``i``
SPLIT_LAYERS = {"Cosmos3EdgeForCausalLM": 2}


def split_lists(model: Any) -> dict[str, int]:
    """Each layer list of ``model`` inside a module of :data:`SPLIT_LAYERS`, with its blocks per config layer."""
    import torch

    owners = {name: SPLIT_LAYERS[type(m).__name__] for name, m in model.named_modules()
              if type(m).__name__ in SPLIT_LAYERS}
    return {path: blocks for path, m in model.named_modules() if isinstance(m, torch.nn.ModuleList)
            for owner, blocks in owners.items() if not owner or path.startswith(f"{owner}.")}


def block_path(name: str, lists: dict[str, int]) -> str:
    """Module path ``name`` with the index of a block of a list of ``lists`` replaced by its config layer's
    (``layers.8.mixer.attn`` with two blocks per layer is ``layers.4.mixer.attn``)."""
    for prefix, blocks in lists.items():
        if name.startswith(f"{prefix}."):
            index, dot, tail = name[len(prefix) + 1:].partition(".")
            if index.isdigit():
                return f"{prefix}.{int(index) // blocks}{dot}{tail}"
    return name


def renumber(run: Run, lists: dict[str, int]) -> None:
    """Each record of ``run`` made in a list of ``lists`` numbered as the config's layer (its block's index
    divided by the blocks per layer), in place: the layer of every call, rotary call and builder, and the module
    paths that name the block (:func:`block_path`), as keys too."""
    if not lists:
        return
    for record in (*run.calls, *run.builders, *run.applied):
        if record.layer is not None and record.layer[0] in lists:
            record.layer = (record.layer[0], record.layer[1] // lists[record.layer[0]])
    for call in run.calls:
        call.path = block_path(call.path, lists)
    for record in (*run.builders, *run.applied):
        record.caller = block_path(record.caller, lists)
    for table in (run.inputs, run.digests, run.neutralized, run.handed, run.positional):
        renamed = {block_path(key, lists): value for key, value in table.items()}
        table.clear()
        table.update(renamed)


def unpadded(run: Run, model: Any) -> None:
    """Each lookup of ``run`` in a table of vLLM's ``VocabParallelEmbedding`` given the rows the table was built for
    (``num_embeddings``), in place: the layer pads its weight to a multiple of 64 rows (CLIP's 77 positions are
    held in 128), and the rows past the table's own are padding that vLLM serves no position of (its length is the
    config's, ``max_model_len``)."""
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    rows = {f"{name}.weight": int(m.num_embeddings) for name, m in model.named_modules()
            if isinstance(m, VocabParallelEmbedding)}
    for lookup in run.lookups:
        if lookup.table in rows and lookup.rows > rows[lookup.table]:
            lookup.rows = rows[lookup.table]


#: vLLM's embedding modules that add an offset to the positions they are handed, by class name, and the config
#: key the offset is one past: ``RobertaEmbedding.forward`` reads its table at ``position_ids + padding_idx + 1``
#: (``vllm/model_executor/models/roberta.py``), where transformers' RoBERTa reads it at the ids it is handed
OFFSET_BY_ENGINE = {"RobertaEmbedding": "pad_token_id"}


def id_offset(model: Any, hf_config: Any) -> int:
    """What to add to the positions vLLM is handed for the ids transformers takes for the same table rows: one
    past the config's :data:`OFFSET_BY_ENGINE` key where ``model`` holds such a module, else 0."""
    keys = {OFFSET_BY_ENGINE[type(m).__name__] for m in model.modules() if type(m).__name__ in OFFSET_BY_ENGINE}
    if not keys:
        return 0
    (key,) = keys
    return int(getattr(hf_config, key)) + 1


def offset_notes(model: Any, hf_config: Any) -> list[str]:
    """The row's note where the probe's ids are vLLM's positions plus an offset (:func:`id_offset`)."""
    offset = id_offset(model, hf_config)
    return [f"ids stated to refpos: vLLM's positions + {offset}, the table rows vLLM reads (its embedding adds "
            "pad_token_id + 1 to the positions it is handed)"] if offset else []


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


def _caller(module: Any) -> Any:
    """The module whose forward called ``module`` (the first frame up the stack whose ``self`` is another module)."""
    import sys

    import torch

    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, torch.nn.Module) and owner is not module:
            return owner
        frame = frame.f_back
    return None


def _as_heads(x: Any, tokens: int, width: int) -> np.ndarray:
    """A rotary module's query or key, ``(T, H·d)`` or ``(T, H, d)``, as ``(1, H, T, d)``: the layout
    :func:`survey.rotation.check_map` reads."""
    width = width if x.shape[-1] % width == 0 else x.shape[-1]
    return _np(x.reshape(tokens, -1, width).permute(1, 0, 2))[None]


def _rotary_hooks(model: Any, recorder: Recorder) -> list[Any]:
    """Hooks on every rotary module recording each call as a :class:`survey.probe.Applied`: the query and key it
    was handed (copied before the call) and those it returned, the layer being run, and the calling module."""
    import torch

    handles, pending = [], []

    def before(module: Any, args: tuple, kwargs: dict) -> None:
        given = [*args, *(kwargs[k] for k in ("positions", "query", "key") if k in kwargs)]
        tensors = [t for t in given if isinstance(t, torch.Tensor)]
        if len(tensors) < 2:
            pending.append(None)
            return
        positions, rotated = tensors[0], [t for t in tensors[1:3] if t.is_floating_point()]
        tokens, width = positions.shape[-1], int(getattr(module, "head_size", 0) or rotated[0].shape[-1])
        caller = _caller(module)
        pending.append((tokens, width, [_as_heads(t, tokens, width) for t in rotated],
                        recorder.names.get(id(caller), "") if caller is not None else ""))

    def after(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        seen = pending.pop() if pending else None
        if seen is None:
            return
        tokens, width, inputs, caller = seen
        outputs = [o for o in (output if isinstance(output, (tuple, list)) else (output,))
                   if isinstance(o, torch.Tensor)][: len(inputs)]
        name = f"{type(module).__module__}.{type(module).__name__}"
        recorder.run.applied.append(survey_probe.Applied(
            name, inputs[: len(outputs)], [_as_heads(o, tokens, width) for o in outputs],
            recorder.context[0] if recorder.context else None, caller))
    for module in rotary_modules(model):
        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    return handles


def _forward(model: Any, config: Any, ids: np.ndarray, positions: np.ndarray, neutral: bool,
             keep_inputs: bool = True) -> Run:
    """One forward pass recorded (module docstring): ``keep_inputs`` keeps each layer's input (else its digest
    alone, :func:`survey.probe.digest`)."""
    import torch

    from survey.vllm_engine import engine

    recorder = Recorder(model, neutral=False, keep_inputs=keep_inputs)
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
    if not neutral:
        handles += _rotary_hooks(model, recorder)
    axes = mrope_axes(model)
    given = np.broadcast_to(positions, (axes, positions.size)).copy() if axes > 1 else positions
    lookup = recorder.embedding(torch.nn.functional.embedding)
    # a language model vLLM runs through its Transformers backend rotates with transformers' apply functions
    applies = [t for t in recorder.patches() if survey_probe.APPLY.fullmatch(t[1])] if not neutral else []
    try:
        with survey_probe._patched([(torch.nn.functional, "embedding", lookup), *applies]), \
                (_identity_rotary(model) if neutral else contextlib.nullcontext()):
            engine.forward(model, config, ids, given)
    finally:
        for handle in handles:
            handle.remove()
        Session.recorder = None
    recorder.layers()
    unpadded(recorder.run, model)
    renumber(recorder.run, split_lists(model))
    if neutral:
        for call in recorder.run.calls:
            recorder.run.neutralized[call.path] = ["rotary_emb"]
    return recorder.run


def cases_for(hf_config: Any) -> list[Case]:
    """The cases of :mod:`survey.cases` that vLLM's inputs state (module docstring), not yet run: each threshold
    case, and the packed one (two sequences' ids ``0 1 2 3 0 1 2 3``, no mask: vLLM's forward takes none)."""
    from survey import cases

    out = [Case(name, ids, np.arange(ids.size), None) for name, ids in cases.threshold_ids(hf_config.to_dict())]
    half = cases.CASE_TOKENS // 2
    packed = np.concatenate([np.arange(half), np.arange(half)]).astype(np.int64)
    return [*out, Case("packed", packed, np.arange(packed.size), None)]


def run_case(model: Any, config: Any, case: Case, ids: np.ndarray) -> Case:
    """Run one case (in place) on the probe's first tokens, its run stored in float32 (:mod:`survey.cases`);
    vLLM's error where it does not run the ids (a rotary cache of fewer rows) is the case's."""
    from survey import cases

    tokens = ids[: case.slots.size] if ids.size >= case.slots.size else np.resize(ids, case.slots.size)
    case.input_ids = tokens
    rows = cache_rows(model)
    if rows is not None and int(case.position_ids.max()) >= rows:
        case.error = (f"vLLM's rotary cache holds positions 0 … {rows - 1} (built from the config's length): it "
                      "rotates no position past them")
        return case
    try:
        case.run = cases._as_float32(_forward(model, config, tokens, case.position_ids, neutral=False,
                                              keep_inputs=False))
    except Exception as exc:  # vLLM's own error for these ids: the case is not observed
        case.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return case


#: how far below the config's position limit run A stays where a learned table is read past the position
TABLE_MARGIN = 16


class _Limited:
    """A config whose position limits (:data:`survey.probe.POSITION_LIMITS`) are ``margin`` smaller."""

    def __init__(self, config: Any, margin: int) -> None:
        self.config, self.margin = config, margin

    def to_dict(self) -> dict[str, Any]:
        values = self.config.to_dict()
        for d in (values, values.get("text_config") or {}):
            for key in survey_probe.POSITION_LIMITS:
                if isinstance(d.get(key), int) and not isinstance(d[key], bool):
                    d[key] -= self.margin
        return values


class _Rows:
    """A config whose one position limit is ``rows``: the rows of the model's rotary cache, where vLLM sizes it by a
    length :data:`survey.probe.POSITION_LIMITS` does not name (DBRX's ``max_seq_len``), so that run A's positions
    lie in it as they lie below a named limit."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def to_dict(self) -> dict[str, Any]:
        return {"max_position_embeddings": self.rows}


def probe(model: Any, config: Any, hf_config: Any) -> Probe:
    """Runs A, B, C and E of ``model`` (built under ``config`` from ``hf_config``) and its cases, as a
    :class:`survey.probe.Probe`."""
    positions = survey_probe.positions_for(hf_config)
    p = np.arange(len(positions), dtype=np.int64) if has_alibi(model) else np.asarray(positions, dtype=np.int64)
    ids = survey_probe.token_ids(hf_config, p.size)
    try:
        run_a = _forward(model, config, ids, p, neutral=False)
    except IndexError:  # a learned table read at the position plus an offset (RoBERTa's p + 2) has no row there
        p = np.asarray(survey_probe.positions_for(_Limited(hf_config, TABLE_MARGIN)), dtype=np.int64)
        try:
            run_a = _forward(model, config, ids, p, neutral=False)
        except IndexError:  # a rotary cache sized by a length the limits do not name (DBRX's max_seq_len)
            rows = cache_rows(model)
            if rows is None:
                raise
            p = np.asarray(survey_probe.positions_for(_Rows(rows)), dtype=np.int64)
            run_a = _forward(model, config, ids, p, neutral=False)
    run_b = _forward(model, config, ids, np.zeros_like(p), neutral=False)
    run_c = _forward(model, config, ids, p, neutral=True)
    run_e = _forward(model, config, survey_probe.token_ids(hf_config, p.size, seed=2), p, neutral=False)
    lists = split_lists(model)  # the calls' paths name the config's layers (renumber): so do the modules'
    modules = {block_path(name, lists): m for name, m in model.named_modules()}
    paths = list(dict.fromkeys(c.path for c in run_a.calls))
    described = {path: (type(m).__name__, any(True for _ in m.parameters())) for path, m in modules.items()
                 if survey_probe.POSITIONAL_MODULE.fullmatch(type(m).__name__)}
    more = [run_case(model, config, case, ids) for case in cases_for(hf_config)]
    offset = id_offset(model, hf_config)  # the ids transformers takes for the rows vLLM reads (module docstring)
    for case in more:
        case.position_ids = case.position_ids + offset
    return Probe(p + offset, True, run_a, run_b, run_c, None, run_e,
                 {path: type(modules[path]).__name__ for path in paths if path in modules}, ids, described, None,
                 more)
