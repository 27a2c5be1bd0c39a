"""How refpos.model_positions answers every model type of the installed transformers: complete, refused by name,
unknown, or an error — in all, and per encoding kind of the records.

For each type of transformers' ``CONFIG_MAPPING`` the default config of its class (``AutoConfig.for_model(t)``,
as ``to_dict()`` writes it) is resolved. A resolution is *complete* when nothing is refused, unknown or not
modelled; *refused by name* when it is not complete but every network is resolved by a family row or refused
naming what it does (a key, a model type); *unknown* when a model type is not in the family table at all; an
*error* when the resolution raises (a config its class builds but refpos cannot read), and *config error* when
the config class does not build with its defaults.

Usage (an environment with transformers; refpos importable)::

    python scripts/model_type_coverage.py                  # the counts
    python scripts/model_type_coverage.py --json out.json  # and every model type's outcome
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections import Counter

import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

import refpos

OUTCOMES = ("complete", "refused", "unknown", "error", "config_error")


def outcome(model_type: str) -> tuple[str, tuple[str, ...], str]:
    """``(outcome, the kinds of its records, why)`` for one model type."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = transformers.AutoConfig.for_model(model_type).to_dict()
    except Exception as exc:  # noqa: BLE001 — a config class that does not build is an outcome
        return "config_error", (), f"{type(exc).__name__}: {exc}"[:200]
    try:
        positions = refpos.model_positions(config)
    except (TypeError, ValueError) as exc:
        return "error", (), f"{type(exc).__name__}: {exc}"[:200]
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
