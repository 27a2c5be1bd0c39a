"""One model type surveyed: its tiny config, refpos's answer, transformers' run, and the verdict.

Statuses (:data:`STATUSES`), decided in this order:

``refused``
    refpos declines by name (an unknown model type, a key it does not model): nothing to compare. When
    transformers could be run, the row says whether refpos's tentative answer would have matched.
``error``
    refpos raised an exception that is not a refusal on a config transformers builds and runs.
``not reached``
    transformers' side could not be run or observed generically; the row says why (and what refpos raised,
    if it did: on a config transformers cannot run, that is no error of refpos's).

A composite that does not build or run from its own config is run as its language model alone
(:func:`build_language_model`), the row noting it: refpos's answer for a composite is its language model's.
``wrong``
    some layer's claim differs from what transformers computed (the cause names the first).
``exact``
    every layer's claim matches within its bound, and every wrong answer derived from refpos's
    (:mod:`survey.mutants`) is a mismatch on the same observation; where one is graded exact too, the
    row is ``not reached`` (the survey cannot tell), naming it.

A model type is built by :func:`build` from the tiny config (:mod:`survey.tiny`), with the class, config and
inputs :mod:`survey.building` chooses (and the inputs :mod:`survey.feeding` states for a few model types).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from survey import adaptor, building, catalogue, compare, mutants, observed, pixels, probe, table, tiny, towers, within
from survey.claims import layers_summary
from survey.feeding import feeding, wrap
from survey.within_parts import PART, observe_part

STATUSES = ("exact", "refused", "wrong", "error", "not reached")
#: how the cause of a row begins whose observation cannot tell refpos's answer from some wrong one
SURVIVED = "the survey cannot tell this answer from wrong ones"
#: the largest model a strength may build (parameters): a default geometry beyond it is not run
MAX_PARAMETERS = 700_000_000


@dataclass
class Row:
    """One model type's line of the survey table."""

    model_type: str
    status: str
    file: str = ""  # transformers/models/<file> of the model class run
    observed: list[str] = field(default_factory=list)  # encodings seen in transformers' run
    claimed: list[str] = field(default_factory=list)  # kinds of refpos's per-layer answer
    max_error: float | None = None
    cause: str = ""
    strength: str = ""  # which shrink built (survey.tiny.STRENGTHS)
    layers: str = ""  # per-layer summary: "decoder: rope x8"
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: of an exact answer: how many wrong answers (:mod:`survey.mutants`) were tried on the observation, and
    #: those graded exact all the same (survey defects: the row is then not exact)
    mutants: int = 0
    survived: list[str] = field(default_factory=list)
    #: the engine whose code was observed (``transformers``, or ``vllm``: :mod:`survey.vllm_engine`), for an engine
    #: that serves checkpoints by architecture the architecture built, and a digest of what it computed
    #: (:func:`survey.observed.fingerprint`)
    engine: str = "transformers"
    architecture: str = ""
    fingerprint: str = ""
    #: a composite's towers (:mod:`survey.towers`) by their sub-config's path: how each came out
    #: (:attr:`survey.towers.TowerVerdict.outcome`)
    towers: dict[str, str] = field(default_factory=dict)
    #: the per-layer comparison (not stored: ``python -m survey show`` prints it)
    verdict: Any = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("verdict")
        out["seconds"] = round(self.seconds, 2)
        if self.max_error is not None:
            out["max_error"] = float(f"{self.max_error:.3g}")
        return out


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:240]}"


def build(config0: Any, row: str | None = None) -> tuple[Any, Any, Any, str]:
    """``(config, model, probe, strength)`` of the first strength that builds and runs, the model fed as
    :mod:`survey.feeding` states for the row of model type ``row`` (``config0``'s where None); raises
    :class:`probe.NotReached` with the reasons of every strength otherwise."""
    import torch

    reasons = []
    for strength in tiny.STRENGTHS:
        try:
            try:
                config, cls, held, model = building.tiny_model(config0, strength, MAX_PARAMETERS)
            except building.NoModelClass:
                raise probe.NotReached(within.NO_MODEL_CLASS) from None
            if tiny.fit_sections(model, config):
                torch.manual_seed(0)
                model = cls._from_config(held, attn_implementation="eager")
            if (how := feeding(row or config0.model_type, held)) is not None:
                model = wrap(model, held, how)
            try:
                return config, model, probe.probe(model, held), strength
            except Exception as exc:  # a forward that refuses its ids alone: fed their embeddings, or companions
                refuses_ids = isinstance(exc, ValueError) and "input_ids" in str(exc)
                if refuses_ids and building.token_embedding(model) is not None:
                    fed = building.fed(model, held, embeddings=True)
                elif building.companions(model, str(exc)):
                    fed = building.fed(model, held, error=str(exc))
                else:
                    raise
                return config, fed, probe.probe(fed, held), strength
        except probe.NotReached:
            raise
        except Exception as exc:  # transformers' own errors for a geometry: try the next strength
            reasons.append(f"{strength}: {_one_line(exc)}")
    raise probe.NotReached("no geometry built and ran (" + "; ".join(reasons) + ")")


