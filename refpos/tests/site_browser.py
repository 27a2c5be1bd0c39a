"""Read the built documentation site as a person would: every page in headless Chromium, with no network.

Used by ``test_docs_browser.py`` (``tox -e docs-browser``). The site is served from a local folder on
127.0.0.1; each page is loaded in Debian's Chromium (driven by Selenium through Debian's ChromeDriver),
MathJax is left to finish, and the page is checked for what a reader would see wrong:

- ``raw-latex``: TeX source (``\\frac``, ``\\(``, ``$…$``) left in the rendered text outside code, or a
  formula that MathJax did not typeset;
- ``math-error``: a formula that MathJax typeset as an error (an unknown macro, a missing brace);
- ``doctest-prompt``: a ``>>>`` outside a code block (an example that renders as a run-on paragraph);
- ``missing-image``: an image that did not load;
- ``dead-link``: a link inside the site to a file that is not there, or to an anchor the page lacks;
- ``console-error``: anything the page logs as an error (a script that failed, a 404 of a resource);
- ``outside-request``: any request to an address other than the local server (the site must work
  offline).

A full-page screenshot of each page is written to a folder, for a person to look at.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: Debian's packages chromium and chromium-driver
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: the flags of a headless run that reaches nothing outside and keeps no state between runs
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,900",
)
#: the tallest screenshot written, in CSS pixels (longer pages are cut there)
MAX_SCREENSHOT_HEIGHT = 16_000

#: the schemes of a request that leaves the machine (chrome://, data:, blob: stay inside the browser)
NETWORK_SCHEMES = ("http:", "https:", "ws:", "wss:", "ftp:")
#: runs in the page: waits for MathJax and the images, then reports what the page shows
PAGE_PROBE = r"""
const done = arguments[arguments.length - 1];
const math = (window.MathJax && MathJax.startup && MathJax.startup.promise) || Promise.resolve();
const images = Array.from(document.images).map((img) => img.complete ? null
    : new Promise((resolve) => { img.onload = img.onerror = resolve; }));
Promise.all([math, ...images]).then(() => {
  const main = document.querySelector("article") || document.body;
  const prose = main.cloneNode(true);
  prose.querySelectorAll("pre, code, mjx-container, script, style, .headerlink").forEach((e) => e.remove());
  done({
    prose: prose.textContent,
    untypeset: Array.from(main.querySelectorAll(".arithmatex"))
        .filter((e) => !e.querySelector("mjx-container")).map((e) => e.textContent.slice(0, 80)),
    typeset: main.querySelectorAll("mjx-container").length,
    math_errors: Array.from(main.querySelectorAll("mjx-merror"))
        .map((e) => e.getAttribute("data-mjx-error") || e.textContent.slice(0, 80)),
    broken_images: Array.from(document.images)
        .filter((img) => !(img.complete && img.naturalWidth > 0)).map((img) => img.getAttribute("src")),
    images: document.images.length,
    links: Array.from(document.querySelectorAll("a[href]")).map((a) => a.href),
    ids: Array.from(document.querySelectorAll("[id]")).map((e) => e.id),
  });
}, (error) => done({error: String(error)}));
"""

#: TeX left in prose: a control word, the \( \) \[ \] delimiters, or $…$ with no space inside either $
#: (arithmatex's rule for inline math, so "$5 and 10 $" is prose)
RAW_TEX = r"(\\[A-Za-z]+|\\[()\[\]]|\$[^\s$](?:[^$]*[^\s$])?\$)"


@dataclass(frozen=True)
class Problem:
    page: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.page}: {self.kind}: {self.detail}"


@dataclass
class PageReport:
    """What one page showed: counts for the summary, and its problems."""

    page: str
    typeset: int = 0
    images: int = 0
    links: int = 0
    screenshot: str = ""
    problems: list[Problem] = field(default_factory=list)


def missing_tools() -> str | None:
    """Why the browser check cannot run here, or None when it can."""
    import importlib.util

    if importlib.util.find_spec("selenium") is None:
        return "selenium is missing: pip install selenium"
    for tool in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(tool) is None:
            return f"{tool} is missing: apt-get install -y chromium chromium-driver"
    return None


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 (a free port) for the duration; yield its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address) -> None:
            import sys

            if not isinstance(sys.exc_info()[1], ConnectionError):  # the browser dropped a request it no longer needs
                super().handle_error(request, client_address)

    handler = functools.partial(Quiet, directory=str(folder))
    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator:
    """A headless Chromium with a fresh profile folder, logging the console and the network."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_script_timeout(60)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def site_pages(site: Path) -> list[str]:
    """The site's pages as URL paths relative to its root (``""``, ``"rope/"``, ``"x.html"``), sorted."""
    pages = []
    for html in sorted(site.rglob("*.html")):
        rel = html.relative_to(site).as_posix()
        if rel == "404.html" or rel.startswith(("javascripts/", "assets/")):
            continue
        pages.append(rel.removesuffix("index.html"))
    return pages


