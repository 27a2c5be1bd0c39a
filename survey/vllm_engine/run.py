"""One vLLM architecture observed (vLLM's side, stored) and judged (refpos's side), as the transformers survey does.

:func:`observe` finds the architecture's config (:mod:`survey.vllm_engine.configs`), shrinks it
(:func:`survey.tiny.shrink`, strengths ``tiny`` then ``widths``: vLLM allocates every weight, so the shipped
widths are not built), writes it as a ``config.json``, builds vLLM's model class from it on the CPU
(:mod:`survey.vllm_engine.engine`; a speculative draft as a draft of itself) and runs it recorded
(:mod:`survey.vllm_engine.probe`); a speculative head built from its target's config is not compared (its layers
are not the ones the config's decoder counts, the row says so). The result is a
:class:`survey.run.Observation` whose row has ``engine = "vllm"`` and the architecture: stored by
:mod:`survey.store` like the transformers side's, one directory per engine and release.

:func:`judge` is the transformers survey's own :func:`survey.run.judge` (refpos asked about the same config dict,
the same comparison and bounds, the same statuses), the row's words naming vLLM where they name the engine run.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from survey import observed, tiny
from survey.run import Observation, Row, _one_line, judge_quietly
from survey.vllm_engine import configs, engine, explain, repairs
from survey.vllm_engine import probe as vllm_probe

ENGINE = "vllm"
#: the shrink strengths tried (survey.tiny.STRENGTHS less those that keep the shipped widths)
STRENGTHS = ("tiny", "widths")
#: router settings vLLM's DeepSeek-V2 family requires where the config class leaves them unset (None): one expert
#: group, as DeepSeek-V2-Lite's config.json states. The experts' output is zeros here
#: (:func:`survey.vllm_engine.engine.start`), so no position the survey compares depends on them
ROUTER = {"n_group": 1, "topk_group": 1}
#: a checkpoint's weight quantization (a published FP8 release's ``quantization_config``): not built, as the
#: survey builds float32 weights of its own, which vLLM's quantized layers refuse on the CPU; no position depends on it
QUANTIZATION = "quantization_config"
#: groups whose architectures run other code than vLLM's own model classes
BACKEND = "transformers backend"
#: the group of the drafts a speculative decoder proposes tokens with (built as drafts of themselves)
SPECULATIVE = "speculative"


def version() -> str:
    import importlib.metadata

    return importlib.metadata.version("vllm")


def _build_and_probe(architecture: configs.Architecture, config0: Any,
                     notes: list[str]) -> tuple[dict[str, Any], Any, str]:
    """``(config dict, probe, strength)`` of the first strength that builds and runs; ``notes`` gets the fields
    :mod:`survey.vllm_engine.repairs` stated for it."""
    reasons = []
    for strength in STRENGTHS:
        try:
            config = tiny.shrink(config0, strength)
            values = config.to_dict()
            values["architectures"] = [architecture.name]
            values.pop(QUANTIZATION, None)
            values.update({k: v for k, v in ROUTER.items() if k in values and values[k] is None})
            values, stated = repairs.repaired(values)
            with tempfile.TemporaryDirectory(prefix="refpos-vllm-") as directory, engine.isolated():
                (Path(directory) / "config.json").write_text(json.dumps(values, default=str), encoding="utf-8")
                engine_config = engine.engine_config(Path(directory), draft=architecture.group == SPECULATIVE)
                with engine.record_attention(vllm_probe.record):
                    model = engine.build(architecture.name, engine_config)
                    hf_config = engine_config.model_config.hf_config
                    run = vllm_probe.probe(model, engine_config, hf_config)
                    stated += vllm_probe.offset_notes(model, hf_config)
            notes.extend(stated)
            return values, run, strength
        except Exception as exc:  # vLLM's own errors for a geometry: try the next strength
            reasons.append(f"{strength}: {_one_line(exc)}")
    raise RuntimeError("no geometry built and ran (" + "; ".join(reasons) + ")")


def _tiny_values(config: Any) -> dict[str, Any]:
    """The config dict refpos is asked about where vLLM did not run: shrunk where it shrinks, else as it is."""
    with contextlib.suppress(Exception):
        return tiny.shrink(config, "tiny").to_dict()
    return config.to_dict()


def observe(architecture: configs.Architecture) -> Observation:
    """vLLM's side of one architecture (module docstring); the row says why where it could not be run."""
    row = Row("", "not reached", file=architecture.file, engine=ENGINE, architecture=architecture.name)
    if architecture.group == BACKEND:
        row.cause = ("vLLM's Transformers backend: it runs transformers' own modeling code, which the transformers "
                     "survey measures")
        return Observation({}, None, row, engine=ENGINE)
    try:
        found = configs.config_for(architecture)
    except Exception as exc:
        row.cause = "its config class does not build with defaults: " + _one_line(exc)
        return Observation({}, None, row, engine=ENGINE)
    if found is None:
        row.cause = ("no config: transformers names no model type for it, vLLM has no config class of its own, and "
                     "no public config.json of it is stored, nor a recipe of its keys "
                     "(survey/vllm_engine/recipes.toml)")
        return Observation({}, None, row, engine=ENGINE)
    row.model_type = found.model_type
    row.notes.append(f"config: {found.origin}")
    if getattr(found.config, QUANTIZATION, None):
        row.notes.append(f"{QUANTIZATION}: the checkpoint's weight quantization, not built (float32 weights)")
    if found.head_of:
        row.cause = (f"a speculative head of {found.head_of}: its layers are the target's multi-token prediction "
                     "layers, numbered after the target's decoder layers, which refpos's answer for the target's "
                     f"config does not describe (the target's decoder layers are compared in {found.head_of}'s row)")
        return Observation(_tiny_values(found.config), None, row, engine=ENGINE)
    missing = configs.missing_import(architecture)
    if missing is not None:
        row.cause = f"vLLM's module {architecture.file} does not import here: {missing}"
        return Observation(_tiny_values(found.config), None, row, engine=ENGINE)
    try:
        values, run, row.strength = _build_and_probe(architecture, found.config, row.notes)
    except Exception as exc:
        row.cause = "vLLM not run: " + _one_line(exc)
        return Observation(_tiny_values(found.config), None, row, engine=ENGINE)
    row.observed = observed.observed_kinds(run)
    if not run.a.calls:
        row.notes.append("no attention layer of vLLM's was called")
    return Observation(values, run, row, engine=ENGINE)