def build_language_model(config0: Any, composite: str) -> tuple[dict[str, Any], Any, str, str]:
    """A composite that does not build or run from its config alone (its forward needs pixel values, its
    validators tie the language model to a tower, its tower needs timm, it only generates): its language model
    alone, built from the composite's ``text_config`` (:func:`survey.building.language_path`) by :func:`build` --
    what the composite runs on text tokens.

    Returns ``(config dict, probe, strength, note)``: the composite's config dict shrunk at that strength with
    the language model's config in its place (what refpos is asked about), and the note the row keeps;
    raises :class:`probe.NotReached` (with ``composite``, the composite's reasons) when that fails too."""
    path = building.language_path(config0)
    if path is None:
        raise probe.NotReached(composite)
    text = building.language_config(config0)
    try:
        config, model, run, strength = build(text, config0.model_type)
    except probe.NotReached as exc:
        raise probe.NotReached(f"{composite}; its language model alone: {exc}") from None
    values = tiny._shrunk_values(config0, strength)
    owner = values
    for name in path[:-1]:
        owner[name] = owner = dict(owner[name])
    owner[path[-1]] = {**config.to_dict(), "model_type": text.model_type}
    note = (f"{table.LANGUAGE_ALONE} ({type(model).__name__}, from {'.'.join(path)}): the composite was not run: "
            f"{composite}")
    return values, run, strength, note


def observe(name: str) -> tuple[dict[str, Any], Any]:
    """``(config dict, probe)`` of model type ``name``: the tiny config that built, and its recorded runs."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        config, _, run, _ = build(catalogue.find(name).config())
    return config.to_dict(), run


@dataclass
class Observation:
    """transformers' side of one model type: the config refpos is asked about, the probe (None when the
    model could not be run) and what the row says about it so far."""

    config: dict[str, Any]
    run: Any
    row: Row
    #: the engine whose code was observed (another engine, vLLM, fills the same records with its own name)
    engine: str = "transformers"
    #: the networks beside the language model (a vision or audio tower), one probe per stack name as
    #: ``model_positions(...).parts`` names them; empty until an observer runs them
    stacks: dict[str, Any] = field(default_factory=dict)
    #: a composite's towers run on their own inputs, by the path of their sub-config (:mod:`survey.towers`)
    towers: dict[str, Any] = field(default_factory=dict)
    #: a composite's second sequence stacks run on token ids, by the path of their sub-config
    #: (:mod:`survey.sequence_towers`)
    sequences: dict[str, Any] = field(default_factory=dict)


def survey_one(model_type: catalogue.ModelType) -> Row:
    """The survey row of one model type (see the module docstring for the statuses)."""
    started = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        seen = observe_type(model_type)
        row = judge(seen)
    row.seconds = time.perf_counter() - started
    return row


def observe_quietly(model_type: catalogue.ModelType) -> Observation:
    """:func:`observe_type` with transformers' warnings and prints silenced."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return observe_type(model_type)


def judge_quietly(seen: Observation) -> Row:
    """:func:`judge` with warnings and prints silenced."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return judge(seen)


def observe_type(model_type: catalogue.ModelType) -> Observation:
    """Build the model type tiny and run it recorded (:func:`_observe_type`), and its second sequence stacks
    (:func:`observe_sequences`)."""
    seen = _observe_type(model_type)
    if seen.config and not seen.stacks:
        seen.sequences = observe_sequences(model_type, seen)
    return seen


def observe_sequences(model_type: catalogue.ModelType, seen: Observation) -> dict[str, Any]:
    """A composite's second sequence stacks run on token ids (:func:`survey.sequence_towers.observe_sequences`); a
    failure of the survey's own code there is a note, and the rest of the observation stands."""
    from survey import sequence_towers

    try:
        return sequence_towers.observe_sequences(model_type.config(), seen.config, MAX_PARAMETERS)
    except Exception as exc:  # a bug of the survey itself must not lose the language model's run
        seen.row.notes.append("sequence stacks not observed: survey failed: " + _one_line(exc))
        return {}


