"""How refpos.model_positions answers every model type of the installed transformers: complete, refused by name,
unknown, or an error — in all, and per encoding kind of the records.

For each type of transformers' ``CONFIG_MAPPING`` the default config of its class (``AutoConfig.for_model(t)``,
as ``to_dict()`` writes it) is resolved. A resolution is *complete* when nothing is refused, unknown or not
modelled; *refused by name* when it is not complete but every network is resolved by a family row or refused
naming what it does (a key, a model type); *unknown* when a model type is not in the family table at all; an
*error* when the resolution raises (a config its class builds but refpos cannot read), and *config error* when
the config class does not build with its defaults.

A resolution that raises is checked against transformers itself: the type's language model is built from the same
class-default config (its layer count cut to one and its experts to four, which changes no position) and run on six
token ids. Where transformers' own model raises too, the outcome is *model error* — a default config its own model
cannot run (GLM-4V's M-RoPE sections [8, 12, 12] over a head of 64 frequency pairs; Qwen3-Omni-MoE's head of
2048 // 28 = 73 channels, rotated by 74), so refpos's refusal is right — and the evidence is transformers' error;
where it runs, the outcome stays *error*: refpos is wrong there.

Usage (an environment with transformers; refpos importable)::

    python scripts/model_type_coverage.py                  # the counts
    python scripts/model_type_coverage.py --json out.json  # and every model type's outcome
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter
from pathlib import Path

import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

import refpos

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's survey package, beside scripts/

OUTCOMES = ("complete", "refused", "unknown", "error", "model_error", "config_error")
#: what the language model is cut to before it is run (nothing positional): one layer, four experts of two each
CUT = {"num_hidden_layers": 1, "n_routed_experts": 4, "num_experts": 4, "num_local_experts": 4,
       "num_experts_per_tok": 2, "first_k_dense_replace": 0}


def _language_model(config: object) -> tuple[object, type]:
    """The language model's config of a composite (or the config itself) and the class transformers builds for it,
    as the survey finds them (:func:`survey.building.language_config`, :func:`survey.building.model_class`)."""
    from survey import building

    config = building.language_config(config) or config
    found = building.model_class(config)
    if found is None:
        raise LookupError(f"transformers has no model class for {type(config).__name__}")
    return config, found


def transformers_runs(model_type: str) -> str:
    """``""`` when transformers runs the type's language model built from its class-default config (cut by
    :data:`CUT`) on six token ids, else its error, one line, with where it was raised."""
    import traceback

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            config, cls = _language_model(transformers.AutoConfig.for_model(model_type))
            values = config.to_dict()
            values.update({key: value for key, value in CUT.items() if getattr(config, key, None)})
            values.pop("model_type", None)
            torch.manual_seed(0)
            model = cls(type(config)(**values)).eval()
            with torch.no_grad():
                model(input_ids=torch.arange(6)[None])
        except Exception as exc:  # transformers' own error is the evidence
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = frame.filename.split("site-packages/")[-1]
            return f"{cls.__name__}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]} ({where}:{frame.lineno})"
    return ""


def outcome(model_type: str) -> tuple[str, tuple[str, ...], str]:
    """``(outcome, the kinds of its records, why)`` for one model type (module docstring)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = transformers.AutoConfig.for_model(model_type).to_dict()
    except Exception as exc:  # a config class that does not build is an outcome
        return "config_error", (), f"{type(exc).__name__}: {exc}"[:200]
    try:
        positions = refpos.model_positions(config)
    except (TypeError, ValueError) as exc:
        why = f"{type(exc).__name__}: {exc}"[:200]
        evidence = transformers_runs(model_type)
        if evidence:
            return "model_error", (), f"{why}; transformers' own model raises too: {evidence}"
        return "error", (), f"{why}; transformers runs this config"
    kinds = tuple(sorted({record.kind for record in positions}))
    if positions.complete:
        return "complete", kinds, ""
    why = "; ".join(f"{key}: {what}" for key, what in {**positions.unknown, **positions.not_modelled}.items())
    if positions.unknown or any(record.kind == "unknown" for record in positions):
        return "unknown", kinds, why[:200]
    return "refused", kinds, why[:200]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write every model type's outcome to this file")
    args = parser.parse_args()
    results = {model_type: outcome(model_type) for model_type in sorted(CONFIG_MAPPING.keys())}
    counts = Counter(result[0] for result in results.values())
    print(f"transformers {transformers.__version__}: {len(results)} model types")
    print("  " + ", ".join(f"{name} {counts[name]}" for name in OUTCOMES))
    per_kind: dict[str, Counter] = {}
    for result, kinds, _ in results.values():
        for kind in kinds:
            per_kind.setdefault(kind, Counter())[result] += 1
    print("per kind of record (a model type counts under each kind it has):")
    for kind, kind_counts in sorted(per_kind.items()):
        print(f"  {kind:14s} " + ", ".join(f"{name} {kind_counts[name]}" for name in OUTCOMES if kind_counts[name]))
    if args.json:
        with open(args.json, "x", encoding="utf8") as out:
            json.dump({t: {"outcome": r, "kinds": list(k), "why": w} for t, (r, k, w) in results.items()}, out,
                      indent=1)


if __name__ == "__main__":
    main()
