"""The stages of a vision or audio network whose attention has no positions, observed and judged: refpos answers
``none`` for each layer of stage :math:`s` (layer type ``stage_<s>``, :mod:`refpos.models.stages`), with the
stage's heads and their width; the survey checks that transformers' model runs that many attention layers, in
that order, with those heads.

Observed (:func:`watch_cores`, while :mod:`survey.pixels` runs the model): the *attention cores* — the modules
whose class name holds ``Attention`` and that state a head count (:data:`HEAD_COUNTS`), none of whose
submodules does (CvT's ``CvtSelfAttention``, not the ``CvtAttention`` around it); in a model where no such
module states its heads, the innermost ``Attention`` modules, their heads read off the scores their first
softmax is given (:meth:`CoreWatch.softmax`; unknown where a fused kernel calls none). Each core's heads and its
heads' width are read as the module states them (:data:`HEAD_WIDTHS`, else its width over its heads:
:data:`WIDTHS`), and the cores are kept in the order of their first call (:attr:`PixelRun.cores`); a core the
forward never calls is left out.

Judged (:func:`stage_outcomes`, no torch): the cores must be as many as the ``stage_<s>`` layers, the cores of
stage :math:`s` (in call order) must state its heads and head width (:func:`mismatch`); else the row is
``wrong``. A run that recorded no core (one observed before the survey recorded them) is ``not reached``: the
survey cannot observe the stages' attention and says so. The wrong answers (:func:`mutants`), each judged by the
same :func:`mismatch` and surviving where it finds nothing:

* a stage with one head more (caught where the stage's cores state their heads, or their softmax shows them);
* a stage's last layer counted in the next stage (caught where that core's heads or width are not the next
  stage's);
* one layer more in the last stage (caught by the count of cores);
* a rotation in the stages' layers (caught where the run has no rotary module and no rotary apply call: a
  rotation claimed would find nothing to compare with).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from survey.pixel_records import PixelRun

#: the attributes an attention module states its head count under
HEAD_COUNTS = ("num_attention_heads", "num_heads", "n_heads", "n_head")
#: the attributes it states one head's width under
HEAD_WIDTHS = ("head_dim", "attention_head_size", "head_size")
#: the attributes it states all its heads' width under (divided by the heads where no head width is stated)
WIDTHS = ("all_head_size", "embed_dim")
#: how a layer type of a stage begins
STAGE = "stage_"


def _stated(module: Any, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = getattr(module, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def attention_cores(model: Any) -> list[tuple[str, Any]]:
    """``(path, module)`` of every attention core of ``model`` (module docstring), in module order."""
    named = [(path, m) for path, m in model.named_modules() if "Attention" in type(m).__name__]
    stating = [(path, m) for path, m in named if _stated(m, HEAD_COUNTS) is not None]
    pool = stating or named
    return [(path, m) for path, m in pool
            if not any(other != path and other.startswith(path + ".") for other, _ in pool)]


def core_facts(module: Any) -> tuple[int | None, int | None]:
    """A core's heads and one head's width, as the module states them (None where it does not)."""
    heads = _stated(module, HEAD_COUNTS)
    width = _stated(module, HEAD_WIDTHS)
    if width is None and heads is not None:
        whole = _stated(module, WIDTHS)
        width = None if whole is None or whole % heads else whole // heads
    return heads, width


class CoreWatch:
    """The attention cores of a model, each noted at its first call while the watch is on, with the heads its first
    softmax implies (:meth:`softmax`)."""

    def __init__(self, model: Any) -> None:
        self.cores = attention_cores(model)
        self.order: dict[str, int] = {}
        self.inside: list[tuple[str, int | None]] = []  # the cores running now: (path, their input's batch)
        self.softmax_heads: dict[str, int] = {}

    def softmax(self, scores: Any) -> None:
        r"""Note the heads of the innermost running core from the scores its first softmax is given: ``(…, T_q,
        T_k)`` over a batch of ``B``, the leading axes hold :math:`\prod_{\text{leading}} / B` heads (WavTokenizer's
        single-head core scores ``(B, T, T)``: one head). A core that states its heads is read as it states them
        (:meth:`found`); a fused kernel calls no softmax, and its heads stay unknown."""
        if not self.inside or self.inside[-1][0] in self.softmax_heads:
            return
        path, batch = self.inside[-1]
        shape = tuple(getattr(scores, "shape", ()))
        leading = 1
        for n in shape[:-2]:
            leading *= int(n)
        if batch and len(shape) >= 3 and leading % batch == 0:
            self.softmax_heads[path] = leading // batch

    def found(self) -> list[list[Any]]:
        """``[path, heads, head width]`` of every core called so far, in the order of their first call: as the
        module states them, its heads else as its softmax implies."""
        called = sorted((self.order[path], path, module) for path, module in self.cores if path in self.order)
        out = []
        for _, path, module in called:
            heads, width = core_facts(module)
            out.append([path, heads if heads is not None else self.softmax_heads.get(path), width])
        return out


@contextlib.contextmanager
def watch_cores(model: Any) -> Iterator[CoreWatch]:
    """A :class:`CoreWatch` of ``model`` whose hooks (and softmax wrappers: ``torch.softmax``,
    ``torch.nn.functional.softmax``, ``Tensor.softmax``) are on inside the ``with`` block."""
    import torch

    from survey.recorder import _patched

    watch = CoreWatch(model)

    def enter(path: str) -> Any:
        def hook(_module: Any, args: Any, kwargs: Any) -> None:  # returns None: the arguments pass unchanged
            watch.order.setdefault(path, len(watch.order))
            first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
            watch.inside.append((path, int(first.shape[0]) if first is not None and first.ndim else None))
        return hook

    def leave(_module: Any, _args: Any, _output: Any) -> None:
        if watch.inside:
            watch.inside.pop()

    def noting(original: Any) -> Any:
        def softmax(scores: Any, *args: Any, **kwargs: Any) -> Any:
            watch.softmax(scores)
            return original(scores, *args, **kwargs)
        return softmax

    handles = [module.register_forward_pre_hook(enter(path), with_kwargs=True) for path, module in watch.cores]
    handles += [module.register_forward_hook(leave, always_call=True) for _, module in watch.cores]  # raised too
    targets = [(torch.nn.functional, "softmax", noting(torch.nn.functional.softmax)),
               (torch, "softmax", noting(torch.softmax)), (torch.Tensor, "softmax", noting(torch.Tensor.softmax))]
    try:
        with _patched(targets):
            yield watch
    finally:
        for handle in handles:
            handle.remove()


Claim = list[tuple[int, int, int]]


def claims(stages: Any) -> Claim:
    """``(stage, heads, head width)`` of every layer of ``stages`` (:class:`refpos.models.stages.Stage`), in
    order."""
    return [(stage.index, stage.heads, stage.head_dim) for stage in stages for _ in range(stage.layers)]


def mismatch(claimed: Claim, cores: list[list[Any]]) -> str | None:
    """Why the run's cores are not the ``claimed`` layers (their count, a stage's heads or head width as a core
    states them); None where they agree."""
    if len(cores) != len(claimed):
        return f"refpos answers {len(claimed)} attention layers; the run called {len(cores)} attention cores"
    for (index, heads, width), (path, seen_heads, seen_width) in zip(claimed, cores, strict=True):
        if (seen_heads is not None and seen_heads != heads) or (seen_width is not None and seen_width != width):
            return (f"stage_{index}: refpos answers {heads} heads of {width}; {path} has {seen_heads} heads of "
                    f"{seen_width}")
    return None


def mutants(stages: Any) -> dict[str, Claim]:
    """The wrong stage answers (module docstring) by name, each as its layers' claims."""
    import dataclasses

    stages = list(stages)
    found: dict[str, Claim] = {}
    for s, stage in enumerate(stages):
        if stage.layers:
            found[f"stage_{s} with one head more"] = claims(
                [*stages[:s], dataclasses.replace(stage, heads=stage.heads + 1), *stages[s + 1:]])
        if stage.layers and s + 1 < len(stages):
            after = stages[s + 1]
            found[f"stage_{s}'s last layer in stage_{s + 1}"] = claims(
                [*stages[:s], dataclasses.replace(stage, layers=stage.layers - 1),
                 dataclasses.replace(after, layers=after.layers + 1), *stages[s + 2:]])
    if stages:
        last = stages[-1]
        found["one layer more in the last stage"] = claims(
            [*stages[:-1], dataclasses.replace(last, layers=last.layers + 1)])
    return found


