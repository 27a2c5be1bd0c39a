"""The family table: what a model's code fixes about positions that its config.json does not state.

A config.json says ``rope_theta`` and ``rope_scaling``; it does not say whether the model rotates
half-split or interleaved pairs, which layers rotate at all, or whether the query is scaled by position.
Those are fixed by the model's code. The table is data, ``refpos/models/data/families.toml``: one row per
transformers ``model_type`` whose attention has a positional encoding refpos knows, or none at all, each row
citing the file (under ``transformers/models/``, transformers 5.24) and the function it was read from, and rows
for the models that ship their own code, citing the public copy of it that was read. This
module reads it, checks every value against its rule set and serves the rows. The columns of the encoding,
the stacks and the facts of the encodings other than RoPE (``encoding``, ``stacks``, ``switch``, ``alibi``,
``t5``, ``learned``, ``sinusoidal``, ``encoder``, ``decoder``) and the RoPE facts beyond the config
(``rope``: hard-coded bases, defaults of the rotated span and head sizes, renamed rope types) are
:mod:`refpos.models.facts`'; the RoPE columns (``layout`` is required where a stack can have RoPE):

The columns are documented with the row itself, :class:`refpos.models.family_row.Family`.

The layouts were read from each file's rotate / apply functions; the other columns from the attention
``forward``, the position-embedding modules and the config classes of the families that differ. For a
``model_type`` missing from the table, :func:`refpos.models.from_hf_config` resolves the layout ``"half"`` and RoPE
on every layer *assumed* (the resolution says so, not modelled, and :func:`warn_assumed` issues an
:class:`UnknownFamilyWarning`); :func:`refpos.model_positions` resolves only what the config states and
reports the rest as unknown.

Examples
--------
>>> family_of("cohere").layout, family_of("kimi_k2").model_type
('interleaved', 'deepseek_v3')
>>> dict(family_of("qwen3_next").no_attention)
{'linear_attention': 'linear'}
>>> family_of("bart").stacks, family_of("bart").stack("encoder").facts_of("learned").offset
('encoder-decoder', 2)
"""


from __future__ import annotations

import tomllib
import warnings
from dataclasses import fields
from importlib import resources
from typing import Any

from refpos.models.cross import read_cross
from refpos.models.facts import OWN_STACKS, read_stack, read_switch
from refpos.models.family_row import (
    SOURCE_FORM,
    STATED,
    TABLE_PATH,
    TRANSFORMERS_SOURCE,
    Family,
    UnknownFamilyWarning,
)
from refpos.models.kinds.registry import FACT_KINDS, TABLE_KINDS
from refpos.models.layer_pattern import LayerPattern
from refpos.models.releases import check_range
from refpos.models.sources import INPUTS
from refpos.models.stages import read_stages

#: the columns a ``[family.<model_type>]`` table may hold (the model type is its name; ``positions`` is
#: written as ``encoding`` and the fact tables at the row's top level)
COLUMNS = (*(f.name for f in fields(Family) if f.name not in ("model_type", "positions")), "encoding",
           *FACT_KINDS)
_STRINGS = ("layout", "source", "rope_layers", "query_scale", "placement", "unmodelled", "stage_unmodelled", "note",
            "stacks", "types_key", "count", "release")