def observe_quietly(architecture: configs.Architecture) -> Observation:
    """:func:`observe` with warnings and prints silenced, a failure of the survey itself recorded."""
    started = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            seen = observe(architecture)
        except Exception as exc:  # a bug of the survey itself must not stop the survey: recorded
            row = Row("", "not reached", file=architecture.file, engine=ENGINE, architecture=architecture.name,
                      cause="survey failed: " + _one_line(exc))
            row.notes.append(traceback.format_exc(limit=3).splitlines()[-1])
            seen = Observation({}, None, row, engine=ENGINE)
    seen.row.seconds = time.perf_counter() - started
    return seen


#: how a wrong row's note on what vLLM computes begins (:mod:`survey.vllm_engine.explain`)
MATCHES = "vLLM's run is exact against refpos's answer changed to"
#: the comparison's words for the engine it ran, and what they read for this engine
_WORDS = (("transformers' rotary apply function", "vLLM's rotary module"), ("transformers", "vLLM"))


def judge(seen: Observation) -> Row:
    """refpos's answer for the observed config against vLLM's run (:func:`survey.run.judge`)."""
    row = judge_quietly(seen)
    if seen.run is None:
        return row
    for old, new in _WORDS:
        row.cause = row.cause.replace(old, new)
        row.notes = [note.replace(old, new) if not note.startswith("config:") else note for note in row.notes]
    if row.status == "wrong":
        change = explain.matching_change(seen.config, seen.run)
        row.notes.append(f"{MATCHES} {change}" if change else f"{MATCHES} none of the single changes tried")
    return row
