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

Also recorded, in run A: every embedding lookup, every row of a parameter read at integer positions, the
output of every module whose class name says it is a positional embedding, and every return value of the
modeling module's ALiBi builders and T5-style bucket functions. How each run is recorded: :mod:`survey.recorder`;
the records: :mod:`survey.records`.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np

from survey import boxes, layout_bias
from survey.recorder import (  # noqa: F401  (the records and the recorder, where callers have read them)
    ALIBI,
    APPLY,
    BUCKET,
    EAGER,
    QUERY_KEY,
    ROTARY_KWARGS,
    SWEEP,
    Recorder,
    _forward,
    _identity,
    _np,
    _patched,
    digest,
    removed,
    rotated,
    squeezed,
)
from survey.records import Applied, Built, Call, Case, Lookup, Probe, Run  # noqa: F401

#: the position ids of run A: small ones (where every rule agrees), and large enough ones that a wrong
#: frequency, layout or offset shows (the rotation error bound grows with p; see survey.compare)
POSITIONS = (0, 1, 2, 5, 17, 100, 999, 4001)
#: tokens put before the probe's in run D (models without position ids)
SHIFT = 3
POSITIONAL_MODULE = re.compile(r".*Positional\w*Embedding.*|.*Position\w*Embedding.*")


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
    inputs_a.update(boxes.box_inputs(model, config, ids.size))  # a document model's boxes (survey.boxes)
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
        if "bbox" in inputs_d:
            inputs_d["bbox"] = boxes.resized(inputs_d["bbox"], SHIFT + ids.size)
        run_d = _forward(model, inputs_d, Recorder(model, neutral=False), attention, positional)
    described = {path: (type(m).__name__, any(True for _ in m.parameters())) for path, m in model.named_modules()
                 if POSITIONAL_MODULE.fullmatch(type(m).__name__)}
    from survey import cases

    own_positions = p if taken else np.arange(len(positions))
    more = [cases.run_case(model, case, ids, inputs_a, attention, positional)
            for case in cases.cases_for(config.to_dict(), own_positions, taken)] if with_cases else []
    return Probe(own_positions, taken, run_a, run_b, run_c, run_d, run_e,
                 {path: type(modules[path]).__name__ for path in paths if path in modules}, ids, described, run_own,
                 more, notes=switched(types_before, attention_types(model)),
                 weights=layout_bias.bias_weights(model, config))