def read_row(model_type: str, table: Any, where: str | None = None) -> Family:
    """One ``[family.<model_type>]`` table as a :class:`Family`; a ``ValueError`` naming what is wrong (and
    ``where`` the row came from: the table by default, a caller's statement, a row file)."""
    where = where or f"{TABLE_PATH} [family.{model_type}]"
    if not isinstance(table, dict):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(table) - set(COLUMNS))
    missing = [key for key in ("source",) if key not in table]
    if unknown or missing:
        raise ValueError(f"{where}: unknown keys {unknown}, missing {missing}; keys are {list(COLUMNS)}")
    wrong = [key for key in _STRINGS if key in table and not isinstance(table[key], str)]
    wrong += [key for key, kind in (("multi_axis", bool), ("rope_dict", list), ("ignores", list),
                                    ("layer_pattern", dict),
                                    ("no_attention", dict), *((name, dict) for name in OWN_STACKS),
                                    ("width_factor", int), ("parts", dict),
                                    ("part_defaults", dict), ("input", dict), ("input_beside", list),
                                    ("output", dict), ("part_reads", dict),
                                    ("versions", dict), ("architectures", dict))
              if key in table and not isinstance(table[key], kind)]
    if wrong:
        raise ValueError(f"{where}: {wrong[0]} has the wrong type ({table[wrong[0]]!r})")
    values = {k: v for k, v in table.items() if k not in ("encoding", *FACT_KINDS)}
    if "versions" in values:  # each range: the row's columns with its own over them
        ranges = []
        for text, sub in values["versions"].items():
            check_range(where, text)
            if not isinstance(sub, dict) or "versions" in sub or "release" not in sub or "source" not in sub:
                raise ValueError(f"{where}: versions.{text} must be a table of columns with its own source and "
                                 f"release (no versions of its own), got {sub!r}")
            ranges.append((text, read_row(model_type, {**{k: v for k, v in table.items() if k != "versions"}, **sub},
                                          where)))
        values["versions"] = tuple(ranges)
    if "part_reads" in values:
        if not all(isinstance(k, str) and isinstance(v, list) and v and all(isinstance(i, str) for i in v)
                   for k, v in values["part_reads"].items()):
            raise ValueError(f"{where}: part_reads maps section paths to lists of inputs")
        stray = sorted({i for v in values["part_reads"].values() for i in v} - set(INPUTS))
        if stray:
            raise ValueError(f"{where}: part_reads names inputs that are not refpos.models.sources.INPUTS: {stray}")
        values["part_reads"] = tuple((k, tuple(v)) for k, v in values["part_reads"].items())
    values["positions"] = read_stack(where, table)
    for name in OWN_STACKS:
        if name in values:
            own = dict(values[name])
            if "input" in own:
                site = own.pop("input")
                if not isinstance(site, dict) or "encoding" not in site or set(site) & {"when", "when_absent"}:
                    raise ValueError(f"{where}: {name}.input takes encoding = \"<kind>\" and its facts (when is "
                                     f"the row's); got {site!r}")
                values.setdefault("stack_inputs", []).append((name, read_stack(f"{where} {name} input", site)))
            values[name] = read_stack(f"{where} {name}", own, inherited=values["positions"])
    if "stack_inputs" in values:
        values["stack_inputs"] = tuple(values["stack_inputs"])
    if "input" in values:
        site = dict(values["input"])
        when, absent = site.pop("when", None), site.pop("when_absent", False)
        if "encoding" not in site or (when is not None and not isinstance(when, str)) or not isinstance(absent, bool):
            raise ValueError(f"{where}: input takes encoding = \"<kind>\", its facts, and optionally when = \"<bool "
                             f"key>\", when_absent = true|false; got {values['input']!r}")
        values["input"] = read_stack(f"{where} input", site)
        values["input_when"] = None if when is None else (when, absent)
    if "input_beside" in values:
        sites = []
        for site in values["input_beside"]:
            site = dict(site) if isinstance(site, dict) else {}
            when, absent = site.pop("when", None), site.pop("when_absent", False)
            if "encoding" not in site or (when is not None and not isinstance(when, str)) or not isinstance(absent,
                                                                                                              bool):
                raise ValueError(f"{where}: input_beside takes a list of tables, each encoding = \"<kind>\", its facts "
                                 f"and optionally when = \"<bool key>\", when_absent = true|false; got "
                                 f"{values['input_beside']!r}")
            sites.append((read_stack(f"{where} input_beside", site), None if when is None else (when, absent)))
        values["input_beside"] = tuple(sites)
    if "output" in values:
        if "encoding" not in values["output"]:
            raise ValueError(f"{where}: output takes encoding = \"<kind>\" and its facts; got {values['output']!r}")
        values["output"] = read_stack(f"{where} output", dict(values["output"]))
    if "switch" in values:
        values["switch"] = read_switch(where, values["switch"])
    if "cross_attention" in values:
        values["cross_attention"] = read_cross(where, values["cross_attention"])
    if "stages" in values:
        values["stages"] = read_stages(where, values["stages"])
    try:
        if "layer_pattern" in values:
            pattern = dict(values["layer_pattern"])
            if "chars" in pattern:
                pattern["chars"] = tuple(sorted(dict(pattern["chars"]).items()))
            values["layer_pattern"] = LayerPattern(**pattern)
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"{where}: layer_pattern takes every, key, indices, other, absent, listed, offset, "
                         f"start, one_based, chars ({exc})") from None
    if "no_attention" in values:
        pairs = values["no_attention"].items()
        if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in pairs):
            raise ValueError(f"{where}: no_attention maps layer types to kind names (str)")
        values["no_attention"] = tuple(sorted(pairs))
    if "rope_dict" in values:
        values["rope_dict"] = frozenset(values["rope_dict"])
    if "ignores" in values:
        values["ignores"] = tuple(values["ignores"])
    if "architectures" in values:
        values["architectures"] = tuple(values["architectures"].items())
    for name in ("parts", "part_defaults"):
        if name in values:
            if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in values[name].items()):
                raise ValueError(f"{where}: {name} maps section paths to model types (str)")
            values[name] = tuple(values[name].items())
    return Family(model_type, **values)