def cores_are_the_stages(records: list[Any], run: PixelRun) -> bool:
    """Whether every ``none`` record of ``records`` is a stage's layer and the run's cores are as many: then the
    layers answered without attention cannot be attention too (a ``none`` layer more would find no core)."""
    nones = [r for r in records if r.kind == "none"]
    staged = [r for r in nones if isinstance(r.layer_type, str) and r.layer_type.startswith(STAGE)]
    return bool(run.cores) and len(staged) == len(nones) == len(run.cores)


def stage_outcomes(records: list[Any], config: dict[str, Any], run: PixelRun) -> list[Any]:
    """The outcome (:class:`survey.pixel_kinds.base.Outcome`) of refpos's stages against the run's cores (module
    docstring), each wrong answer of :func:`mutants` judged by the same :func:`mismatch`; none where no record is
    a stage's layer."""
    from refpos.models.schedule import stages_of
    from survey.pixel_kinds.base import Outcome

    staged = [r for r in records if isinstance(r.layer_type, str) and r.layer_type.startswith(STAGE)]
    if not staged:
        return []
    stages = stages_of(config)
    if not run.cores:
        return [Outcome("not reached", "the run recorded no attention core (a module named for attention that states "
                        "its heads): the survey cannot observe the stages' attention")]
    claimed = claims(stages)
    if len(staged) != len(claimed):
        return [Outcome("wrong", f"refpos's answer has {len(staged)} stage layers, its stages {len(claimed)}")]
    why = mismatch(claimed, run.cores)
    if why is not None:
        return [Outcome("wrong", why)]
    survived = [name for name, claim in mutants(stages).items() if mismatch(claim, run.cores) is None]
    tried = len(mutants(stages)) + 1
    if run.rotary or any(run.applied.values()):  # a rotation claimed would find something to compare with
        survived.append("a rotation in the stages' layers")
    return [Outcome("exact", tried=tried, survived=survived)]


__all__ = ["HEAD_COUNTS", "HEAD_WIDTHS", "STAGE", "WIDTHS", "Claim", "CoreWatch", "attention_cores", "claims",
           "core_facts", "cores_are_the_stages", "mismatch", "mutants", "stage_outcomes", "watch_cores"]
