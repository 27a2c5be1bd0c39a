"""The vLLM survey's stored table (``survey/results/vllm.json``) and its section of ``docs/survey.md``.

The section (:func:`section`, appended by :func:`survey.table.render`) gives the counts per status, the counts per
registry group, the families vLLM implements that transformers has no model class for, every disagreement
between the two engines (:mod:`survey.vllm_engine.disagreements`) with what the model authors' code decides, and
every row. Nothing in it is typed by hand: the authors' verdicts are records of
:data:`survey.vllm_engine.disagreements.AUTHORS`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "survey" / "results" / "vllm.json"


def load(path: Path = TABLE) -> dict[str, Any]:
    """The stored table (``{"meta": ..., "rows": [...]}``); an empty one when there is none."""
    if not path.is_file():
        return {"meta": {}, "rows": []}
    return json.loads(path.read_text(encoding="utf-8"))


def save(table: dict[str, Any], path: Path = TABLE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def merged(stored: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``stored`` with the rows of the architectures ``rows`` names replaced by them, in place, every other row and
    the meta kept (the observe and judge times stay those of the run that wrote the whole table)."""
    new = {row["architecture"]: row for row in rows}
    missing = sorted(set(new) - {row["architecture"] for row in stored["rows"]})
    if missing:
        raise ValueError(f"rows: architectures the stored table lacks: {', '.join(missing)}")
    return {"meta": stored["meta"], "rows": [new.get(row["architecture"], row) for row in stored["rows"]]}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _origin(row: dict[str, Any]) -> str:
    return next((n.removeprefix("config: ") for n in row["notes"] if n.startswith("config: ")), "")


