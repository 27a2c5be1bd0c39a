"""The towers of a composite, run on their own inputs and judged as the composite's stacks.

A composite (LLaVA, CLIP, Qwen3-VL, Qwen2-Audio …) is surveyed on token ids: its language model's layers are
compared (:mod:`survey.compare`), and its vision or audio tower is never reached by a token id. So each tower is
run as well, on the inputs its own forward takes, the way a vision or audio model type is
(:func:`survey.pixels.build_pixels`): built at the survey's tiny geometry **from the composite's own
sub-config** (what the composite ships, not the tower class's defaults) and run at its native size and at a size
that forces its positions to be resampled.

**Which sub-configs.** Every config the composite holds (:func:`survey.tiny.sub_config_names`), its language
model's excepted (:func:`survey.building.language_path`), is tried; one whose forward takes no pixel, audio or
feature input (a Q-Former, a text tower, a thinker that is itself a composite), or does not run on one alone (a
VLM inside a retrieval model), is no tower, and its own sub-configs are tried in turn, down to :data:`DEPTH`
levels; one that does not run and holds no tower that does is kept with the reason. Each tower is kept under its
path of field names (``vision_config``, ``thinker_config.audio_config``): the path refpos names its part by
(``refpos.model_positions(...).parts``). Nothing here asks refpos.

**Judged** (:func:`judge_towers`): refpos is asked about the composite's config with the tower's config that ran in
its place, and the records of the part's stack (``vision``, ``vision.input`` …) are judged against the tower's run
by :func:`survey.pixel_compare.judge_records`, as a vision model type's are. A tower's wrong answer makes the row
wrong; its wrong answers graded exact too (mutants that survive) make an exact row ``not reached``, as the language
model's do; a tower refpos refuses, or the survey cannot run or compare, stays a note saying so.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from survey import pixels

#: how deep into sub-configs the towers are looked for (Qwen2.5-Omni's ``thinker_config.audio_config``: 2)
DEPTH = 2
#: the most patches a tower's image is cut into (a 64 × 64 grid: Pixtral's own default, 1024 pixels of 16); a tower
#: whose ``image_size`` gives more (LightOnOCR's Pixtral at 1540 pixels of 14: 110 × 110, nine times the attention)
#: is run at the largest multiple of its patch size within it, its config saying so to refpos as to the model
MAX_PATCHES = 64 * 64


@dataclass
class Tower:
    """One tower of a composite, run on its own inputs: the config that ran (``None`` when none did), its record,
    and why it did not run."""

    path: str
    config: dict[str, Any] | None = None
    run: Any = None
    model: str = ""
    why: str = ""
    #: how its config was changed to bound the run (:func:`within_patches`), or ``""``
    bounded: str = ""


def within_patches(config: Any) -> tuple[Any, str]:
    """``(config, what changed)``: ``config`` itself, or a copy whose ``image_size`` is cut to the largest
    multiple of its ``patch_size`` giving at most :data:`MAX_PATCHES` patches (an int size and patch; a pair, or
    no size, is left as it is)."""
    size, patch = getattr(config, "image_size", None), getattr(config, "patch_size", None)
    if not isinstance(size, int) or not isinstance(patch, int) or patch <= 0 or (size // patch) ** 2 <= MAX_PATCHES:
        return config, ""
    side = int(MAX_PATCHES**0.5) * patch
    bounded = copy.deepcopy(config)
    bounded.image_size = side
    return bounded, f"image_size {size} run as {side}: at most {MAX_PATCHES} patches"


def observe_towers(config0: Any, max_parameters: int, skip: tuple[str, ...] | None = None) -> dict[str, Tower]:
    """Every tower of ``config0`` (module docstring) by its path: run, or the reason it was not.

    ``skip`` is the language model's path (:func:`survey.building.language_path`), never a tower."""
    from survey import building, tiny

    skip = building.language_path(config0) if skip is None else skip
    towers: dict[str, Tower] = {}

    def visit(config: Any, path: tuple[str, ...]) -> None:
        for name in tiny.sub_config_names(config):
            sub, where = getattr(config, name, None), (*path, name)
            if sub is None or not hasattr(sub, "to_dict") or where == skip:
                continue
            key = ".".join(where)
            sub, bounded = within_patches(sub)
            try:
                ran, model, record, _ = pixels.build_pixels(sub, max_parameters)
            except Exception as exc:  # no tower, or one that did not run: its own sub-configs may be towers
                held = len(towers)
                if len(where) < DEPTH:
                    visit(sub, where)
                if len(towers) == held and not str(exc).startswith("its forward takes none"):
                    why = str(exc) if isinstance(exc, pixels.NotRun) else f"{type(exc).__name__}: {exc}"
                    towers[key] = Tower(key, why=why[:400])  # a tower that did not run, said so
                continue
            towers[key] = Tower(key, ran.to_dict() | {"model_type": sub.model_type}, record, type(model).__name__,
                                bounded)

    visit(config0, ())
    return towers


#: a tower's outcome as the page counts it, by its verdict's status (a tower not run is ``not reached`` too)
OUTCOMES = {"exact": "compared and exact", "wrong": "wrong", "refused": "refused by refpos",
            "not reached": "not compared"}
#: the outcome of a tower the survey could not run
NOT_RUN = "not run"