def _observe_type(model_type: catalogue.ModelType) -> Observation:
    """Build the model type tiny and run it recorded (:func:`build`); the row's transformers columns."""
    row = Row(model_type.name, "not reached")
    try:
        config0 = model_type.config()
    except Exception as exc:
        row.cause = "its config class does not build with defaults: " + _one_line(exc)
        return Observation({}, None, row)
    try:
        config, model, run, row.strength = build(config0)
        row.file = catalogue.modeling_file(type(model))
        row.observed = observed.observed_kinds(run)
        return Observation(config.to_dict(), run, row, towers=observe_towers(config0, row))
    except probe.NotReached as exc:
        try:
            values, run, row.strength, note = build_language_model(config0, str(exc))
            row.file = catalogue.modeling_file(building.model_class(building.language_config(config0)))
            row.observed = observed.observed_kinds(run)
            row.notes.append(note)
            return Observation(values, run, row, towers=observe_towers(config0, row))
        except probe.NotReached as inner:
            row.cause = f"transformers not run: {inner}"
            row.notes.append(row.cause)
            if str(exc).startswith(pixels.NO_TOKEN_IDS) or str(exc).startswith("no geometry built"):
                found = pixels.observe_row(config0, row, MAX_PARAMETERS)  # its pixels, audio or features
                if found is not None:
                    return Observation(found[0], None, row, stacks={pixels.STACK: found[1]})
            if str(exc) == within.NO_MODEL_CLASS:  # a part: built in its composite, judged on its own sites
                part = observe_part(config0, row, MAX_PARAMETERS)
                if part is not None:
                    return Observation(part[0], None, row, stacks={PART: part[1]})
                if within.observe_within(config0, row, observe_type):
                    return Observation(_tiny_or_default(config0), None, row)
    except Exception as exc:  # a bug of the survey itself must not stop the survey: recorded
        row.cause = "survey failed: " + _one_line(exc)
        row.notes.append(traceback.format_exc(limit=3).splitlines()[-1])
    return Observation(_tiny_or_default(config0), None, row)


def observe_towers(config0: Any, row: Row) -> dict[str, Any]:
    """A composite's towers run on their own inputs (:func:`survey.towers.observe_towers`); a failure of the
    survey's own code there is a note, and the language model's observation stands."""
    try:
        return towers.observe_towers(config0, MAX_PARAMETERS)
    except Exception as exc:  # a bug of the survey itself must not lose the language model's run
        row.notes.append("towers not observed: survey failed: " + _one_line(exc))
        return {}


def _tiny_or_default(config0: Any) -> dict[str, Any]:
    """The config refpos is asked about for a model the survey did not run itself: its tiny geometry where that
    builds, else its defaults."""
    return tiny.shrink(config0, "tiny").to_dict() if _builds(config0) else config0.to_dict()


def judge(seen: Observation) -> Row:
    """refpos's answer for the observed config, compared: a new row with the status (the module docstring)."""
    row = dataclasses.replace(seen.row, notes=list(seen.row.notes))
    if not seen.config:
        return row
    try:
        _judge(row, seen)
    except Exception as exc:  # a bug of the survey itself must not stop the survey: recorded
        row.status, row.cause = "not reached", "survey failed: " + _one_line(exc)
        row.notes.append(traceback.format_exc(limit=3).splitlines()[-1])
    return row


