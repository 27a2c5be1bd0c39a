r"""What every comparison of a vision, audio or feature run shares (:mod:`survey.pixel_kinds`): the
:class:`Outcome` of one comparison, :func:`graded` (observations against a reference within a bound, with the
kind's catalogued mistakes as the wrong answers each must tell apart), the dtype's unit roundoff, and the readers of
an observed map's rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from survey.pixel_records import EMBEDDING_INPUTS
from survey.pixels import PixelRun, Site

#: the unit roundoff of the dtype a model ran in
UNIT = {"float64": 2.0**-53, "float32": 2.0**-24}


def unit(run: PixelRun) -> float:
    """The unit roundoff of the run's dtype (float64 where the model's code runs in it)."""
    return UNIT[run.dtype]


@dataclass
class Outcome:
    """One record's comparison: ``status`` (exact, wrong, not reached), why, the sites it accounts for, the largest
    error, and the wrong answers tried and those that survived."""

    status: str
    cause: str = ""
    sites: tuple[str, ...] = ()
    error: float | None = None
    tried: int = 0
    survived: list[str] = field(default_factory=list)


def absent(run: PixelRun, cause: str) -> Outcome:
    """The outcome of a record whose position site the run does not hold: wrong — unless the model was fed
    embeddings (:data:`~survey.pixel_records.EMBEDDING_INPUTS`), whose positions may be added before them, in a
    network the run does not hold (SLANeXt's table head, fed its backbone's features): not reached then."""
    if run.input_name in EMBEDDING_INPUTS:
        return Outcome("not reached", f"{cause}: the model was fed {run.input_name}, and a site before them is not "
                       "in its run")
    return Outcome("wrong", cause)


def unrecorded(inline: Site, sites: list[Site], what: str) -> Outcome:
    """The outcome of a layer whose position terms ``what`` are computed inside its attention's forward, and of
    which no logits were recorded (:mod:`survey.pixel_logits`): not reached, saying why — what the forward raised
    with the projections replaced, where it raised, else that no projection or no softmax was found."""
    raised = next((c.logits_raised for s in sites for c in s.captures.values() if c.logits_raised), "")
    why = (f"the forward with the query and key projections replaced raised {raised}" if raised else
           "no query and key projection to replace, or no softmax called")
    return Outcome("not reached", f"{inline.path}: {what} inside the attention's forward and no logits of it were "
                   f"recorded ({why})", (inline.path,))


def graded(cases: list[tuple[np.ndarray, np.ndarray, Any, dict[str, np.ndarray | None]]], sites: tuple[str, ...],
           what: str) -> Outcome:
    """The outcome of ``(observed, reference, bound, {mistake: its output})`` cases: wrong at the first case outside
    its bound; else exact, a mistake surviving when it is within the bound of every case it applies to."""
    worst, killed, tried = 0.0, set(), set()
    for observed, reference, bound, mistakes in cases:
        if observed.shape != reference.shape:
            return Outcome("wrong", f"{what}: transformers' shape {observed.shape}, refpos's {reference.shape}", sites)
        excess = np.abs(observed - reference) - bound
        worst = max(worst, float(np.max(np.abs(observed - reference))))
        if np.any(excess > 0) or not np.all(np.isfinite(observed)):
            at = np.unravel_index(int(np.argmax(excess)), excess.shape)
            return Outcome("wrong", f"{what}: differs by {float(np.abs(observed - reference)[at]):.3g} at {at} "
                           f"(bound {float(np.broadcast_to(bound, excess.shape)[at]):.3g})", sites, worst)
        for name, wrong in mistakes.items():
            if wrong is None:
                continue
            tried.add(name)
            if wrong.shape != observed.shape or np.any(np.abs(observed - wrong) > bound):
                killed.add(name)
    return Outcome("exact", "", sites, worst, len(tried), sorted(tried - killed))


def after_normalisation(sites: list[Site], run: PixelRun) -> Outcome | None:
    r"""``not reached`` (not compared) where what a site's owner records is not linear in the site's parameters
    at some size; ``None`` where it is at every size.

    A table ``T`` added to ``x`` is read as :math:`f(x + T) - f(x)`, which is ``T`` where the site reads the sum
    itself (``f`` the identity) and no table where ``f`` normalises it. The run also records :math:`f(x + 2T)`
    (:attr:`survey.pixel_records.Capture.owner_doubled`); where ``f`` is linear the second difference

    .. math:: r = f(x + 2T) - 2 f(x + T) + f(x)

    is zero but for roundings: each output off by ``2u`` of its largest entry (the sum, then one more rounding),

    .. math:: |r| \le 2u\,(\max|f(x + 2T)| + 2\max|f(x + T)| + \max|f(x)|).

    A larger ``r`` is a reading site after a normalisation (BART's ``layernorm_embedding``, applied after its
    learned table in the encoder's own forward, read at the first layer's input): the survey's limit, not a
    difference of refpos's answer. A size recorded without the doubled output is not probed."""
    u = unit(run)
    for site in sites:
        for size, capture in site.captures.items():
            if not capture.owner_doubled or not capture.owner_out or not capture.owner_zeroed:
                continue
            once, zero = capture.owner_out[0].astype(np.float64), capture.owner_zeroed[0].astype(np.float64)
            twice = capture.owner_doubled[0].astype(np.float64)
            if not once.shape == zero.shape == twice.shape:
                continue
            second = float(np.max(np.abs(twice - 2.0 * once + zero)))
            bound = 2 * u * (float(np.max(np.abs(twice))) + 2 * float(np.max(np.abs(once)))
                             + float(np.max(np.abs(zero))))
            if second > bound:
                where = site.at or f"{site.owner or 'the model'}'s output"
                return Outcome("not reached", f"{site.path}: not compared: the reading site ({where}) is after a "
                               f"normalisation (not linear in the table: doubling it moves the output {second:.3g} "
                               f"from twice the table's effect at the {size} size, bound {bound:.3g})", (site.path,))
    return None


