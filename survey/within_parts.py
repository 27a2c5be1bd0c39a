"""A part without a model class of its own, judged on its own sites inside its composite's run.

SAM's prompt encoder and mask decoder (and SAM-HQ's, SAM 2's, EdgeTAM's) are model types whose config class has
no model class: transformers builds their modules only inside the composite's model. :func:`observe_part` builds
each composite holding the part's config class (:func:`survey.within.holders`) with the part's config in its place
(the part model type's own defaults, the composite's other sections at theirs), shrinks it to the survey's tiny
geometry and runs it on pixel inputs (:func:`survey.pixels.build_pixels`), a forward hook on every module showing
the part's module ran and keeping the tensors it was fed (:data:`KEPT_INPUTS` of them). refpos is then asked about
the part's config alone — the composite's shrunk section, the config the part's module was built from — and its
answer is judged against the part's sites (:func:`survey.pixel_compare.judge_pixels` with ``within``):

* refpos names the stacks of a network by its own family row (``decoder`` for a mask decoder, ``vision`` and
  ``vision.input`` for a prompt encoder); inside the composite they are its part module's (:meth:`PartRun.placed`:
  a single stack takes the module's path, as :func:`refpos.model_positions` names a composite's parts);
* each record is compared with its kind's comparison (:data:`survey.pixel_kinds.COMPARISONS`) against the whole
  run: a site may be the composite's own (SAM's ``shared_image_embedding`` computes the image grid's features
  the mask decoder's keys gain);
* the sites refpos's answer must account for are the part's own (:meth:`PartRun.own_run`): those inside its
  module (a site's path, or a call of the module computing with it), and the composite's own sites whose output
  the part's module was fed unchanged (:func:`handed`: the same values, in another layout: SAM's image grid
  features, permuted to channels first). A site of another part (the vision tower's grid) is not the part's;
* a stack refpos answers ``no_attention`` for must hold no module class named for attention inside the part's
  module, one it answers ``none`` for (attention without positions) must hold one; the other claim is the wrong
  answer tried there.

A part none of whose composites builds and runs this way is left to :func:`survey.within.observe_within`.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome
from survey.pixel_records import MAX_ELEMENTS, RUN_NOTE, NotRun, PixelRun, Site, observed_labels
from survey.within import WITHIN, field_of, holders, part_module

#: the key of an observation's ``stacks`` holding a :class:`PartRun`
PART = "part"
#: the floating tensors fed to the part's module kept per run (args and keyword arguments, each call's in order)
KEPT_INPUTS = 16


@dataclass
class PartRun:
    """A composite's pixel run (:class:`survey.pixels.PixelRun`) seen from one of its parts: the composite's model
    type, the part's config field and module path, the module's class and the attention classes inside it, and
    the sites the composite computes and hands to it unchanged (:func:`handed`)."""

    composite: str
    field: str
    module: str
    module_class: str
    run: PixelRun
    attention: list[str] = field(default_factory=list)
    handed: list[str] = field(default_factory=list)

    def inside(self, path: str) -> bool:
        """Whether the module or tensor at ``path`` lies inside the part's module."""
        return path == self.module or path.startswith(self.module + ".")

    def own(self, site: Site) -> bool:
        """Whether ``site`` is the part's (module docstring): inside its module, or handed to it."""
        return (self.inside(site.path) or site.path in self.handed
                or any(self.inside(c.module) for capture in site.captures.values() for c in capture.calls))

    def own_run(self) -> PixelRun:
        """The run as the part's module sees it: its own sites and the attention classes inside it."""
        return dataclasses.replace(self.run, sites=[s for s in self.run.sites if self.own(s)],
                                   attention=list(self.attention))

    def observed(self) -> list[str]:
        """The row's observed column: run within the composite, and the kinds of the part's own sites."""
        return [WITHIN + self.composite, *observed_labels(self.own_run())]

    def placed(self, records: list[Any]) -> list[Any]:
        """refpos's records of the part's config alone, their stacks named for the part's module: one stack
        (with its ``.input``/``.output`` sites) takes the module's path, several become its members."""
        tops = list(dict.fromkeys(r.stack.split(".")[0] for r in records))
        if len(tops) == 1:
            return [dataclasses.replace(r, stack=self.module + r.stack[len(tops[0]):]) for r in records]
        return [dataclasses.replace(r, stack=f"{self.module}.{r.stack}") for r in records]

    def attention_outcomes(self, records: list[Any]) -> list[Outcome]:
        """Each placed stack refpos answers ``no_attention`` or ``none`` (attention without positions) for, against
        the module classes named for attention inside the part: wrong where they disagree; else exact, the other
        claim the wrong answer told apart."""
        out = []
        for stack, kind in dict.fromkeys((r.stack, r.kind) for r in records if r.kind in ("no_attention", "none")):
            if (kind == "none") != bool(self.attention):
                said = "no attention" if kind == "no_attention" else "attention without positions"
                held = ", ".join(self.attention) or "no module class named for attention"
                out.append(Outcome("wrong", f"{stack}: refpos answers {said}; the part's {self.module} holds {held}"))
            else:
                out.append(Outcome("exact", tried=1))
        return out