def _judge(row: Row, seen: Observation) -> None:
    if PART in seen.stacks:  # a part run in its composite: judged by its own position sites
        from survey.pixel_compare import judge_pixels

        part = seen.stacks[PART]
        judge_pixels(row, seen.config, part.run, within=part)
        return
    if pixels.STACK in seen.stacks:  # a vision, audio or feature model: judged by its position sites
        from survey.pixel_compare import judge_pixels

        judge_pixels(row, seen.config, seen.stacks[pixels.STACK])
        return
    run = seen.run
    resolution = adaptor.resolve(seen.config)
    row.claimed = resolution.kinds
    row.layers = layers_summary(resolution.layers)
    tower_verdicts = towers.judge_observed(seen.config, seen.towers)
    if seen.sequences:  # the second sequence stacks run on token ids: compared, their refusals dropped or sharpened
        from survey.sequence_towers import judge_sequences

        sequence_verdicts, resolution = judge_sequences(seen.config, seen.sequences, resolution, tower_verdicts)
        tower_verdicts += sequence_verdicts
    compared = tuple(v.stack for v in tower_verdicts)
    row.notes += [note for note in resolution.notes if not _tower_note(note, compared)]
    row.notes += [v.note for v in tower_verdicts]
    row.towers = {v.path: v.outcome for v in tower_verdicts}
    verdict = compare.compare(resolution, run) if run is not None and resolution.layers else None
    if run is not None:
        row.engine, row.fingerprint = seen.engine, observed.fingerprint(run)
    row.verdict = verdict
    if resolution.refused:
        row.status, row.cause = "refused", resolution.refused
        if verdict is not None:
            unreached = [r for r in verdict.layers if r.status == "not reached"]
            alone = any(note.startswith(table.LANGUAGE_ALONE) for note in row.notes)  # not the composite's code
            row.notes.append("its tentative answer " + ("on the language model alone " if alone else "") + (
                "would be wrong: " + verdict.mismatches[0].cause if verdict.mismatches else
                "could not be checked: " + unreached[0].cause if unreached else "would match"))
        return
    if resolution.error and run is not None:
        row.status, row.cause = "error", resolution.error
        return
    if run is None:  # not reached, cause already set
        if resolution.error:
            row.notes.append(f"refpos raised {resolution.error}")
        return
    if verdict is None:  # every layer refpos resolved lies in a stack the survey does not run
        row.status, row.cause = "not reached", "refpos resolved no layer to compare"
        return
    row.max_error = verdict.max_error
    wrong_towers = [v for v in tower_verdicts if v.status == "wrong"]
    if wrong_towers and not verdict.mismatches:
        row.status, row.cause = "wrong", wrong_towers[0].note
        return
    if verdict.mismatches:
        first = verdict.mismatches[0]
        where = f"{first.stack} layer {first.index}" if first.index >= 0 else first.stack
        row.status, row.cause = "wrong", f"{where}: {first.cause}"
        if len(verdict.mismatches) > 1:
            row.notes.append(f"{len(verdict.mismatches)} layers differ")
        return
    unreached = [r for r in verdict.layers if r.status == "not reached"]
    if unreached or not verdict.layers:
        row.status = "not reached"
        row.cause = unreached[0].cause if unreached else "refpos resolved no layer to compare"
        return
    row.mutants, row.survived = mutants.survivors(resolution, run)
    row.notes += mutants.untried(resolution, run)
    exact_towers = [v for v in tower_verdicts if v.status == "exact"]
    row.mutants += sum(v.tried for v in exact_towers)
    row.survived += [f"{v.stack}: {name}" for v in exact_towers for name in v.survived]
    errors = [e for e in (row.max_error, *(v.max_error for v in exact_towers)) if e is not None]
    row.max_error = max(errors) if errors else None
    if row.survived:
        row.status = "not reached"
        row.cause = (f"{SURVIVED}: {len(row.survived)} of {row.mutants} wrong answers graded exact too ("
                     + ", ".join(row.survived) + ")")
        return
    row.status = "exact"
    row.notes += sorted({r.cause.split(": ", 1)[-1] if r.cause.startswith(("run A: ", "ids up to", "decoding",
                                                                           "packed", "left padded")) else r.cause
                         for r in verdict.layers if r.cause})[:8]


def _tower_note(note: str, stacks: tuple[str, ...]) -> bool:
    """Whether ``note`` is the resolution's "not compared" note of a stack in one of the compared ``stacks``."""
    stack, _, rest = note.partition(" stack: ")
    return rest.endswith(adaptor.NOT_RUN) and any(stack == s or stack.startswith(s + ".") for s in stacks)


def _builds(config0: Any) -> bool:
    try:
        tiny.shrink(config0, "tiny")
    except Exception:
        return False
    return True
