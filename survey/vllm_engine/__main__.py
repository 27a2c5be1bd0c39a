"""``python -m survey.vllm_engine observe | judge | render``: the vLLM survey's command line.

``observe [ARCH ...] [--dir DIR] [--jobs N] [--again]``
    vLLM's side: build and run every architecture of the installed vLLM's registry (or the named ones) in ``N``
    processes, each observation stored in ``DIR`` (default: one directory per vLLM release under the temporary
    directory); what is stored there already is kept unless ``--again``.
``judge [--dir DIR] [--table TABLE] [--merge]``
    refpos's side: judge every stored observation and write ``survey/results/vllm.json``; with ``--merge``, only
    the rows of the architectures stored in ``DIR`` are replaced and every other row of the table is kept.
``render``
    write ``docs/survey.md`` (the transformers table, then this engine's section) from the stored tables.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from survey import table as survey_table
from survey.vllm_engine import table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m survey.vllm_engine", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    observe_p = sub.add_parser("observe", help="vLLM's side only, stored for judge")
    observe_p.add_argument("architectures", nargs="*", help="architectures (default: every one of vLLM's registry)")
    observe_p.add_argument("--dir", type=Path, default=None, help="where to store them")
    observe_p.add_argument("--jobs", type=int, default=1, help="processes (default: %(default)s)")
    observe_p.add_argument("--again", action="store_true", help="observe architectures already stored again")
    judge_p = sub.add_parser("judge", help="refpos's side: judge the stored observations, write the table")
    judge_p.add_argument("--dir", type=Path, default=None, help="the observations")
    judge_p.add_argument("--table", type=Path, default=table.TABLE, help="where to write (default: %(default)s)")
    judge_p.add_argument("--merge", action="store_true", help="replace only the rows of the stored architectures")
    sub.add_parser("render", help="write docs/survey.md from the stored tables")
    args = parser.parse_args(argv)
    if args.verb == "render":
        survey_table.PAGE.write_text(survey_table.render(survey_table.load_all()), encoding="utf-8")
        print(f"wrote {survey_table.PAGE}")
        return 0
    from survey.vllm_engine import stored

    directory = args.dir or stored.default_directory()
    if args.verb == "observe":
        if args.jobs < 1:
            parser.error(f"--jobs must be at least 1, got {args.jobs}")
        wall = stored.observe(args.architectures or None, directory, args.jobs, args.again)
        print(f"observed in {wall:.0f} s with {args.jobs} process(es) into {directory}")
        return 0
    rows, wall = stored.judge(directory)
    from survey import store

    runs = store.timings(directory)
    meta = {**stored.versions(), "api": __import__("survey.adaptor").adaptor.api(),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "judge_s": round(wall)}
    if runs:  # only an observe run that finished records its time
        meta.update(observe_s=sum(r["seconds"] for r in runs), jobs=max(r["jobs"] for r in runs))
    from survey.vllm_engine import configs

    groups = {a.name: a.group for a in configs.architectures()}
    meta["registry"] = len(groups)
    written = {"meta": meta, "rows": [{**r.to_json(), "group": groups.get(r.architecture, "")} for r in rows]}
    if args.merge:
        written = table.merged(table.load(args.table), written["rows"])
    table.save(written, args.table)
    print("counts:", survey_table.counts(written["rows"]), f"judged in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
