"""The documentation site, read in a browser: ``tox -e docs-browser`` (needs Debian's chromium and
chromium-driver: ``apt-get install -y chromium chromium-driver``).

It builds the site (``mkdocs build --strict``), serves it on 127.0.0.1, loads every page in headless
Chromium and fails on raw LaTeX in the rendered text, a formula MathJax could not typeset, a ``>>>``
outside a code block, a missing image, a dead internal link, a console error, any request to an
outside address (the site must read the same with no network), a code block or a table wider than its
column at 1280 px or at a phone's 390 px, a code line wrapped inside a token (a name or a number cut in
two), a character drawn as an empty box (tofu), CJK text without the bundled font, or a formula written
as a code span. Full-page screenshots at both widths go to
``$REFPOS_SCREENSHOTS`` (``docs-screenshots/`` by default, ``1280/`` and ``390/``), with ``report.txt``,
the per-page summary.

A second test shows that the check can fail: a small hand-written site with one of each mistake.

These tests run only with ``REFPOS_DOCS_BROWSER=1`` (set by the tox environment): the default suite
needs no browser.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from refpos.tests import site_browser

ROOT = Path(__file__).resolve().parents[2]

if os.environ.get("REFPOS_DOCS_BROWSER") != "1":
    pytest.skip("the browser check runs with REFPOS_DOCS_BROWSER=1 (tox -e docs-browser)", allow_module_level=True)
if (why := site_browser.missing_tools()) is not None:
    pytest.fail(f"REFPOS_DOCS_BROWSER=1 but the browser check cannot run: {why}", pytrace=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(folder)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


def test_every_page_reads_right(site: Path, tmp_path: Path):
    shots = Path(os.environ.get("REFPOS_SCREENSHOTS", ROOT / "docs-screenshots")).resolve()
    reports = site_browser.check_site(site, shots, tmp_path / "profile")
    text = site_browser.summary(reports)
    (shots / "report.txt").write_text(text + "\n", encoding="utf-8")
    print(f"\n{text}\nscreenshots: {shots}")
    pages = {report.page for report in reports}
    assert {"/", "rope/", "figures/", "validate/", "mrope/"} <= pages, pages
    assert {report.width for report in reports} == set(site_browser.WIDTHS)
    assert all((shots / report.screenshot).is_file() for report in reports)
    assert sum(report.typeset for report in reports) > 200, "hardly any formula was typeset"
    assert sum(report.blocks for report in reports) > 100, "hardly any code block was measured"
    problems = [str(problem) for report in reports for problem in report.problems]
    assert not problems, "\n".join(problems)


def test_search_finds_a_page(site: Path, tmp_path: Path):
    titles = site_browser.search_results(site, tmp_path / "profile", "ALiBi slopes")
    assert any("ALiBi" in title for title in titles), titles


BAD_PAGE = r"""<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>bad</title><style>pre { overflow: auto; }</style></head><body><article>
<h1 id="top">A page with every mistake</h1>
<p>The rotation \[ \begin{pmatrix} u' \\ v' \end{pmatrix} \] and $\theta_j$ stay raw.</p>
<pre><code>WIDE</code></pre>
<pre style="white-space: pre-wrap; overflow-wrap: anywhere"><code>x = LONG_NAME</code></pre>
<table><tr><th>column</th></tr><tr><td>UNBROKEN</td></tr></table>
<p>A private-use character &#xE000; no font draws, and 我 愛 你 with no font of the site's.</p>
<p>The angle <code>φ_j = p·ω_j</code> as code.</p>
<p>&gt;&gt;&gt; refpos.encodings.alibi_slopes(8)</p>
<img src="figures/nowhere.png" alt="missing">
<a href="missing-page/">dead</a> <a href="good.html#no-such-anchor">no anchor</a> <a href="good.html#fine">ok</a>
<script>console.error("a script failed");</script>
<img src="http://outside.invalid/pixel.png" alt="outside">
</article></body></html>
""".replace("WIDE", "a line of output wider than any column, " * 6).replace(  # about 1900 px of monospace
    "LONG_NAME", "a_name_longer_than_any_line_" * 12).replace("UNBROKEN", "cell" * 120)  # cut; a table too wide
GOOD_PAGE = r"""<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>good</title><style>pre { white-space: pre-wrap; overflow-wrap: anywhere; }</style></head><body><article>
<h1 id="fine">A clean page</h1>
<pre><code>&gt;&gt;&gt; x = r"\(not math\)"  # inside code: fine; WIDE</code></pre>
<table><tr><th>a</th><th>b</th></tr><tr><td>a table</td><td>that fits its column</td></tr></table>
<p>Greek in prose is fine: ω, θ, and <code>rope_theta</code> is code.</p>
<p>Plain prose costs $5 and 10 $ in total, <code>\alpha</code> is code. <a href="index.html#top">back</a></p>
</article></body></html>
""".replace("WIDE", "a long line wraps instead of running out of its column " * 4)


def test_the_check_catches_each_mistake(tmp_path: Path):
    """The check is not vacuous: every kind of mistake on the bad page is reported; the clean page has none."""
    bad_site = tmp_path / "bad"
    bad_site.mkdir()
    (bad_site / "index.html").write_text(BAD_PAGE, encoding="utf-8")
    (bad_site / "good.html").write_text(GOOD_PAGE, encoding="utf-8")
    found = site_browser.check_site(bad_site, tmp_path / "shots", tmp_path / "profile")
    reports = {(r.page, r.width): r for r in found}
    for width in site_browser.WIDTHS:
        kinds = {problem.kind for problem in reports["/", width].problems}
        assert kinds >= {"raw-latex", "doctest-prompt", "missing-image", "console-error", "outside-request",
                         "overflow", "token-break", "tofu", "cjk-font", "math-in-code"}, site_browser.summary(found)
        details = [problem.detail for problem in reports["/", width].problems]
        assert any(d.startswith("table 1 is ") and "wider than its" in d for d in details), details
        assert any(d.startswith("code block 2 ") and "wraps inside a token: " in d for d in details), details
        assert reports["good.html", width].problems == [], site_browser.summary(found)
    first = reports["/", site_browser.WIDTHS[0]]
    details = " | ".join(problem.detail for problem in first.problems)
    assert "missing-page/" in details and "no-such-anchor" in details and "good.html#fine" not in details
    assert "U+E000" in details and "φ_j = p·ω_j" in details and "not in the site" in details
    assert "\ue000" in first.tofu, first.tofu  # (the CJK characters show as tofu too where no system font has them)
