r"""Stages of their own geometry: a network whose attention layers come in stages, each stage with its own
depth, head count and width (SegFormer, PVTv2, CvT, MobileViT's blocks, a perceiver resampler's layers), read
from the family table's ``stages`` column (:mod:`refpos.models.family_row`).

A row states where each stage fact lives::

    stages = {layers = "depths", heads = "num_attention_heads", widths = "hidden_sizes",
              count = "num_encoder_blocks"}

Each of ``layers``, ``heads``, ``widths`` (and ``head_dim`` where the code sizes a head by a key of its own) is a
config key, whose value is a list (one entry per stage) or one integer (the same for every stage), or a value the
code fixes (an integer, or a list of integers: MobileViT's blocks of 2, 4 and 3 layers), or a geometric series
``{base = "<key>", factor = "<key>"}`` whose stage :math:`s` entry is :math:`\lfloor b \cdot f^{s} \rfloor` (Hiera's
widths, ``int(embed_dim * embed_dim_multiplier ** s)``). ``count`` names the key
holding the number of stages where the code loops over it (SegFormer's ``num_encoder_blocks``); without it the
stages are as many as the lists' entries (one stage when every fact is one integer). A key absent from the config
is refused by name: nothing is assumed.

Stage :math:`s` holds layers :math:`L_0 + \dots + L_{s-1}` to :math:`L_0 + \dots + L_s - 1`; its heads
:math:`H_s` each have width :math:`d_s` (``head_dim``'s entry, or :math:`W_s / H_s`, refused where :math:`H_s`
does not divide :math:`W_s`). Every layer of stage :math:`s` has the layer type ``stage_<s>``
(:func:`stage_types`), and the schedule (:mod:`refpos.models.schedule`) counts :math:`\sum_s L_s` layers.

Examples
--------
>>> rule = read_stages("example", {"layers": "depths", "heads": "num_attention_heads", "widths": "hidden_sizes"})
>>> [s.heads for s in stage_plan({"depths": [1, 2], "num_attention_heads": [1, 2], "hidden_sizes": [8, 16]}, rule)]
[1, 2]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from refpos.validation import check_int

#: the facts a ``stages`` table may state, and the smallest value each takes
FACTS = {"layers": 0, "heads": 1, "widths": 1, "head_dim": 1}
#: the most stages a row may resolve (networks have a handful)
MAX_STAGES = 64
#: a value the code fixes: one integer, or one per stage
Fixed = int | tuple[int, ...]


@dataclass(frozen=True)
class Growth:
    r"""A fact the code grows geometrically over the stages: stage :math:`s` has :math:`\lfloor b f^s \rfloor`, ``b``
    and ``f`` the values of the config keys ``base`` and ``factor`` (module docstring)."""

    base: str
    factor: str

    def at(self, cfg: Mapping[str, Any], count: int, minimum: int) -> list[int]:
        """The entries of ``count`` stages; a ``ValueError`` naming a key that is absent or not a number."""
        for key in (self.base, self.factor):
            if not isinstance(cfg.get(key), int | float) or isinstance(cfg.get(key), bool):
                raise ValueError(f"{key}: absent from the config or not a number, and the stages grow by it (refpos "
                                 "assumes no stage geometry)")
        base = check_int(self.base, cfg[self.base], minimum=1)
        return [check_int(f"{self.base} * {self.factor}^{s}", int(base * cfg[self.factor] ** s), minimum=minimum)
                for s in range(count)]


@dataclass(frozen=True)
class StageRule:
    """Where a family's stage facts live: a config key (str) or the value its code fixes, per fact."""

    layers: str | Fixed
    heads: str | Fixed
    widths: str | Fixed | Growth
    head_dim: str | Fixed | None = None
    count: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys the rule reads."""
        values = (self.layers, self.heads, self.widths, self.head_dim, self.count)
        return tuple(k for v in values for k in ((v.base, v.factor) if isinstance(v, Growth) else (v,))
                     if isinstance(k, str))


@dataclass(frozen=True)
class Stage:
    """One stage: its index, its first layer, its layer count, its heads and each head's width, and the width
    of its tokens."""

    index: int
    first: int
    layers: int
    heads: int
    head_dim: int
    width: int

    def describe(self) -> str:
        last = self.first + self.layers - 1
        span = {0: "no layers", 1: f"layer {self.first}"}.get(self.layers, f"layers {self.first}-{last}")
        return f"stage_{self.index}: {span}, {self.heads} head{'s' * (self.heads != 1)} of {self.head_dim} " \
               f"(width {self.width})"


def read_stages(where: str, table: Any) -> StageRule:
    """A row's ``stages`` table as a :class:`StageRule`; a ``ValueError`` naming ``where`` and the fact that is
    wrong.

    See Also
    --------
    stage_plan : the stages a config resolves to under the rule.
    """
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: stages must be a table of layers, heads, widths (head_dim, count)")
    unknown = sorted(set(table) - {*FACTS, "count"})
    missing = [name for name in ("layers", "heads", "widths") if name not in table]
    if unknown or missing:
        raise ValueError(f"{where}: stages has unknown facts {unknown}, lacks {missing}; it takes layers, heads, "
                         "widths, head_dim, count")
    values: dict[str, Any] = {}
    for name, value in table.items():
        if isinstance(value, str) and value:
            values[name] = value
        elif name == "count":
            raise ValueError(f"{where}: stages.count names the config key of the stage count, got {value!r}")
        elif isinstance(value, int) and not isinstance(value, bool) and value >= FACTS[name]:
            values[name] = value
        elif name == "widths" and isinstance(value, Mapping) and set(value) == {"base", "factor"} and all(
                isinstance(v, str) and v for v in value.values()):
            values[name] = Growth(value["base"], value["factor"])
        elif isinstance(value, list) and value and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= FACTS[name] for v in value):
            values[name] = tuple(value)
        else:
            raise ValueError(f"{where}: stages.{name} must be a config key or the value the code fixes (an integer "
                             f">= {FACTS[name]} or a list of them), or for widths {{base, factor}} keys, got "
                             f"{value!r}")
    return StageRule(**values)


def _entries(cfg: Mapping[str, Any], rule: StageRule, name: str) -> tuple[str, list[int] | int] | None:
    """The label and value of fact ``name``: the config's list or integer, or the code's; None when unstated."""
    source = getattr(rule, name)
    if source is None or isinstance(source, Growth):  # a series: its entries once the stage count is known
        return None
    if not isinstance(source, str):
        return f"{name} (fixed by the code)", list(source) if isinstance(source, tuple) else source
    if source not in cfg or cfg[source] is None:
        raise ValueError(f"{source}: absent from the config, and the stages' {name} are read from it (refpos "
                         "assumes no stage geometry)")
    value = cfg[source]
    if isinstance(value, (list, tuple)):
        return source, [check_int(f"{source}[{i}]", v, minimum=FACTS[name]) for i, v in enumerate(value)]
    return source, check_int(source, value, minimum=FACTS[name])


def stage_plan(cfg: Mapping[str, Any], rule: StageRule) -> tuple[Stage, ...]:
    """The stages of ``cfg`` under ``rule`` (module docstring); a ``ValueError`` or ``TypeError`` naming the key
    whose value is wrong: a list shorter than the stage count, lists of different lengths, a head count that
    does not divide its stage's width.

    See Also
    --------
    stage_types : the layer type of each layer.
    read_stages : the rule from a family row.
    """
    facts = {name: _entries(cfg, rule, name) for name in FACTS}
    lists = {label: len(value) for label, value in (f for f in facts.values() if f is not None)
             if isinstance(value, list)}
    if rule.count is not None:
        if rule.count not in cfg:
            raise ValueError(f"{rule.count}: absent from the config, and the stage count is read from it")
        count = check_int(rule.count, cfg[rule.count], minimum=1, maximum=MAX_STAGES)
        short = {label: n for label, n in lists.items() if n < count}
        if short:
            raise ValueError(f"{next(iter(short))} has {next(iter(short.values()))} entries for {rule.count}={count} "
                             "stages")
    else:
        if len(set(lists.values())) > 1:
            raise ValueError("the stage lists differ in length: " + ", ".join(f"{k} ({n})" for k, n in lists.items()))
        count = next(iter(lists.values()), 1)
        if count > MAX_STAGES:
            raise ValueError(f"{next(iter(lists))} lists {count} stages, more than {MAX_STAGES}")

    if isinstance(rule.widths, Growth):
        facts["widths"] = (f"{rule.widths.base} * {rule.widths.factor}^s", rule.widths.at(cfg, count, FACTS["widths"]))

    def at(name: str, s: int) -> int | None:
        found = facts[name]
        return None if found is None else found[1][s] if isinstance(found[1], list) else found[1]

    stages, first = [], 0
    for s in range(count):
        layers, heads, width, head_dim = at("layers", s), at("heads", s), at("widths", s), at("head_dim", s)
        assert layers is not None and heads is not None and width is not None
        if head_dim is None:
            if width % heads:
                raise ValueError(f"stage {s}: {facts['widths'][0]} ({width}) is not a multiple of "  # type: ignore[index]
                                 f"{facts['heads'][0]} ({heads}): the heads' width is not resolved")  # type: ignore[index]
            head_dim = width // heads
        stages.append(Stage(s, first, layers, heads, head_dim, width))
        first += layers
    return tuple(stages)


def stage_types(stages: tuple[Stage, ...]) -> list[str]:
    """The layer type of every layer: ``stage_<s>`` for each layer of stage :math:`s`, in order.

    See Also
    --------
    stage_plan : the stages.
    """
    return [f"stage_{stage.index}" for stage in stages for _ in range(stage.layers)]


def stage_note(stages: tuple[Stage, ...]) -> str:
    """One line saying every stage's layers, heads and widths (the resolution's note)."""
    return "stages: " + "; ".join(stage.describe() for stage in stages)


__all__ = ["FACTS", "MAX_STAGES", "Growth", "Stage", "StageRule", "read_stages", "stage_note", "stage_plan",
           "stage_types"]
