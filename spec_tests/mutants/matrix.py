"""Which spec test module catches which mutant: ``python -m spec_tests.mutants.matrix [--json]``.

Runs every spec test module (``spec_tests/test_*.py`` except the meta tests) on every mutant of
:data:`spec_tests.mutants.MUTANTS` and on :mod:`refpos.testing.adapter`, and prints a Markdown table: the
number of failing tests per (mutant, module), ``·`` for none. Slow (modules × mutants pytest runs): it
is the report behind ``docs/implementations.md``, not part of the test suite; the meta test runs only
the catalogued catching files.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from spec_tests.mutants import MUTANTS

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(r"(\d+) failed")


def failures(impl: str, module: str) -> int:
    """Number of failing tests of ``module`` on ``impl`` (-1 when the run errored)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "REFPOS_XFAILS_FILE")}
    env.update(REFPOS_IMPL=impl, REFPOS_META_RUN="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--assert=plain", "--tb=no", module],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    if result.returncode not in (0, 1, 5):
        return -1
    found = SUMMARY.search(result.stdout.splitlines()[-1] if result.stdout else "")
    return int(found.group(1)) if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    parser.add_argument("--jobs", type=int, default=2, help="parallel pytest runs (default 2)")
    args = parser.parse_args(argv)
    modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "spec_tests").glob("test_*.py")
                     if p.name != "test_meta.py")
    impls = ["refpos.testing.adapter", *(f"spec_tests.mutants.{name}" for name in sorted(MUTANTS))]
    jobs = [(impl, module) for impl in impls for module in modules]
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: failures(*job), jobs), strict=True))
    if args.json:
        print(json.dumps({impl: {m: counts[impl, m] for m in modules} for impl in impls}, indent=1))
        return 0
    short = [Path(m).stem.removeprefix("test_") for m in modules]
    print("| implementation | " + " | ".join(short) + " |")
    print("|---|" + "---|" * len(short))
    for impl in impls:
        cells = [("error" if counts[impl, m] < 0 else str(counts[impl, m]) if counts[impl, m] else "·")
                 for m in modules]
        print(f"| {impl.rsplit('.', 1)[-1]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