@dataclass
class TowerVerdict:
    """A part of refpos's answer judged against its tower's run: ``exact``, ``wrong``, ``not reached`` or
    ``refused``, with the largest error, the wrong answers tried and those graded exact all the same."""

    stack: str
    status: str
    note: str
    max_error: float | None = None
    tried: int = 0
    survived: tuple[str, ...] = ()
    #: the path of the tower's sub-config (``vision_config``)
    path: str = ""
    #: whether the tower ran (one that did not is ``not reached``, its outcome :data:`NOT_RUN`)
    ran: bool = True

    @property
    def outcome(self) -> str:
        """How the page counts this tower: one of :data:`OUTCOMES`' values, or :data:`NOT_RUN`."""
        return OUTCOMES.get(self.status, self.status) if self.ran else NOT_RUN


def in_place(config: dict[str, Any], path: str, sub: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with the sub-config at dotted ``path`` replaced by ``sub``."""
    out = copy.deepcopy(config)
    owner = out
    *parents, last = path.split(".")
    for name in parents:
        owner = owner[name]
    owner[last] = sub
    return out


def judge_tower(config: dict[str, Any], stack: str, tower: Tower, apart: tuple[str, ...] = ()) -> TowerVerdict:
    """refpos's answer for the part ``stack`` of the composite ``config``, with the tower's config that ran in
    place, judged against the tower's run (module docstring); the records of the parts ``apart`` (inside it, each
    judged against its own tower's run: a talker's code predictor) left out."""
    import warnings

    import refpos
    from survey.pixel_compare import judge_records, refusals, summary

    def verdict(status: str, note: str, *measured: Any, ran: bool = True) -> TowerVerdict:
        return TowerVerdict(stack, status, note, *measured, path=tower.path, ran=ran)

    label = f"{stack} stack ({tower.path}"
    if tower.run is None:
        return verdict("not reached", f"{label}): not compared: its tower was not run ({tower.why})", ran=False)
    label += f", {tower.model} on its {tower.run.input_name}" + (f"; {tower.bounded}" if tower.bounded else "") + ")"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            answer = refpos.model_positions(in_place(config, tower.path, tower.config))
        except (ValueError, TypeError, KeyError) as exc:
            return verdict("refused", f"{label}: refpos: {type(exc).__name__}: {exc}"[:400])
    records = [r for r in answer.layers if (r.stack == stack or r.stack.startswith(stack + "."))
               and not any(r.stack == other or r.stack.startswith(other + ".") for other in apart)]
    under = tuple(f"{path}." for name, path, _ in answer.parts if name == stack)
    refused = refusals(records, answer.model_type,
                       {key: what for key, what in answer.not_modelled.items() if key.startswith(under)})
    if refused:
        return verdict("refused", f"{label}: refused by refpos: " + "; ".join(refused))
    if not records:
        return verdict("not reached", f"{label}: refpos resolved no layer of it")
    judged = summary(judge_records(records, tower.run))
    if judged.failed is not None:
        return verdict(judged.failed.status, f"{label}: {judged.failed.cause}", judged.max_error, judged.tried,
                       judged.survived)
    error = "" if judged.max_error is None else f", max error {judged.max_error:.3g}"
    return verdict("exact", f"{label}: compared, exact{error}, {judged.tried} wrong answers tried",
                   judged.max_error, judged.tried, judged.survived)


def judge_observed(config: dict[str, Any], observed: dict[str, Tower]) -> list[TowerVerdict]:
    """A composite's observed towers judged as the stacks of refpos's answer for ``config`` (:func:`judge_towers`);
    none where refpos refuses the config (the row says why)."""
    if not observed:
        return []
    import warnings

    import refpos

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parts = refpos.model_positions(config).parts
        except (ValueError, TypeError, KeyError):
            return []
    return judge_towers(config, observed, parts)


def judge_towers(config: dict[str, Any], towers: dict[str, Tower], parts: Any) -> list[TowerVerdict]:
    """One verdict per part of refpos's answer (``(stack, path, model type)``) whose tower was observed, except a
    part whose stack is one the token-id run compares (:data:`survey.claims.STACKS`: MusicGen's ``decoder``, a
    text decoder fed codebook tokens, which its own forward reads by shape when fed embeddings) — unless every
    layer refpos answers there is of a kind no text model has (Granite Speech's ``encoder_config`` makes an
    ``encoder`` of an audio encoder's table of frame distances: :func:`heard_only`)."""
    from survey.claims import STACKS

    ran = {stack for stack, path, _ in parts if path in towers and towers[path].run is not None}
    return [judge_tower(config, stack, towers[path], tuple(s for s in ran if s.startswith(stack + ".")))
            for stack, path, _ in parts if path in towers and (stack not in STACKS or heard_only(config, stack))]


def heard_only(config: dict[str, Any], stack: str) -> bool:
    """Whether refpos answers ``stack`` of ``config`` with layers, each of a kind whose models take no text
    (:attr:`refpos.models.kinds.EncodingKind.modalities`): a tower token ids never reach, whatever its name."""
    import refpos
    from refpos.models.kinds import KINDS

    try:
        records = refpos.model_positions(config).stack(stack)
    except (ValueError, TypeError, KeyError):
        return False
    return bool(records) and all(r.kind in KINDS and "text" not in KINDS[r.kind].modalities for r in records)
