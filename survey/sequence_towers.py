"""A composite's second sequence stacks, run on their own token ids and compared as its language model is.

refpos answers some composites with a second RoPE stack that rotates by the tokens' places in a sequence (T5Gemma
2's text encoder, ESMFold 2's ESM C, π0's action expert, Voxtral Realtime's audio encoder, a talker's code
predictor). The token-id run of the composite never reaches it (:func:`survey.adaptor._unrun_sequence_stacks`
refuses it by name), and a tower's run on its own audio or pixels (:mod:`survey.towers`) shows its rotary tables
at most, never its queries and keys. So each such stack is run the way a language model is:

**Observed** (:func:`observe_sequences`). The sub-config holding each such stack (the part's path in refpos's
answer: the one thing read from refpos, which picks what to run and nothing of how), whose model class's forward
takes ``position_ids`` and ``input_ids`` or ``inputs_embeds``, is built at the survey's tiny geometry **from that
sub-config** and probed by :func:`survey.probe.probe` at the probe's position ids, with every case of
:mod:`survey.cases`: through :func:`survey.run.build` where it takes token ids, else fed their embeddings from a
seeded table of its width (:func:`embedded`). A sub-config whose forward takes no position ids (an audio encoder
that rotates by ``arange`` over its frames) is kept with that reason: no input could hand it other positions, and
its tower's run on its own input (:mod:`survey.towers`, the rotation compared as a map at its apply function) is
what compares it (:func:`by_tower`).

**Judged** (:func:`judge_sequences`). For each stack the adaptor refuses as unrun, refpos is asked about the
composite with the sub-config that ran in place; that stack's records become the survey's claims (one stack,
:data:`survey.claims.STACKS`' ``decoder``) and are compared with the probe by :func:`survey.compare.compare`,
their wrong answers by :func:`survey.mutants.survivors`, as the language model's are. A compared stack's refusal
is dropped and its verdict joins the towers' (a wrong one makes the row wrong, a surviving wrong answer makes it
not reached); a stack that could not be compared keeps its refusal, naming why: no run, or layers that read
their positions from an input only the whole composite forms (π0.5's action expert counts the mask over the
prefix before it: run alone, it is handed its own position ids, which says nothing of that count).
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from dataclasses import dataclass
from typing import Any

from survey.adaptor import UNRUN

#: the rows of the seeded table an embeddings-only forward is fed from (the probe's ids are below 1000)
ROWS = 1000
#: the sources a stack run alone is handed: its own position ids (its slot where none)
STANDALONE = ("position_ids", "cache_position")
#: how a sequence stack's key in :attr:`survey.run.Row.towers` ends (its path may also be a tower's)
KEY = " (token run)"
#: how a run's reason says the sub-config's forward takes no position ids (it turns each token by its index)
NO_POSITION_IDS = "'s forward takes no position ids"
#: what a forward fed embeddings needs beside them that bears on its mask alone, by name, made from the ids:
#: DeepSeek-OCR 2's vision encoder attends over its first ``num_patches`` tokens both ways (0: every token causal)
BESIDE = {"num_patches": lambda ids: 0}


@dataclass
class SequenceRun:
    """One sub-config run on token ids (or their embeddings): its config (``None`` when it did not run), its probe,
    the model class, what it was fed, and why it did not run."""

    path: str
    config: dict[str, Any] | None = None
    run: Any = None
    model: str = ""
    fed: str = ""
    why: str = ""
    #: the module of the model that was probed (:func:`inner_stacks`), ``""`` for the model itself
    module: str = ""

    @property
    def key(self) -> str:
        """Its key among a composite's runs: its path, and the module probed where it was not the model."""
        return f"{self.path}/{self.module}" if self.module else self.path


def feeding(cls: Any) -> str:
    """What a forward of ``cls`` is fed: ``input_ids``, ``inputs_embeds``, or ``""`` where it takes no position ids
    or neither."""
    params = inspect.signature(cls.forward).parameters
    if "position_ids" not in params:
        return ""
    return next((name for name in ("input_ids", "inputs_embeds") if name in params), "")


