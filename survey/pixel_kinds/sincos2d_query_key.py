r"""The ``sincos2d`` comparison of a sine map added inside attention: DETR's on the queries and keys of each
encoder layer (``at = "query_key"``) and on each decoder layer's cross-attention keys (``at = "cross_keys"``),
the decoder's tokens carrying a learned table of object queries (``queries = "learned"``).

Observed (:mod:`survey.pixel_query_key`): each attention module's states and the first input of its ``q_proj``,
``k_proj`` and ``v_proj`` at its first call. What a projection's input gained is its input minus the states it
projects — the module's own tokens for the query, and for the key and value the memory's in a cross-attention
(``key_value_states``), its own tokens otherwise. A record's modules are those under ``<stack>.layers.<index>.``:
the one projecting its own tokens (self-attention) and the one handed the memory (cross-attention). A layer whose
attention feeds its projections their states unchanged adds nothing (a claim of a map there is wrong); a layer
without such projections is not reached (the survey cannot see what it adds).

* ``query_key`` (an encoder layer): its self-attention's query and key gain refpos's sine map, its value nothing;
* ``cross_keys`` (a decoder layer): its cross-attention's key gains the sine map of the memory, its value nothing;
  its self-attention's query and key and its cross-attention's query gain the object queries — refpos's
  ``query_rows`` rows of a learned table, the run's site of that shape (its seeded draw) — and its self-attention's
  value nothing.

The sine map is refpos's :meth:`~refpos.models.kinds.sincos2d.Sincos2dLayer.reference` (the kind's check target,
:class:`~refpos.encodings.sincos2d_mistakes.Sincos2dInputs`) of an all-ones mask — the survey feeds no pixel
mask, and the model's own is all ones — at the memory's feature map ``(H, W)``: the factor pair of the memory's
token count ``N = H·W`` whose ratio is nearest the image's (its ``H/W``), one pair only or not reached; tokens row
by row (the map flattened as ``(C, H, W) → (H·W, C)``).

**Bound.** A gain is ``fl(s + p) − s``: the sum rounded once and the difference once, ``|Δ| ≤ 2u·|s + p|`` per
entry (``u`` the run's unit roundoff), plus refpos's float32 bound of the map (its angles and ``sin``/``cos``,
:meth:`Sincos2dInputs.bound`) as it is, in a float64 run too: a model may build its map in float32 whatever it runs
in (Table Transformer's counts are ``cumsum(dtype=float32)``, its frequencies ``.float()``); a learned row is the
drawn weight itself, exact. The
wrong answers told apart: every catalogued mistake of ``refpos check sincos2d`` (axes, ``sin``/``cos`` swapped,
layout, not normalised, scale, offset, zero-based counts), a temperature ten times the config's, the map added at
the input instead (the value gains it too), on the keys only or the queries only, the object queries missing or
in reverse row order.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from survey.pixel_kinds.base import Outcome, check_target, graded, mistakes_of, unit
from survey.pixel_query_key import UNCHANGED
from survey.pixels import PixelRun, Site

#: where a memory's states are handed to a cross-attention (:data:`survey.pixel_query_key.STATES`)
MEMORY = ("key_value_states", "encoder_hidden_states")


def _modules(record: Any, calls: dict[str, dict[str, np.ndarray]]) -> tuple[str | None, str | None]:
    """``(self-attention, cross-attention)`` paths of the record's layer (module docstring), each None if absent."""
    layer = re.compile(rf"(^|\.){re.escape(record.stack)}\.(layers|layer|blocks)\.{record.index}\.")
    paths = [path for path in calls if layer.search(path) and "q_proj.input" in calls[path]]
    if not paths and any(layer.search(path) and UNCHANGED in calls[path] for path in calls):  # adds nothing
        return UNCHANGED, None
    own = next((p for p in paths if not any(k in calls[p] for k in MEMORY)), None)
    cross = next((p for p in paths if any(k in calls[p] for k in MEMORY)), None)
    return own, cross