def handed(run: PixelRun, fed: list[np.ndarray], module: str) -> list[str]:
    """The sites computed by the composite's own modules (a call outside ``module`` and outside every other
    network: a top-level module) whose output one of the tensors ``fed`` to the part's module holds unchanged: the
    same multiset of values (a permutation of the axes leaves it so), each value exactly."""
    out = []
    for site in run.sites:
        calls = [c for capture in site.captures.values() for c in capture.calls if "." not in c.module
                 and c.module != module]
        if any(t.size == c.output.size and np.array_equal(np.sort(t, axis=None), np.sort(c.output, axis=None))
               for c in calls for t in fed):
            out.append(site.path)
    return out


def _tensors(args: tuple, kwargs: dict[str, Any]) -> list[Any]:
    import torch

    return [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor) and v.is_floating_point()
            and v.numel() <= MAX_ELEMENTS]


def observe_part(config0: Any, row: Any, max_parameters: int) -> tuple[dict[str, Any], PartRun] | None:
    """``(the part's shrunk config dict, its PartRun)`` from the first composite holding ``config0``'s class that
    builds and runs with it in place (module docstring), ``row``'s columns filled; ``None`` (each composite's
    reason in ``row``'s notes) where none does."""
    import torch

    from survey import catalogue, pixels

    reasons = []
    for holder in holders(type(config0)):
        try:
            composite0 = holder.config()
            field_name = field_of(type(composite0), type(config0))
        except Exception as exc:  # a composite whose config does not build with defaults holds nothing to run
            reasons.append(f"{holder.name}: its config does not build: {type(exc).__name__}")
            continue
        setattr(composite0, field_name, copy.deepcopy(config0))
        # module id -> (the module, the tensors it was fed): the module held, so that its id stays its own
        ran: dict[int, tuple[Any, list[np.ndarray]]] = {}

        def hook(module: Any, args: tuple, kwargs: dict[str, Any], out: Any, ran: dict = ran) -> None:
            tensors = ran.setdefault(id(module), (module, []))[1]
            if len(tensors) < KEPT_INPUTS:
                tensors += [t.detach().double().cpu().numpy() for t in _tensors(args, kwargs)]

        handle = torch.nn.modules.module.register_module_forward_hook(hook, with_kwargs=True)
        try:
            config, model, record, strength = pixels.build_pixels(composite0, max_parameters)
        except NotRun as exc:
            reasons.append(f"{holder.name}: {exc}")
            continue
        finally:
            handle.remove()
        found = part_module(model, field_name)
        if found is None or id(found[1]) not in ran:
            reasons.append(f"{holder.name} ran, its {field_name.removesuffix('_config')} did not")
            continue
        name, module = found
        part = PartRun(holder.name, field_name, name, type(module).__name__, record, sorted(
            {type(m).__name__ for m in module.modules() if "Attention" in type(m).__name__}))
        part.handed = handed(record, ran[id(module)][1][:KEPT_INPUTS], name)
        row.file, row.strength, row.cause = catalogue.modeling_file(type(model)), strength, ""
        row.observed = part.observed()
        row.notes = [f"{WITHIN}{holder.name}: its {name} ({part.module_class}) built from this config in "
                     f"{type(model).__name__} and {RUN_NOTE}{record.input_name}: "
                     + "; ".join(f"{size} {shape}" for size, shape in record.shapes.items())
                     + "; its own sites: " + (", ".join(s.path for s in part.own_run().sites) or "none")]
        return getattr(config, field_name).to_dict(), part
    row.notes.append("not built within a composite: " + ("; ".join(reasons) or "no model type holds its config"))
    return None