def built_alone(cases: list[tuple], skip: Outcome, sites: tuple[str, ...], what: str) -> Outcome:
    """A table the model's code builds compared alone, its rows read not (``skip``, :func:`after_normalisation`):
    wrong where the built table is (a difference the normalisation does not touch), else ``skip``."""
    built = graded(cases, sites, what)
    return built if built.status == "wrong" else skip


def check_target(kind: str) -> Any:
    from refpos.check.kinds import BY_KIND

    return BY_KIND[kind]


def mistakes_of(kind: str, inputs: Any) -> dict[str, np.ndarray | None]:
    """The output of every catalogued mistake of ``kind``'s check target on ``inputs`` (``None``: not shown)."""
    check = check_target(kind)
    out = {}
    for name in check.mistakes:
        try:
            wrong = check.wrong(inputs, name)
        except (ValueError, TypeError, IndexError):  # a mistake these inputs cannot take
            wrong = None
        out[name] = None if wrong is None else np.asarray(wrong, dtype=np.float64)
    return out

def rows_of(diff: np.ndarray, dim: int) -> np.ndarray | None:
    """An observed ``(1, n, d)``, ``(1, h, w, d)`` or ``(1, d, h, w)`` map as ``(n, d)`` rows (raster order)."""
    if diff.shape[-1] == dim:
        return diff.reshape(-1, dim)
    if diff.ndim == 4 and diff.shape[1] == dim:
        return np.moveaxis(diff, 1, -1).reshape(-1, dim)
    return None


def embedding_site(site: Site) -> bool:
    """Whether the site's recorded owner tensors are the embedding its table is added to: an embedding module's
    output (one of a list of them, a stage's: PVT's ``patch_embeddings.0``), or the first layer's input of the module
    that adds it (:attr:`survey.pixels.Site.at`)."""
    name = next((part for part in reversed(site.owner.split(".")) if not part.isdigit()), "")
    return bool(site.at) or "embed" in name.lower()


def image_patch_grid(patches: int, shape: list[int]) -> tuple[int, int] | None:
    """The ``(h, w)`` with ``h·w = patches`` whose aspect is the image's (``shape[-2:]``)."""
    height, width = shape[-2:]
    h = max(1, round((patches * height / width) ** 0.5))
    return (h, patches // h) if h * (patches // h) == patches else None
