"""The survey's committed tables (``survey/results/transformers-<version>.json``, one per transformers release) and
the page rendered from them (``docs/survey.md``).

Each JSON holds one row per model type (:class:`survey.run.Row`), the versions it ran on, the refpos
interface it asked, the date and the wall time. :func:`render` writes the page: the counts per status and
release, the counts per encoding (what transformers' run showed) and status, the model types that changed
between releases, the wrong answers the survey could not tell, every row, then the second engine's section
(:mod:`survey.vllm_engine.table`). Nothing on the page is typed by hand.

A model type of the installed transformers that its release's table does not list is *new*: a run says so
(``new_types``), and the sample test fails on it until the table is regenerated.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from survey.within import WITHIN

ROOT = Path(__file__).resolve().parent.parent
#: one table per transformers release: ``transformers-<version>.json``
RESULTS = ROOT / "survey" / "results"
PAGE = ROOT / "docs" / "survey.md"
STATUSES = ("exact", "refused", "wrong", "error", "not reached")
#: how a row's note begins when a composite's language model was run alone (:func:`survey.run.build_language_model`)
LANGUAGE_ALONE = "the language model alone"
#: how each status reads on the page
MEANING = {
    "exact": "refpos's answer for every layer matches what transformers' code computes, within the float32 bound",
    "refused": "refpos declines by name (the model type, or a key or code path it does not model)",
    "wrong": "refpos answers without a refusal, and some layer differs from transformers",
    "error": "refpos raises an error that is not a refusal on a config transformers builds and runs",
    "not reached": "transformers' side could not be built, run or observed generically (the reason is given)",
}


def path_for(version: str) -> Path:
    """The committed table of transformers ``version``."""
    return RESULTS / f"transformers-{version}.json"


def _version_key(path: Path) -> tuple[int, ...]:
    release = path.stem.removeprefix("transformers-")
    return tuple(int(part) if part.isdigit() else -1 for part in release.split("."))


def committed_paths() -> list[Path]:
    """The committed tables, oldest release first."""
    return sorted(RESULTS.glob("transformers-*.json"), key=_version_key)


def load(path: Path | None = None) -> dict[str, Any]:
    """A committed table (``{"meta": ..., "rows": [...]}``; the newest release's when ``path`` is None); an
    empty one when there is none."""
    if path is None:
        found = committed_paths()
        path = found[-1] if found else RESULTS / "none.json"
    if not path.is_file():
        return {"meta": {}, "rows": []}
    return json.loads(path.read_text(encoding="utf-8"))


def load_all() -> list[dict[str, Any]]:
    """Every committed table, oldest release first."""
    return [load(path) for path in committed_paths()]


def save(table: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def new_types(installed: list[str], table: dict[str, Any]) -> list[str]:
    """Model types of the installed transformers that the table does not list."""
    known = {row["model_type"] for row in table["rows"]}
    return [name for name in installed if name not in known]


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = dict.fromkeys(STATUSES, 0)
    for row in rows:
        out[row["status"]] += 1
    return out


def _has_tower(row: dict[str, Any]) -> bool:
    return bool(row.get("towers"))


def tower_outcomes(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many composites' towers (:mod:`survey.towers`) came out each way (compared and exact, wrong, refused by
    refpos, not run, not compared), from each row's ``towers``."""
    found: dict[str, int] = {}
    for row in rows:
        for outcome in row.get("towers", {}).values():
            found[outcome] = found.get(outcome, 0) + 1
    return found


def encoding_of(row: dict[str, Any]) -> str:
    """The row's encoding as transformers' run showed it (several joined by +), "run within its composite" for a
    part run inside the composite holding it (:mod:`survey.within`), or "not run"."""
    if row["observed"] and row["observed"][0].startswith(WITHIN):
        return WITHIN + "its composite"
    return " + ".join(row["observed"]) if row["observed"] else "not run"


def _not_run_text(row: dict[str, Any]) -> str:
    """What a row without an observation says of transformers' run: its "transformers not run" note, else its cause."""
    text = next((n for n in row["notes"] if n.startswith("transformers not run: ")), row["cause"])
    return text.removeprefix("transformers not run: ")


def not_run_reasons(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Why the rows without an observation were not run, grouped, most frequent first."""
    found: dict[str, int] = {}
    for row in rows:
        if row["observed"]:
            continue
        text = _not_run_text(row)
        if text.startswith("its forward takes no input_ids ("):
            why = f"its forward takes `{text.split('(', 1)[1].split(',')[0].rstrip(')')}`, not token ids"
        elif text.startswith("no geometry built and ran"):
            why = "no shrunk geometry builds and runs (transformers' error at each strength is in the row)"
        else:
            why = text.split(":", 1)[0]
        found[why] = found.get(why, 0) + 1
    return sorted(found.items(), key=lambda item: (-item[1], item[0]))


def _timing(meta: dict[str, Any]) -> str:
    """How long the run took: observation (in how many processes) and judgement, or one process for both."""
    if "observe_s" in meta:
        seen = meta.get("observed")
        what = "transformers" if seen is None else f"{seen} model types"
        stopped = "" if seen is None or "stopped" not in meta else (
            f" (of {meta['stopped']}; the others have no observation: `python -m survey observe` adds them to the "
            "store and keeps what is there)")
        return (f"{what} observed in {meta['observe_s']} s with {meta.get('jobs', '?')} processes{stopped} "
                f"(`python -m survey observe`), refpos judged in {meta.get('judge_s', '?')} s "
                "(`python -m survey judge`)")
    return f"{meta.get('wall_s', '?')} s in one process (`{meta.get('command', 'python -m survey run')}`)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _release(table: dict[str, Any]) -> str:
    return str(table["meta"].get("transformers", "?"))


#: how the cause of a row begins whose model type a stopped observation run did not reach (:mod:`survey.stored`)
NOT_OBSERVED = "not observed: the observation run stopped before it"


def unobserved(row: dict[str, Any]) -> bool:
    """Whether the row stands for no observation at all (a stopped run): nothing was measured."""
    return row["cause"].startswith(NOT_OBSERVED)


def not_run(row: dict[str, Any]) -> bool:
    """Whether transformers' run showed nothing for the row (no geometry built, an input the run does not feed):
    what the row says is the survey's reach at that run, not the release's code."""
    return encoding_of(row) == "not run"


#: what a row's comparison between releases looks at: the verdict, the encodings seen, refpos's answer, the
#: recorded queries and keys (their fingerprint), the wrong answers that survived
COMPARED = ("status", "observed", "layers", "fingerprint", "survived")


def changes(tables: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """``(model type, releases, what changed)`` between each release and the next: model types new or gone,
    and those whose observation or verdict differs (:data:`COMPARED`)."""
    out = []
    for old, new in itertools.pairwise(tables):
        pair = f"{_release(old)} → {_release(new)}"
        before = {r["model_type"]: r for r in old["rows"]}
        after = {r["model_type"]: r for r in new["rows"]}
        for name, row in after.items():
            if name in before and any(unobserved(r) or not_run(r) for r in (row, before[name])):
                continue  # one of the two releases has no observation of its model's run: nothing to compare
            if name not in before:
                out.append((name, pair, f"new: {row['status']}" + (" (not observed)" if unobserved(row) else "")))
                continue
            was = before[name]
            differ = [key for key in COMPARED if was.get(key) != row.get(key)]
            if differ:
                what = [f"{was['status']} → {row['status']}" if "status" in differ else "",
                        "encoding seen: " + f"{encoding_of(was)} → {encoding_of(row)}" if "observed" in differ else "",
                        "refpos's answer" if "layers" in differ else "",
                        "the recorded queries and keys" if "fingerprint" in differ else "",
                        "wrong answers graded exact" if "survived" in differ else ""]
                out.append((name, pair, "; ".join(w for w in what if w)))
        out += [(name, pair, "gone") for name in before if name not in after]
    return out


def render(tables: list[dict[str, Any]] | dict[str, Any]) -> str:
    """The page: one column per release (oldest first) for the counts and every row, the changes between
    releases, then the newest release's details."""
    tables = [tables] if isinstance(tables, dict) else list(tables)
    newest = tables[-1]
    meta, rows = newest["meta"], newest["rows"]
    releases = [_release(t) for t in tables]
    totals = [counts(t["rows"]) for t in tables]
    lines = [
        "# Every transformers model type, measured",
        "",
        "Generated by `python -m survey render` from `survey/results/transformers-*.json`, which `tox -e survey` "
        "writes for each release (do not edit by hand).",
        f"For each model type of transformers' config mapping ({', '.join(releases)}; a family's encoding switch "
        "gives a variant, `falcon[alibi=true]`), the survey builds the config class's defaults shrunk to a tiny "
        f"geometry, asks refpos (`{meta.get('api', '?')}`) what every layer does with positions, runs the model's "
        "own code (torch CPU, random weights) with its attention recorded, on gapped position ids, ids past every "
        "length the config states, left padding and a masked token (each with the ids and, where the model takes "
        "ids, without: the model builds its own), padding tokens passed without a mask, packed sequences and "
        "decoding steps whose id is not their slot, and compares the two layer by layer: the query and key each "
        "layer hands to attention (and its rotary function's input against its output), the biases it adds, the "
        "rows its stacks' position tables are read at in every case, each on the input refpos says the layer "
        "reads; a composite's vision and audio towers are run on their own inputs, each built from the "
        "composite's sub-config, and judged as its stacks. Every exact answer is then changed one way at a time "
        "(`survey/mutants.py`) and each wrong answer must come out wrong. How: `survey/` (its "
        "docstrings), and the page's last section.",
        "",
        "| status | " + " | ".join(f"transformers {r}" for r in releases) + " | meaning |",
        "|---|" + "---|" * (len(releases) + 1),
        *(f"| {status} | " + " | ".join(str(t[status]) for t in totals) + f" | {MEANING[status]} |"
          for status in STATUSES),
        "| all | " + " | ".join(str(len(t["rows"])) for t in tables) + " | |",
        "| of which not observed | " + " | ".join(str(sum(map(unobserved, t["rows"]))) for t in tables)
        + " | not reached for want of a stored observation: the release's run stopped before them or did not name "
        "them (counted under not reached) |",
    ]
    if len(tables) > 1:
        changed = changes(tables)
        lines += ["", "## Changed between releases", "",
                  f"{len(changed)} model types whose observation or verdict differs between releases (a model type "
                  "new in a release, its status, the encodings seen, refpos's answer, the recorded queries and keys "
                  "of the same tiny model, the wrong answers graded exact); a model type whose model one release's run "
                  "did not observe or did not run (the survey's reach, not the release's code) is not compared.", "",
                  "| model type | releases | what changed |", "|---|---|---|"]
        lines += [f"| `{name}` | {pair} | {_cell(what)} |" for name, pair, what in changed]
    lines += _defects(tables)
    lines += ["", f"## By encoding (transformers {releases[-1]})", "",
              "The encoding is what transformers' run showed (`none`: attention without positions; `no attention`: "
              "no attention layer; `inline attention`: attention computed where the survey cannot see its query "
              "and key).", "",
              "| encoding | " + " | ".join(STATUSES) + " | all |",
              "|---|" + "---|" * (len(STATUSES) + 1)]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_kind.setdefault(encoding_of(row), []).append(row)
    for kind in sorted(by_kind, key=lambda k: (-len(by_kind[k]), k)):
        c = counts(by_kind[kind])
        lines.append(f"| {kind} | " + " | ".join(str(c[s]) for s in STATUSES) + f" | {len(by_kind[kind])} |")
    from survey.pixel_table import section as pixel_section  # the vision, audio and feature models by kind

    lines += pixel_section(rows, STATUSES, releases[-1])
    alone = sum(any(n.startswith(LANGUAGE_ALONE) for n in row["notes"]) for row in rows)
    if alone:
        lines += ["", f"{alone} composite model types could not be run from their own config (their forward needs "
                  "pixel values or audio, their validators tie the language model to a tower, a tower needs a "
                  "package not installed): their language model was run alone, built from their `text_config`, "
                  "and compared with refpos's answer for the composite (each such row notes it)."]
    towers = tower_outcomes(rows)
    if towers:
        lines += ["", f"{sum(towers.values())} towers of {sum(map(_has_tower, rows))} composite model types (a vision "
                  "or audio network beside the language model) were run on their own inputs, each built from the "
                  "composite's own sub-config, and judged as the composite's stack (`survey/towers.py`): "
                  + ", ".join(f"{n} {what}" for what, n in towers.items())
                  + ". A wrong tower makes its row wrong; the rows' notes say each tower's outcome."]
    within = sum(encoding_of(row) == WITHIN + "its composite" for row in rows)
    if within:
        lines += ["", f"{within} model types are parts without a model class of their own (a prompt encoder, a mask "
                  "decoder, a module of a composite): each was run within the composite holding it, with a hook "
                  "showing its module ran there (`survey/within.py`); its positions are compared in that "
                  "composite's row, and its own row says which."]
    not_run = not_run_reasons(rows)
    if not_run:
        unrun = [row for row in rows if not row["observed"]]
        lines += ["", "## Model types the survey does not run", "",
                  f"{len(unrun)} of {len(rows)} model types ({100 * len(unrun) / len(rows):.1f} %): transformers' "
                  "model could not be built or run on any input the survey feeds (token ids; pixel values, audio or "
                  "features at their native size), so its encoding reads `not run`. refpos's answer is still asked "
                  "(a refusal counts as such; an exception refpos raises on such a config is noted in the row), but "
                  "nothing is compared.", "",
                  "| why | model types |", "|---|---|"]
        lines += [f"| {why} | {n} |" for why, n in not_run]
        lines += ["", "| model type | status | transformers' error |", "|---|---|---|"]
        lines += [f"| `{row['model_type']}` | {row['status']} | {_cell(_not_run_text(row)[:200])} |" for row in unrun]
    unreached = [row for row in rows if row["status"] == "not reached"]
    if unreached:
        lines += ["", "## Not reached, each with its reason", "",
                  f"{len(unreached)} of {len(rows)} model types ({100 * len(unreached) / len(rows):.1f} %).", "",
                  "| model type | why |", "|---|---|"]
        lines += [f"| `{row['model_type']}` | {_cell(row['cause'][:300])} |" for row in unreached]
    status_of = [{r["model_type"]: r["status"] for r in t["rows"]} for t in tables]
    lines += ["", "## Every model type", "",
              "| model type | " + " | ".join(releases) + " | encoding (transformers) | refpos | max error | why | "
              "transformers file |",
              "|---|" + "---|" * (len(releases) + 6)]
    for row in rows:
        error = "" if row["max_error"] is None else f"{row['max_error']:.3g}"
        why = row["cause"] or "; ".join(row["notes"][:1])
        statuses = " | ".join(s.get(row["model_type"], "—") for s in status_of)
        lines.append(f"| `{row['model_type']}` | {statuses} | {encoding_of(row)} | "
                     f"{_cell(row['layers'] or ', '.join(row['claimed']))} | {error} | {_cell(why)} | "
                     f"{row['file']} |")
    lines += ["", "## The runs", ""]
    for t in tables:
        m = t["meta"]
        lines.append(f"* transformers {m.get('transformers', '?')}, torch {m.get('torch', '?')}, refpos interface "
                     f"`{m.get('api', '?')}`; {m.get('date', '?')}; " + _timing(m) + ".")
    from survey.vllm_engine.table import section  # the second engine's section (none without its table)

    lines += section()
    return "\n".join(lines).rstrip() + "\n"


def mutant_counts(rows: list[dict[str, Any]]) -> tuple[int, int, int]:
    """``(tried, killed, survived)``: the wrong answers derived from the rows' exact answers, those graded wrong,
    and those graded exact all the same."""
    tried = sum(row.get("mutants", 0) for row in rows)
    survived = sum(len(row.get("survived", ())) for row in rows)
    return tried, tried - survived, survived


def _defects(tables: list[dict[str, Any]]) -> list[str]:
    """The survey's own defects: wrong answers graded exact, per release, every one named."""
    found = [(t, row) for t in tables for row in t["rows"] if row.get("survived")]
    lines = ["", "## Wrong answers the survey could not tell", "",
             "The wrong answers derived from each exact answer (`survey/mutants.py`: layouts, bases, every threshold "
             "±1, attention factors, rotated widths, offsets, the slot read for the id, a NoPE layer rotated, ALiBi "
             "signs, slopes and keys, T5 bucket parameters, table offsets), judged on the same observations: each "
             "must come out wrong. A row with one graded exact is not exact (the survey cannot tell there).", "",
             "| release | rows tried | wrong answers tried | graded wrong | graded exact (survivors) |",
             "|---|---|---|---|---|"]
    for t in tables:
        tried, killed, survived = mutant_counts(t["rows"])
        lines.append(f"| transformers {_release(t)} | {sum(bool(r.get('mutants')) for r in t['rows'])} | {tried} | "
                     f"{killed} | {survived} |")
    if found:
        lines += ["", "| model type | release | wrong answers graded exact |", "|---|---|---|"]
        lines += [f"| `{row['model_type']}` | {_release(t)} | {_cell(', '.join(row['survived']))} |"
                  for t, row in found]
    else:
        lines += ["", "None survived."]
    return lines