def embedded(model: Any, width: int, name: str = "inputs_embeds") -> Any:
    """``model`` wrapped so that the probe's ids reach a forward that takes embeddings only (as ``name``): each id's
    row of a seeded normal table ``(ROWS, width)``; the mask, position ids and cache switch pass as they are, those
    the model takes, and :data:`BESIDE` where it takes them. The wrapper holds the model as ``model``: its layers keep
    their paths."""
    import torch

    from survey.seeded import seeded_normal

    takes = inspect.signature(model.forward).parameters
    dtype = next(model.parameters()).dtype

    class Embedded(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.register_buffer("table", seeded_normal(7, ROWS, width).to(dtype), persistent=False)

        def forward(self, input_ids: Any, attention_mask: Any = None, position_ids: Any = None,
                    use_cache: Any = None) -> Any:
            given = {"attention_mask": attention_mask, "position_ids": position_ids, "use_cache": use_cache}
            given = {k: v for k, v in given.items() if v is not None and k in takes}
            given.update((key, make(input_ids)) for key, make in BESIDE.items() if key in takes)
            return self.model(**{name: self.table[input_ids]}, **given)

    signature = inspect.signature(Embedded.forward)
    Embedded.forward.__signature__ = signature.replace(parameters=[
        p for name, p in signature.parameters.items() if name in ("self", "input_ids") or name in takes])
    return Embedded()


def inner_stacks(model: Any) -> list[tuple[str, Any, str]]:
    """``(path, module, name of its embeddings input)`` of each outermost module of ``model`` that runs a stack on
    position ids handed to it: its forward takes ``position_ids`` and ``inputs_embeds`` or ``hidden_states``, and it
    holds a layer list and its own rotary module (a class named ``…RotaryEmbedding``), so that the ids it is handed
    are those its layers turn by (Mimi's encoder and decoder transformers, inside a model fed audio)."""
    import torch

    found: list[tuple[str, Any, str]] = []
    for path, module in model.named_modules():
        if not path or any(path.startswith(f"{held}.") for held, _, _ in found):
            continue
        params = inspect.signature(module.forward).parameters
        name = next((n for n in ("inputs_embeds", "hidden_states") if n in params), None)
        children = list(module.children())
        if name is not None and "position_ids" in params and any(
                isinstance(c, torch.nn.ModuleList) for c in children) and any(
                type(c).__name__.endswith("RotaryEmbedding") for c in children):
            found.append((path, module, name))
    return found


def _width(config: Any) -> int:
    for key in ("hidden_size", "d_model", "embed_dim"):
        if isinstance(value := getattr(config, key, None), int):
            return value
    raise ValueError("its config names no width (hidden_size, d_model, embed_dim) to feed embeddings of")


def build_embedded(config0: Any, max_parameters: int, inner: bool = False) -> tuple[Any, list[tuple[str, Any, Any]]]:
    """``(config, [(module path, module, probe)])`` of the first strength at which ``config0``'s model builds and runs
    fed embeddings (:func:`embedded`): the model itself, or (``inner``) each of its :func:`inner_stacks`; raises
    :class:`survey.probe.NotReached` with every strength's reason."""

    from survey import building, probe, tiny
    from survey.run import _one_line

    reasons = []
    for strength in tiny.STRENGTHS:
        try:
            config, _, held, model = building.tiny_model(config0, strength, max_parameters)
            targets = inner_stacks(model) if inner else [("", model, "inputs_embeds")]
            if not targets:
                raise probe.NotReached("none of its modules runs a layer list with its own rotary module on position "
                                       "ids handed to it")
            return config, [(path, module, probe.probe(embedded(module, _width(getattr(module, "config", held)), name),
                                                       held)) for path, module, name in targets]
        except probe.NotReached:
            raise
        except Exception as exc:  # transformers' own errors for a geometry: the next strength
            reasons.append(f"{strength}: {_one_line(exc)}")
    raise probe.NotReached("no geometry built and ran on embeddings (" + "; ".join(reasons) + ")")


def observe_one(config0: Any, path: str, max_parameters: int) -> list[SequenceRun]:
    """The runs of sub-config ``config0`` at ``path`` (module docstring): its model's, or those of the modules that
    run its stacks where the model forms its positions itself (:func:`inner_stacks`); one saying why where none
    ran; none where it has no model class."""
    from survey import building, probe, run

    cls = building.model_class(config0)
    if cls is None:
        return []
    fed = feeding(cls)
    params = [p for p in inspect.signature(cls.forward).parameters if p != "self"]
    if not fed and "position_ids" in params:
        return [SequenceRun(path, model=cls.__name__, why=f"{cls.__name__}'s forward takes neither token ids nor "
                            f"their embeddings ({', '.join(params)})")]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if fed != "input_ids":
                    raise probe.NotReached(f"{cls.__name__}'s forward takes no token ids")
                config, model, probed, _ = run.build(config0)
                ran = [("", model, probed)]
            except probe.NotReached:  # fed embeddings where it takes them (a talker's model has no token table)
                if fed == "input_ids" and "inputs_embeds" not in params:
                    raise
                fed = fed if fed != "input_ids" else "inputs_embeds"
                config, ran = build_embedded(config0, max_parameters, inner=not fed)
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        if not fed:
            why = f"{cls.__name__}{NO_POSITION_IDS} ({', '.join(params)}), and {exc}"
        return [SequenceRun(path, model=cls.__name__, fed=fed, why=why[:400])]
    values = config.to_dict() | {"model_type": config0.model_type}
    out = []
    for module, inner, probed in ran:
        takes = inspect.signature(inner.forward).parameters
        name = fed or ("inputs_embeds" if "inputs_embeds" in takes else "hidden_states")
        model = (f"{cls.__name__}'s {module} ({type(inner).__name__})" if module else
                 type(getattr(inner, "model", inner)).__name__)
        out.append(SequenceRun(path, values, probed, model, name, module=module))
    return out


def sequence_stacks(config: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Stack -> ``(path of its sub-config, the adaptor's refusal of it)`` of each stack of refpos's answer for
    ``config`` that the adaptor refuses as an unrun sequence stack (:func:`survey.adaptor._unrun_sequence_stacks`);
    empty where refpos declines the config."""
    import refpos
    from survey.adaptor import _unrun_sequence_stacks
    from survey.claims import STACKS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            answer = refpos.model_positions(config)
        except (ValueError, TypeError, KeyError):
            return {}
    paths = {stack: path for stack, path, _ in answer.parts}
    others = [r for r in answer.layers if r.stack not in STACKS]
    found = {}
    for stack in dict.fromkeys(r.stack for r in others):
        lines = _unrun_sequence_stacks([r for r in others if r.stack == stack])
        if lines and stack in paths:
            found[stack] = (paths[stack], lines[0])
    return found


def observe_sequences(config0: Any, config: dict[str, Any], max_parameters: int) -> dict[str, SequenceRun]:
    """The sub-configs of ``config0`` holding the stacks refpos answers for ``config`` (the composite's config that
    the row asks about) that the adaptor refuses as unrun sequence stacks (:func:`sequence_stacks`), each run on
    token ids (module docstring), by its path of field names. Which sub-configs is the one thing read from refpos's
    answer: a stack it answers later has no run until observed again, and keeps its refusal."""
    from survey.building import language_path

    language = ".".join(language_path(config0) or ())
    found: dict[str, SequenceRun] = {}
    for path, _ in sequence_stacks(config).values():
        if path == language:  # T5Gemma 2's text encoder: the composite's own run holds it, under another stack
            found[path] = SequenceRun(path, why="it is the composite's language model, whose run is the row's own; "
                                      "that run reaches its layers, and compares the stacks named decoder and "
                                      "encoder only")
            continue
        sub = config0
        for name in path.split("."):
            sub = getattr(sub, name, None)
        if sub is None or not hasattr(sub, "to_dict"):
            found[path] = SequenceRun(path, why=f"the composite's config holds no sub-config at {path}")
            continue
        runs = observe_one(sub, path, max_parameters) or [
            SequenceRun(path, why=f"no model class of {type(sub).__name__} ({sub.model_type})")]
        found.update((seen.key, seen) for seen in runs)
    return found


def claims(records: list[Any]) -> tuple[Any, list[str]]:
    """``(resolution, refusals)``: one stack's records as the survey's claims on one stack (``decoder``: the probe
    of the stack's own model holds no other), read as :mod:`survey.adaptor` reads a language model's."""
    from survey.claims import LayerClaim, Resolution, refused_layers
    from survey.sources import reads_of

    layers = []
    for r in records:
        more = {"reads": reads_of(r)}
        if r.kind in ("rope", "mrope"):
            layers.append(LayerClaim("decoder", r.index, "rope", rope=r.rope, query_scale=r.query_scale,
                                     detail=r.layer_type or "", indexer=getattr(r, "indexer", None), **more))
        elif r.kind == "none":
            layers.append(LayerClaim("decoder", r.index, "none", query_scale=r.query_scale,
                                     detail=r.layer_type or "", **more))
        elif r.kind == "no_attention":
            layers.append(LayerClaim("decoder", r.index, "no_attention", detail=r.mixer))
        elif r.kind not in ("refused", "unknown"):  # no comparison for it here: the stack is not reached
            layers.append(LayerClaim("decoder", r.index, "other", detail=r.kind))
    refused = refused_layers(records) + [f"{r.stack}: not in the family table" for r in records if r.kind == "unknown"]
    return Resolution(tuple(layers)), refused


def judge_sequence(config: dict[str, Any], stack: str, path: str, seen: SequenceRun | None) -> Any:
    """refpos's answer for the stack ``stack`` of the composite ``config``, with the sub-config that ran at ``path``
    in place, compared with that run (module docstring): a :class:`survey.towers.TowerVerdict`."""
    import refpos
    from survey import compare, mutants
    from survey.sources import reads_of
    from survey.towers import TowerVerdict, in_place

    key = (path if seen is None else seen.key) + KEY

    def verdict(status: str, note: str, *measured: Any, ran: bool = True) -> TowerVerdict:
        return TowerVerdict(stack, status, note, *measured, path=key, ran=ran)

    label = f"{stack} stack ({path}"
    if seen is None or seen.run is None:
        why = "not observed" if seen is None else seen.why
        return verdict("not reached", f"{label}): not compared: not run on token ids ({why})", ran=False)
    label += f", {seen.model} on its {seen.fed} at the probe's position ids)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            answer = refpos.model_positions(in_place(config, path, seen.config))
        except (ValueError, TypeError, KeyError) as exc:
            return verdict("refused", f"{label}: refpos: {type(exc).__name__}: {exc}"[:400])
    records = [r for r in answer.layers if r.stack == stack]
    foreign = sorted({s for r in records if r.kind in ("rope", "mrope")
                      for s in reads_of(r)["rotation"][:1] if s not in STANDALONE})
    if foreign:  # positions the whole composite forms (a count over the prefix before the stack's tokens)
        return verdict("not reached", f"{label}: not compared: its layers read their positions from "
                       f"{', '.join(foreign)}, which the composite forms over the whole sequence; run alone the "
                       "stack is handed its own position ids, which say nothing of it")
    resolution, refused = claims(records)
    if refused:
        return verdict("refused", f"{label}: refused by refpos: " + "; ".join(refused))
    if not resolution.layers:
        return verdict("not reached", f"{label}: refpos resolved no layer of it")
    judged = compare.compare(resolution, seen.run)
    if judged.mismatches:
        first = judged.mismatches[0]
        where = f"layer {first.index}" if first.index >= 0 else "the stack"
        return verdict("wrong", f"{label}: {where}: {first.cause}", judged.max_error)
    unreached = [r for r in judged.layers if r.status == "not reached"]
    if unreached:
        return verdict("not reached", f"{label}: not compared: {unreached[0].cause}", judged.max_error)
    tried, survived = mutants.survivors(resolution, seen.run)
    error = "" if judged.max_error is None else f", max error {judged.max_error:.3g}"
    return verdict("exact", f"{label}: compared, exact{error}, {tried} wrong answers tried", judged.max_error, tried,
                   tuple(survived))


def judge_sequences(config: dict[str, Any], sequences: dict[str, SequenceRun], resolution: Any,
                    towers: list[Any] = ()) -> tuple[list[Any], Any]:
    """``(verdicts, resolution)``: each stack the adaptor refuses as unrun (:func:`sequence_stacks`) judged against
    each of its runs (:func:`judge_sequence`: Mimi's two transformers each), and ``resolution`` without the refusal
    of each stack that every run compared (exact or wrong), that of each other one naming why it was not. A stack
    whose forward takes no position ids is compared by its tower's run where that compared it exactly
    (:func:`by_tower`)."""
    verdicts, kept = [], {}
    for stack, (path, line) in sequence_stacks(config).items():
        runs = [seen for key, seen in sequences.items() if key == path or key.startswith(f"{path}/")] or [None]
        found = by_tower(stack, path, runs, towers) or [judge_sequence(config, stack, path, seen) for seen in runs]
        verdicts += found
        short = next((v for v in found if v.status not in ("exact", "wrong")), None)
        if short is not None:  # every run of the stack compared, or its refusal stays, naming why
            why = short.note.split("): ", 1)[-1].removeprefix("not compared: ")
            kept[line] = line.replace(UNRUN, f"not compared: {why}")
        else:
            kept[line] = ""
    if not kept or resolution.refused is None:
        return verdicts, resolution
    lines = [kept.get(line, line) for line in resolution.refused.split("; ")]
    refused = "; ".join(line for line in lines if line) or None
    return verdicts, dataclasses.replace(resolution, refused=refused)


def by_tower(stack: str, path: str, runs: list[SequenceRun | None], towers: list[Any]) -> list[Any]:
    """The verdict of a stack whose forward takes no position ids (an audio encoder: each token turns by its index
    0 … T−1, the slot its claims read where no ids are passed), where its tower's run on its own input
    (:mod:`survey.towers`) compared that stack exactly, its wrong answers caught: every input the stack can be handed
    was then compared. Empty where any run says otherwise."""
    from survey.towers import TowerVerdict

    if not runs or any(seen is None or seen.run is not None or NO_POSITION_IDS not in seen.why for seen in runs):
        return []
    tower = next((v for v in towers if v.path == path and v.stack == stack and v.status == "exact" and v.tried
                  and not v.survived), None)
    if tower is None:
        return []
    return [TowerVerdict(stack, "exact", f"{stack} stack ({path}): not run on token ids ({runs[0].model}"
                         f"{NO_POSITION_IDS}: each token turns by its index); compared on its own input by its "
                         "tower's run, exact", path=path + KEY, ran=False)]