def _gains(call: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per projection (``q``, ``k``, ``v``): ``(gain, bound of the subtraction)``, one row per token."""
    tokens = call["hidden_states"].astype(np.float64)
    memory = next((call[k].astype(np.float64) for k in MEMORY if k in call), tokens)
    out = {}
    for name, states in (("q", tokens), ("k", memory), ("v", memory)):
        seen = call[f"{name}_proj.input"].astype(np.float64)
        out[name] = ((seen - states).reshape(-1, seen.shape[-1]), seen.reshape(-1, seen.shape[-1]))
    return out


def _grid(tokens: int, image: list[int]) -> tuple[int, int] | None:
    """The factor pair ``(H, W)`` of ``tokens`` nearest the image's aspect ratio; None where two are as near."""
    ratio = image[-2] / image[-1]
    pairs = sorted((abs(np.log((h / (tokens // h)) / ratio)), h) for h in range(1, tokens + 1) if tokens % h == 0)
    if len(pairs) > 1 and np.isclose(pairs[0][0], pairs[1][0]):
        return None
    return pairs[0][1], tokens // pairs[0][1]


def _sine(record: Any, grid: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray | None]]:
    """refpos's map at ``grid`` row by row, its float32 bound, and the wrong maps (module docstring)."""
    from dataclasses import replace

    from refpos.encodings.sincos2d_mistakes import Sincos2dInputs

    inputs = Sincos2dInputs(record.variant, {"mask": np.ones(grid, dtype=bool), "num_features": record.features,
                                             **dict(record.settings)})
    reference, bound = check_target("sincos2d").reference(inputs)
    temperature = inputs.keywords().get("temperature", 10000.0)
    wrong = mistakes_of("sincos2d", inputs) | {"a temperature ten times the config's": replace(
        inputs, changed={"temperature": temperature * 10.0}).output()}

    def flat(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.asarray(a, dtype=np.float64).reshape(-1, np.shape(a)[-1])
    return flat(reference), np.broadcast_to(flat(bound), flat(reference).shape), {k: flat(v) for k, v in wrong.items()}


def _query_table(record: Any, run: PixelRun, width: int) -> tuple[Site, np.ndarray] | None:
    """The run's site holding a ``(query_rows, width)`` table: the object queries' drawn weights."""
    for site in run.sites:
        for table in site.params.values():
            if table.shape == (record.query_rows, width):
                return site, table.astype(np.float64)
    return None


def compare_query_key(record: Any, run: PixelRun) -> Outcome:
    """A sine map on the queries and keys, or on a decoder's cross-attention keys (module docstring)."""
    what = f"{record.stack} layer {record.index} sincos2d({record.variant}) at {record.at}"
    if record.record.builder != "mask" or not run.query_key:
        return Outcome("not reached", f"{what}: the survey compares a sine map of an all-ones pixel mask on the "
                       "projections' inputs" + ("" if run.query_key else "; the run recorded no attention inputs"))
    u = unit(run)
    cases: list[tuple] = []
    sites: tuple[str, ...] = ()
    for size, calls in run.query_key.items():
        own, cross = _modules(record, calls)
        if own == UNCHANGED:
            return Outcome("wrong", f"{what}: the attention of {record.stack} layer {record.index} feeds its q_proj, "
                           f"k_proj and v_proj their states unchanged at the {size} size: nothing is added to its "
                           "queries and keys", sites)
        keyed = own if record.at == "query_key" else cross
        if keyed is None:
            return Outcome("not reached", f"{what}: no {'self' if record.at == 'query_key' else 'cross'}-attention "
                           f"with q_proj, k_proj and v_proj ran under {record.stack}.layers.{record.index} at the "
                           f"{size} size (the survey reads the position added inside attention on them)", sites)
        gains = _gains(calls[keyed])
        grid = _grid(gains["k"][0].shape[0], run.shapes[size])
        if grid is None:
            return Outcome("not reached", f"{what}: {gains['k'][0].shape[0]} memory tokens of a "
                           f"{run.shapes[size][-2:]} image fit two feature maps equally", sites)
        sine, bound, wrong = _sine(record, grid)
        zeros = np.zeros_like(sine)
        (k, k_in), (v, v_in) = gains["k"], gains["v"]
        cases.append((k, sine, bound + 2 * u * np.abs(k_in), wrong | {"on the queries only": zeros}))
        cases.append((v, zeros, 2 * u * np.abs(v_in), {"added at the input (the values gain it too)": sine}))
        if record.at == "query_key":
            q, q_in = gains["q"]
            cases.append((q, sine, bound + 2 * u * np.abs(q_in), wrong | {"on the keys only": zeros}))
            continue
        if record.queries != "learned":
            return Outcome("not reached", f"{what}: the survey compares a decoder's queries carrying a learned table "
                           f"(these: {record.queries})", sites)
        found = _query_table(record, run, sine.shape[-1])
        if found is None:
            return Outcome("wrong", f"{what}: refpos's object queries are a learned table of {record.query_rows} "
                           f"rows × {sine.shape[-1]}; the run holds none of that shape "
                           f"({', '.join(s.path for s in run.sites) or 'no site'})", sites)
        site, table = found
        sites = (site.path,)
        queries = {"the object queries missing": np.zeros_like(table),
                   "the object queries in reverse row order": table[::-1]}
        tokens = [(calls[cross], ("q",))] + ([(calls[own], ("q", "k"))] if own is not None else [])
        for call, projections in tokens:
            for name in projections:
                gain, seen = _gains(call)[name]
                cases.append((gain, table, 2 * u * np.abs(seen), queries))
        if own is not None:
            v, v_in = _gains(calls[own])["v"]
            cases.append((v, np.zeros_like(v), 2 * u * np.abs(v_in), {"the values gain the object queries": table}))
    return graded(cases, sites, what)