def screenshot(driver, path: Path) -> None:
    """A full-page PNG (cut at ``MAX_SCREENSHOT_HEIGHT``) through the DevTools protocol."""
    import base64

    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], MAX_SCREENSHOT_HEIGHT), "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                            "clip": clip})
    path.write_bytes(base64.b64decode(shot["data"]))


def _requests(driver) -> list[str]:
    """The URLs the page asked for since the last call (the performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def check_page(driver, base: str, page: str, shots: Path) -> tuple[PageReport, dict]:
    """Load one page and check it; return its report and what the probe saw (links and ids)."""
    import re

    report = PageReport(page or "/")
    _requests(driver)  # forget what came before (the browser's own start page)
    driver.get(base + page)
    seen = driver.execute_async_script(PAGE_PROBE)
    if "error" in seen:
        report.problems.append(Problem(report.page, "console-error", f"the page probe failed: {seen['error']}"))
        return report, {"links": [], "ids": []}
    for match in sorted(set(re.findall(RAW_TEX, seen["prose"])))[:10]:
        report.problems.append(Problem(report.page, "raw-latex", match[:80]))
    for source in seen["untypeset"][:10]:
        report.problems.append(Problem(report.page, "raw-latex", f"not typeset: {source}"))
    for error in seen["math_errors"]:
        report.problems.append(Problem(report.page, "math-error", error))
    for line in seen["prose"].splitlines():
        if ">>>" in line:
            report.problems.append(Problem(report.page, "doctest-prompt", line.strip()[:80]))
    for src in seen["broken_images"]:
        report.problems.append(Problem(report.page, "missing-image", src))
    for entry in driver.get_log("browser"):
        if entry["level"] == "SEVERE":
            report.problems.append(Problem(report.page, "console-error", entry["message"][:200]))
    for url in _requests(driver):
        if url.startswith(NETWORK_SCHEMES) and not url.startswith(base):
            report.problems.append(Problem(report.page, "outside-request", url))
    report.problems = list(dict.fromkeys(report.problems))  # a resource that failed twice is one problem
    report.typeset, report.images, report.links = seen["typeset"], seen["images"], len(seen["links"])
    shot = shots / (page.strip("/").replace("/", "_").removesuffix(".html") or "index")
    screenshot(driver, shot.with_suffix(".png"))
    report.screenshot = shot.with_suffix(".png").name
    return report, seen


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # the local server only
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def dead_links(base: str, seen: dict[str, dict]) -> list[Problem]:
    """Links inside the site whose file is missing, or whose anchor is not on the page it names."""
    problems = []
    ids = {base + page: set(found["ids"]) for page, found in seen.items()}
    status: dict[str, int] = {}
    for page, found in seen.items():
        for link in sorted(set(found["links"])):
            if not link.startswith(base):
                continue
            target, _, anchor = link.partition("#")
            if target not in status:
                status[target] = _status(target)
            if status[target] != 200:
                problems.append(Problem(page or "/", "dead-link", f"{link.removeprefix(base)} ({status[target]})"))
            elif anchor and target in ids and urllib.parse.unquote(anchor) not in ids[target]:
                problems.append(Problem(page or "/", "dead-link", f"{link.removeprefix(base)} (no such anchor)"))
    return problems


def check_site(site: Path, shots: Path, profile: Path) -> list[PageReport]:
    """Serve ``site``, load every page in Chromium, and check each; screenshots go to ``shots``."""
    shots.mkdir(parents=True, exist_ok=True)
    reports, seen = [], {}
    with serve(site) as base, chromium(profile) as driver:
        for page in site_pages(site):
            report, seen[page] = check_page(driver, base, page, shots)
            reports.append(report)
        links = dead_links(base, seen)
    by_page = {report.page: report for report in reports}
    for problem in links:
        by_page[problem.page].problems.append(problem)
    return reports


def search_results(site: Path, profile: Path, query: str) -> list[str]:
    """The titles that the site's search box lists for ``query`` (Material's client-side search)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with serve(site) as base, chromium(profile) as driver:
        driver.get(base)
        box = driver.find_element(By.CSS_SELECTOR, "input.md-search__input")  # in the header, 1280 px wide
        box.click()
        box.send_keys(query)
        WebDriverWait(driver, 30).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item h1, .md-search-result__item h2")
        )
        items = driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item h1, .md-search-result__item h2")
        return [item.text for item in items]


def summary(reports: list[PageReport]) -> str:
    """One line a page: formulas typeset, images, links, problems, screenshot."""
    lines = [f"{'page':<22} {'formulas':>8} {'images':>6} {'links':>5} {'problems':>8}  screenshot"]
    for r in reports:
        lines.append(f"{r.page:<22} {r.typeset:>8} {r.images:>6} {r.links:>5} {len(r.problems):>8}  {r.screenshot}")
    lines += [str(problem) for r in reports for problem in r.problems]
    return "\n".join(lines)
