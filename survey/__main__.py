"""``python -m survey run | sample | render | show``: the survey's command line (see :mod:`survey`).

``run [TYPE ...]``
    survey every model type of the installed transformers (or the named ones), in this one process, and
    write their rows into ``survey/results/transformers-<version>.json`` (the installed release's table) (a full run
    replaces the table; named types replace their rows). Prints one line per model type and the counts; names the
    model types the committed table did not list (new in the installed transformers).
``observe [TYPE ...] [--dir DIR] [--jobs N | --dask ADDRESS]``
    transformers' side only: build and run every model type (or the named ones), in ``N`` processes or on the
    dask.distributed cluster at ``ADDRESS``, each observation stored in ``DIR`` (:mod:`survey.store`; default
    :data:`survey.stored.OBSERVATIONS`); what is stored there already is kept (``--again`` observes it anew;
    ``--towers`` runs only the towers of the composites stored there again, :mod:`survey.towers`).
``judge [--dir DIR] [--table TABLE]``
    refpos's side only: judge every stored observation with the refpos on the path and write the table (a
    few seconds, without torch running any model: rerun it after each change of refpos).
``sample [--write]``
    the fixed sample of :func:`sample`: every row compared with the committed one; exit 1 on a difference
    (``--write`` stores the new rows instead).
``render``
    write ``docs/survey.md`` from the committed tables, one column per release.
``show TYPE``
    one model type's comparison, layer by layer (for checking a verdict by hand).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path
from typing import Any

from survey import stored, table

#: rows of the sample per (encoding, status) group of the committed table
PER_GROUP = 1


#: a row that took longer than this (seconds) is sampled only when its group has no quicker one
SAMPLE_SECONDS = 60


def sample(rows: list[dict[str, Any]], per_group: int = PER_GROUP) -> list[str]:
    """A deterministic sample of the committed rows: the first ``per_group`` model types (by name) of every
    (encoding, status) group, so each way a model type can come out is run (those that took at most
    :data:`SAMPLE_SECONDS` first: a SAM image encoder at 1024 pixels only where its group has nothing else)."""
    groups: dict[tuple[str, str], list[str]] = {}
    quick = sorted(rows, key=lambda r: (r.get("seconds", 0) > SAMPLE_SECONDS, r["model_type"]))
    for row in quick:
        if row["cause"].startswith(stored.NOT_OBSERVED):  # no observation to compare a rerun with
            continue
        groups.setdefault((table.encoding_of(row), row["status"]), []).append(row["model_type"])
    return sorted(name for names in groups.values() for name in names[:per_group])


def run_types(names: list[str] | None, echo: bool = True) -> tuple[list[Any], float]:
    from survey.run import survey_one

    stored.quiet()
    chosen = stored.chosen(names)
    rows, started = [], time.perf_counter()
    for i, model_type in enumerate(chosen):
        row = survey_one(model_type)
        rows.append(row)
        if echo:
            error = "" if row.max_error is None else f" max|Δ| {row.max_error:.3g}"
            print(f"[{i + 1}/{len(chosen)}] {row.model_type}: {row.status}{error} ({row.seconds:.1f} s) "
                  f"{row.cause[:160]}", flush=True)
    return rows, time.perf_counter() - started


def _store(rows: list[Any], wall: float, full: bool, command: str, path: Any = None) -> dict[str, Any]:
    path = path or installed_table()
    committed = table.load(path)
    by_name = {} if full else {r["model_type"]: r for r in committed["rows"]}
    by_name.update({r.model_type: r.to_json() for r in rows})
    from survey import catalogue

    order = [t.name for t in catalogue.model_types()]
    ordered = [by_name[n] for n in order if n in by_name] + [r for n, r in by_name.items() if n not in order]
    meta = dict(committed["meta"]) if not full else {}
    meta.update(stored.environment())
    if full:
        meta.update(date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"), wall_s=round(wall),
                    command=command)
    return {"meta": meta, "rows": ordered}


def installed_table() -> Path:
    """The committed table of the installed transformers release."""
    from survey import catalogue

    return table.path_for(catalogue.transformers_version())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m survey", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    run_p = sub.add_parser("run", help="survey every model type (or the named ones) and store the rows")
    run_p.add_argument("types", nargs="*", help="model types (default: every one of the installed transformers)")
    run_p.add_argument("--table", type=Path, help="where to write the rows (default: the installed release's table "
                       "in survey/results/)")
    observe_p = sub.add_parser("observe", help="transformers' side only, stored for judge")
    observe_p.add_argument("types", nargs="*", help="model types (default: every one of the installed transformers)")
    observe_p.add_argument("--dir", type=Path, default=stored.OBSERVATIONS,
                           help="where to store them (default: %(default)s)")
    observe_p.add_argument("--jobs", type=int, default=1, help="processes (default: %(default)s)")
    observe_p.add_argument("--again", action="store_true", help="observe model types already stored again")
    observe_p.add_argument("--towers", action="store_true", help="run only the towers of the composites already "
                           "stored again, their language model's run kept (survey.towers)")
    observe_p.add_argument("--dask", metavar="ADDRESS", help="observe on the dask.distributed cluster at ADDRESS "
                           "(tcp://host:port; its workers need torch, transformers and this package)")
    judge_p = sub.add_parser("judge", help="refpos's side only: judge the stored observations, write the table")
    judge_p.add_argument("--dir", type=Path, default=stored.OBSERVATIONS,
                         help="the observations (default: %(default)s)")
    judge_p.add_argument("--table", type=Path, help="where to write the rows (default: the installed release's "
                         "table in survey/results/)")
    judge_p.add_argument("--unobserved", action="store_true", help="write a 'not reached' row for each model "
                         "type the directory has no observation of (an observation run that was stopped)")
    sample_p = sub.add_parser("sample", help="rerun the fixed sample and compare with the committed rows")
    sample_p.add_argument("--write", action="store_true", help="store the sample's rows instead of comparing")
    render_p = sub.add_parser("render", help="write docs/survey.md from the committed tables of survey/results/")
    render_p.add_argument("--table", type=Path, nargs="*", help="the tables to render, oldest release first "
                          "(default: every survey/results/transformers-*.json)")
    render_p.add_argument("--page", type=Path, default=table.PAGE, help="the page to write (default: %(default)s)")
    show_p = sub.add_parser("show", help="one model type's comparison, layer by layer")
    show_p.add_argument("type")
    args = parser.parse_args(argv)
    if args.verb == "render":
        tables = [table.load(path) for path in args.table] if args.table else table.load_all()
        args.page.write_text(table.render(tables), encoding="utf-8")
        print(f"wrote {args.page}")
        return 0
    if args.verb == "show":
        from survey.show import show

        print(show(args.type))
        return 0
    if args.verb == "sample":
        return _sample(args.write)
    from survey import catalogue

    if args.verb == "observe":
        if args.jobs < 1:
            parser.error(f"--jobs must be at least 1, got {args.jobs}")
        executor, closer = stored.executor_for(args.jobs, args.dask) if args.dask else (None, None)
        try:
            wall = stored.observe_types(args.types or None, args.dir, args.jobs, args.again, executor,
                                        towers=args.towers)
        finally:
            if closer is not None:
                closer()
        where = f"on the cluster at {args.dask}" if args.dask else f"with {args.jobs} process(es)"
        print(f"observed in {wall:.0f} s {where} into {args.dir}")
        return 0
    args.table = args.table or installed_table()
    if args.verb == "judge":
        committed = table.load(args.table)
        rows, wall = stored.judge_types(args.dir, args.unobserved)
        full = len(rows) == len(catalogue.model_types())
        seen = sum(not table.unobserved(row.to_json()) for row in rows)
        written = _store(rows, wall, full, f"python -m survey judge ({seen} stored observations)", args.table)
        if full:
            from survey import store

            runs = store.timings(args.dir)
            written["meta"].update(observe_s=round(sum(r["seconds"] for r in runs)), jobs=max(
                (r["jobs"] for r in runs), default=1), judge_s=round(wall), observed=seen)
            if seen < len(rows):  # a stopped observation run: the rest are rows without an observation
                written["meta"]["stopped"] = len(rows)
        return _save_and_report(written, committed, args.table, f"judged in {wall:.0f} s")

    full = not args.types
    committed = table.load(args.table)
    rows, wall = run_types(args.types or None)
    written = _store(rows, wall, full, "python -m survey run" + "".join(f" {t}" for t in args.types), args.table)
    return _save_and_report(written, committed, args.table, f"in {wall:.0f} s")


def _save_and_report(written: dict[str, Any], committed: dict[str, Any], path: Path, timing: str) -> int:
    """Write the table, print its counts, and name the model types the committed table did not list."""
    from survey import catalogue

    table.save(written, path)
    print("counts:", table.counts(written["rows"]), timing)
    new = table.new_types([t.name for t in catalogue.model_types()], committed)
    if new and committed["rows"]:
        print(f"new model types (not in the committed table): {', '.join(new)}")
    return 0


def _sample(write: bool) -> int:
    from survey import catalogue

    committed = table.load(installed_table())
    new = table.new_types([t.name for t in catalogue.model_types()], committed)
    if new:
        print(f"new model types, not in {installed_table().name}: {', '.join(new)} (run tox -e survey)")
        return 1
    names = sample(committed["rows"])
    rows, wall = run_types(names)
    if write:
        table.save(_store(rows, wall, False, ""), installed_table())
        return 0
    before = {r["model_type"]: r for r in committed["rows"]}
    differ = [f"{r.model_type}: committed {before[r.model_type]['status']}, now {r.status} ({r.cause[:120]})"
              for r in rows if r.status != before[r.model_type]["status"]
              or r.observed != before[r.model_type]["observed"]]
    print(f"{len(rows)} model types in {wall:.0f} s; {len(differ)} differ from the committed table")
    for line in differ:
        print("  " + line)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