def _reached(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """How many of the registry's architectures the stored table has (a stopped observation run has fewer)."""
    registry = meta.get("registry")
    if registry is None or registry == len(rows):
        return f"{len(rows)} architectures"
    return (f"{len(rows)} of its {registry} architectures observed: the run was stopped there, `python -m "
            "survey.vllm_engine observe` resumes it")


def section(table: dict[str, Any] | None = None, transformers_rows: list[dict[str, Any]] | None = None) -> list[str]:
    """The lines of ``docs/survey.md``'s section on vLLM (none without a stored table)."""
    from survey import table as survey_table
    from survey.vllm_engine import disagreements

    table = load() if table is None else table
    rows, meta = table["rows"], table["meta"]
    if not rows:
        return []
    total = survey_table.counts(rows)
    statuses = survey_table.STATUSES
    lines = ["", f"## A second engine: vLLM {meta.get('vllm', '?')}", "",
             f"The same survey over vLLM's own model registry ({_reached(rows, meta)}): each architecture is built "
             "from its config (transformers' config class, vLLM's own, or a public `config.json` of a family that "
             "ships its own code) shrunk as above, as vLLM builds it on the CPU (float32, one process, its "
             "attention layers recorded), run through every rotary module's `forward_native` (each module's query "
             "and key recorded before and after it, so that the channel layout is seen), and judged against "
             "refpos's answer for the same config by the same comparison and bounds, on the probe positions and on "
             "the cases vLLM's explicit positions can state: the ids around each length the config states (−1, 0, "
             "+1), twice the largest and 131071 (those past the rows of vLLM's rotary cache are not run: vLLM rotates "
             "no position past them), and two sequences' ids packed into one. Its forward takes no attention mask "
             "and no cache, so the left-padded, masked and decoding cases are not run, nor the mutants that change "
             "only what a model reads when it is handed no ids. Where vLLM's positions are not the ids transformers "
             "takes for the same rows (its RoBERTa adds `pad_token_id + 1` to them), refpos is asked about the ids "
             "transformers would be handed, and the row says so. How: `survey/vllm_engine/` "
             "(its docstrings); `tox -e survey-vllm` runs it.", "",
             "| status | architectures |", "|---|---|",
             *(f"| {s} | {total[s]} |" for s in statuses), f"| all | {len(rows)} |", "",
             "| registry group | " + " | ".join(statuses) + " | all |", "|---|" + "---|" * (len(statuses) + 1)]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get("group") or "?", []).append(row)
    for group in sorted(groups, key=lambda g: -len(groups[g])):
        c = survey_table.counts(groups[group])
        lines.append(f"| {group} | " + " | ".join(str(c[s]) for s in statuses) + f" | {len(groups[group])} |")
    tried, killed, survived = survey_table.mutant_counts(rows)
    lines += ["", f"Every exact answer changed one way at a time (`survey/mutants.py`), judged on vLLM's run: {tried} "
              f"wrong answers tried, {killed} graded wrong, {survived} graded exact all the same (the row is then not "
              "exact)" + (":" if survived else ".")]
    lines += [f"* `{r['architecture']}`: {_cell(', '.join(r['survived']))}" for r in rows if r.get("survived")]
    own = [r for r in rows if r["model_type"] and not _origin(r).startswith("transformers")]
    if own:
        lines += ["", "### Architectures not built from a transformers class's defaults", "",
                  "Families vLLM implements that transformers does not, and checkpoints whose config states keys a "
                  "class's defaults lack: vLLM's own config class, a public `config.json` (the remote-code "
                  "families, and the published configs of `survey/vllm_engine/published/`, each with its "
                  "repository, path and commit, read by transformers' class of its model type where there is one), "
                  "or the target's config vLLM rewrites for a speculative head.", "",
                  "| architecture | model type | status | why | config |", "|---|---|---|---|---|"]
        lines += [f"| `{r['architecture']}` | `{r['model_type']}` | {r['status']} | {_cell(r['cause'][:200])} | "
                  f"{_cell(_origin(r))} |" for r in own]
    if transformers_rows is None:  # the table of the transformers release vLLM's run had installed
        release = meta.get("transformers")
        transformers_rows = survey_table.load(survey_table.path_for(release) if release else None)["rows"]
    found = disagreements.find(rows, transformers_rows)
    lines += ["", "### Where vLLM and transformers disagree", "",
              "A model type both engines run, refpos's answer exact against one engine and wrong against the "
              "other: the two compute different positions for the same config; or a config vLLM runs on which "
              "refpos raises, as transformers' reading of it does (an error, listed where the authors' code on it "
              "is recorded). For each, the evidence (the "
              "comparison's numbers, the single change of refpos's answer under which vLLM's run is exact), the two "
              "sources, and the model authors' code, which refpos follows.", ""]
    if not found:
        lines.append("None: on every model type both engines ran, refpos's answer is judged alike against both.")
    else:
        lines += ["| model type | vLLM architecture | vLLM (`vllm/…`) | transformers (`transformers/models/…`) | "
                  "evidence | the authors' code | agrees |", "|---|---|---|---|---|---|---|"]
        for d in found:
            lines.append(f"| `{d.model_type}` | `{d.architecture}` | {d.vllm_file} | {d.transformers_file} | "
                         f"{_cell(d.evidence)} | {_cell(d.authors.source if d.authors else 'not yet read')} "
                         f"{_cell(d.authors.finding if d.authors else '')} | "
                         f"{d.authors.agrees if d.authors else 'undecided'} |")
    lines += ["", "### Every architecture", "",
              "| architecture | group | model type | status | encoding (vLLM) | refpos | max error | why |",
              "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        error = "" if row["max_error"] is None else f"{row['max_error']:.3g}"
        why = row["cause"] or "; ".join(n for n in row["notes"] if not n.startswith("config: "))[:200]
        lines.append(f"| `{row['architecture']}` | {row.get('group', '')} | {row['model_type'] or '–'} | "
                     f"{row['status']} | {survey_table.encoding_of(row)} | "
                     f"{_cell(row['layers'] or ', '.join(row['claimed']))} | {error} | {_cell(why[:300])} |")
    lines += ["", f"vLLM {meta.get('vllm', '?')}, transformers {meta.get('transformers', '?')}, torch "
              f"{meta.get('torch', '?')}, refpos interface `{meta.get('api', '?')}`; {meta.get('date', '?')}; vLLM "
              + (f"observed in {meta['observe_s']} s with {meta.get('jobs', '?')} processes" if "observe_s" in meta
                 else "observed by runs that were stopped (their time not recorded)")
              + f" (`python -m survey.vllm_engine observe`), refpos judged in {meta.get('judge_s', '?')} s (`python "
              "-m survey.vllm_engine judge`)."]
    return lines