def tables(text: str | None = None) -> dict[str, Any]:
    """``families.toml`` (or ``text`` in its format) as TOML tables: ``{"aliases": {...}, "family": {...}}``."""
    if text is None:
        text = resources.files("refpos").joinpath("models", "data", "families.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def load(text: str | None = None) -> tuple[tuple[Family, ...], dict[str, str]]:
    """The rows and aliases of ``families.toml`` (or of ``text`` in its format), rows in file order."""
    data = tables(text)
    if set(data) != {"aliases", "family"}:
        raise ValueError(f"{TABLE_PATH}: expected the tables [aliases] and [family.*], got {sorted(data)}")
    rows = tuple(read_row(model_type, table) for model_type, table in data["family"].items())
    aliases = data["aliases"]
    known = {row.model_type for row in rows}
    bad = {alias: target for alias, target in aliases.items() if target not in known or alias in known}
    if bad:
        raise ValueError(f"{TABLE_PATH} [aliases]: each alias must name a row and not be one: {bad}")
    unknown_parts = {f"{row.model_type}.{path}": target for row in rows
                     for path, target in (*row.parts, *row.part_defaults)
                     if target not in known and target not in aliases}
    if unknown_parts:
        raise ValueError(f"{TABLE_PATH}: parts must name rows of the table: {unknown_parts}")
    return rows, dict(aliases)


#: one row per model_type (transformers 5.24, files under transformers/models/), in the file's order
FAMILY_ROWS: tuple[Family, ...]
#: model_types that are a known family under another name (the hub config's ``architectures`` names the
#: transformers class): Kimi-K2 ships ``model_type: kimi_k2`` with ``DeepseekV3ForCausalLM``
ALIASES: dict[str, str]
FAMILY_ROWS, ALIASES = load()
FAMILIES: dict[str, Family] = {row.model_type: row for row in FAMILY_ROWS}
#: each row as the table writes it (a caller who borrows a family states columns over its table:
#: :mod:`refpos.models.stated`)
ROW_TABLES: dict[str, dict[str, Any]] = tables()["family"]


def family_of(model_type: str | None) -> Family | None:
    """The row of ``model_type`` (aliases followed), or ``None`` when the table does not know it."""
    if model_type is None:
        return None
    if not isinstance(model_type, str):
        raise TypeError("model_type must be a string, a transformers model type such as 'llama', got "
                        f"{type(model_type).__name__} {model_type!r}")
    return FAMILIES.get(ALIASES.get(model_type, model_type))


def warn_assumed(model_type: str | None, *, stacklevel: int = 2) -> None:
    """Warn (:class:`UnknownFamilyWarning`) that ``model_type`` is not in the table and its layout is assumed;
    ``stacklevel`` as :func:`warnings.warn` counts it from this function's caller."""
    named = "no model_type" if model_type is None else f"model_type {model_type!r}"
    warnings.warn(f"{named} is not in refpos's family table: half-split pairs and RoPE on every layer are "
                  "assumed, not read from the model's code (the resolution reports it as not modelled)",
                  UnknownFamilyWarning, stacklevel=stacklevel + 1)


def table_summary() -> dict[str, int]:
    """Counts of the table: model types, aliases, rows that differ from the default."""
    return {"model_types": len(FAMILY_ROWS), "aliases": len(ALIASES),
            "differ_from_default": sum(not row.is_default for row in FAMILY_ROWS),
            **{f"encoding {enc}": sum(enc in row.encodings for row in FAMILY_ROWS) for enc in TABLE_KINDS}}


__all__ = ["ALIASES", "COLUMNS", "FAMILIES", "FAMILY_ROWS", "ROW_TABLES", "SOURCE_FORM", "STATED",
           "TRANSFORMERS_SOURCE", "Family", "LayerPattern", "UnknownFamilyWarning", "family_of", "load", "read_row",
           "table_summary", "tables", "warn_assumed"]
