"""refpos's answer for a vision, audio or feature model, judged against its recorded run (:mod:`survey.pixels`).

refpos is asked (:func:`refpos.model_positions`) about the tiny config that ran; a refusal (a record ``unknown`` or
``refused``, a key it reports as not modelled that is not the attention core's) makes the row ``refused``. Else
every record of a kind with a comparison (:data:`survey.pixel_kinds.COMPARISONS`) is compared with the site it
accounts for, and then the run as a whole:

* a position site that no record accounts for (a table, a bias, a position module in the model, where refpos's
  answer has nothing) makes the row ``wrong``;
* a stack refpos answers ``no_attention`` for whose model has attention modules makes it ``wrong``;
* layers refpos answers by stage (layer type ``stage_<s>``) are the run's attention cores, as many and with each
  stage's heads, or the row is ``wrong`` (:mod:`survey.pixel_stages`; ``not reached`` where the run recorded none).

*Exact*, for a model without positional encoding, means: refpos answers ``none`` (attention without positions)
or ``no_attention`` for every layer, the model's forward ran at both sizes, no parameter, buffer or module of the
model is named for positions (:data:`survey.pixels.POSITION`), and, for ``no_attention``, no module class is named
for attention. A convolution still sees where the image's border is (its zero padding); that is no positional
encoding and refpos does not claim one. The wrong answers such a row must tell apart are a claimed learned grid
at the input (no table to find) and the other of ``none`` and ``no_attention``.

A record of a kind without a comparison (a decomposed relative position) leaves the row ``not reached``, naming it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from survey.claims import layers_summary, refused_layers, without_repeats
from survey.pixel_kinds import COMPARISONS, Outcome
from survey.pixel_stages import cores_are_the_stages, stage_outcomes
from survey.pixels import PixelRun, observed_labels

#: how the cause of a row begins whose observation cannot tell refpos's answer from some wrong one (as
#: :data:`survey.run.SURVIVED`)
SURVIVED = "the survey cannot tell this answer from wrong ones"
#: the kinds that add no position: judged by the run as a whole
NO_POSITIONS = ("none", "no_attention")


def refusals(layers: list[Any], model_type: str, not_modelled: dict[str, str]) -> list[str]:
    """What refpos refuses of ``layers`` (a whole answer's, or one part's) and the keys it does not model beside
    them (``not_modelled``, the attention core's keys left out): each once."""
    from refpos.models.position_keys import ATTENTION_ONLY

    refused = refused_layers(layers)
    refused += [f"model_type {model_type!r} is not in the family table; unknown: " + ", ".join(r.unknown)
                for r in layers if r.kind == "unknown"]
    refused += [f"{key}: {what}" for key, what in not_modelled.items() if key.rsplit(".", 1)[-1] not in ATTENTION_ONLY]
    return without_repeats(refused)


@dataclass(frozen=True)
class Summary:
    """The outcomes of one run's records taken together: the first ``wrong``, else the first ``not reached``
    (``None`` when every outcome is exact), the largest error, the wrong answers tried and those graded exact."""

    failed: Outcome | None
    max_error: float | None
    tried: int
    survived: tuple[str, ...]


def summary(outcomes: list[Outcome]) -> Summary:
    """:class:`Summary` of ``outcomes`` (:func:`judge_records`)."""
    errors = [o.error for o in outcomes if o.error is not None]
    failed = next((o for status in ("wrong", "not reached") for o in outcomes if o.status == status), None)
    return Summary(failed, max(errors) if errors else None, sum(o.tried for o in outcomes),
                   tuple(name for o in outcomes for name in o.survived))


def whole_run(records: list[Any], run: PixelRun, free: list[Any]) -> Outcome:
    """The run as a whole (module docstring): sites no record accounts for, attention where none is claimed, and
    the wrong answers of a model without positions."""
    if free:
        return Outcome("wrong", "position sites refpos's answer does not account for: "
                       + ", ".join(site.path for site in free[:4]) + (" …" if len(free) > 4 else ""))
    kinds = {r.kind for r in records}
    if kinds == {"no_attention"} and run.attention:
        return Outcome("wrong", "refpos answers no attention; transformers' model has " + ", ".join(run.attention))
    if not kinds <= set(NO_POSITIONS):
        return Outcome("exact")
    if "none" in kinds and not run.attention:
        return Outcome("not reached", "refpos answers attention without positions; no module class of the model is "
                       "named for attention (the survey cannot find its attention)")
    # the wrong answers of a model without positions, each with whether the run tells it apart
    told = {"a learned grid at the input": not run.sites}
    if "no_attention" in kinds:
        # the attention modules are the stages' alone: a layer more answered none would find no core
        told["attention without positions"] = not run.attention or cores_are_the_stages(records, run)
    if "none" in kinds:
        told["no attention"] = bool(run.attention)
    return Outcome("exact", tried=len(told), survived=[name for name, apart in told.items() if not apart])


def judge_records(records: list[Any], run: PixelRun, whole: PixelRun | None = None) -> list[Outcome]:
    """One outcome per compared record, then the run as a whole's (:func:`whole_run`): of ``whole`` where given (a
    part's view of its composite's run, :meth:`survey.within_parts.PartRun.own_run`: the sites the records must
    account for and the attention classes), each record compared against all of ``run``."""
    whole = run if whole is None else whole
    free = list(whole.sites)
    outcomes = []
    for record in records:
        if record.kind in NO_POSITIONS:
            continue
        comparison = COMPARISONS.get(record.kind)
        if comparison is None:
            outcomes.append(Outcome("not reached", f"{record.stack} layer {record.index}: the survey has no "
                                    f"comparison for {record.kind} on {run.input_name}"))
            continue
        outcome = comparison.judge(record, run, free)
        outcomes.append(outcome)
        free = [site for site in free if site.path not in outcome.sites]
    if all(o.status != "not reached" for o in outcomes):
        outcomes.append(whole_run(records, whole, free))
    return outcomes


def judge_pixels(row: Any, config: dict[str, Any], run: PixelRun, within: Any = None) -> None:
    """Fill ``row`` (a :class:`survey.run.Row`) with refpos's answer for ``config`` judged against ``run``; where
    ``run`` is a composite's and ``config`` one of its parts' (``within``, a :class:`survey.within_parts.PartRun`),
    against the part's sites (:mod:`survey.within_parts`)."""
    import refpos
    from survey.adaptor import is_refusal

    row.observed = observed_labels(run) if within is None else within.observed()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            answer = refpos.model_positions(config)
    except (ValueError, TypeError, KeyError) as exc:
        message = f"{type(exc).__name__}: {exc}"
        row.status, row.cause = ("refused" if is_refusal(message, str(config.get("model_type"))) else "error"), message
        return
    records = list(answer.layers)
    row.claimed = list(dict.fromkeys(r.kind for r in records))
    row.layers = layers_summary(records)
    refused = refusals(records, answer.model_type, answer.not_modelled)
    if refused:
        row.status, row.cause = "refused", "; ".join(refused)
        return
    if not records:
        row.status, row.cause = "not reached", "refpos resolved no layer to compare"
        return
    if within is None:
        judged = summary(judge_records(records, run) + stage_outcomes(records, config, run))
    else:
        placed = within.placed(records)
        judged = summary(judge_records(placed, run, within.own_run()) + within.attention_outcomes(placed))
    row.max_error, row.mutants, row.survived = judged.max_error, judged.tried, list(judged.survived)
    if judged.failed is not None:
        row.status, row.cause = judged.failed.status, judged.failed.cause
        return
    if row.survived:
        row.status = "not reached"
        row.cause = (f"{SURVIVED}: {len(row.survived)} of {row.mutants} wrong answers graded exact too ("
                     + ", ".join(row.survived) + ")")
        return
    row.status, row.cause = "exact", ""
