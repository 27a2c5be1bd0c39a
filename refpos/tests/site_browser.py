"""Read the built documentation site as a person would: every page in headless Chromium, with no network.

Used by ``test_docs_browser.py`` (``tox -e docs-browser``). The site is served from a local folder on
127.0.0.1; each page is loaded in Debian's Chromium (driven by Selenium through Debian's ChromeDriver) at
each width of :data:`WIDTHS` (a 1280 px desktop, a 390 px phone), MathJax and the fonts are left to
finish, and the page is checked for what a reader would see wrong:

- ``overflow``: a code block or a table wider than its column (its lines or cells cut off, behind a scroll
  bar), or a page wider than the window;
- ``token-break``: a code line wrapped inside a token (an identifier or a number cut in two: letters, digits
  or ``_`` on both sides of the break); a line may wrap at a space or after punctuation (``/``, ``-``, ``,``);
- ``tofu``: a character no font on the page can draw (an empty box): each character of the text is drawn
  on a canvas in its element's fonts and compared with a code point no font has;
- ``cjk-font``: CJK text (the worked example's 我 愛 你) drawn without the font subset the site bundles;
- ``math-in-code``: a formula written as a code span (``ω_j``, ``q·kᵀ``) instead of typeset math;

- ``raw-latex``: TeX source (``\\frac``, ``\\(``, ``$…$``) left in the rendered text outside code, or a
  formula that MathJax did not typeset;
- ``math-error``: a formula that MathJax typeset as an error (an unknown macro, a missing brace);
- ``doctest-prompt``: a ``>>>`` outside a code block (an example that renders as a run-on paragraph);
- ``missing-image``: an image that did not load;
- ``dead-link``: a link inside the site to a file that is not there, or to an anchor the page lacks;
- ``console-error``: anything the page logs as an error (a script that failed, a 404 of a resource);
- ``outside-request``: any request to an address other than the local server (the site must work
  offline).

A full-page screenshot of each page at each width is written to a folder (``1280/``, ``390/``), for a
person to look at.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import re
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
#: the widths a page is read at (CSS pixels): a desktop window and a phone held upright
WIDTHS = (1280, 390)
#: the height of the window a page is read in (the screenshot covers the whole page)
WINDOW_HEIGHT = 900
#: the family name the site's stylesheet gives its bundled CJK font subset (docs/stylesheets/extra.css)
CJK_FONT = "refpos CJK"
#: the tallest screenshot written, in CSS pixels (longer pages are cut there)
MAX_SCREENSHOT_HEIGHT = 16_000

#: the schemes of a request that leaves the machine (chrome://, data:, blob: stay inside the browser)
NETWORK_SCHEMES = ("http:", "https:", "ws:", "wss:", "ftp:")
#: runs in the page: waits for MathJax and the images, then reports what the page shows
PAGE_PROBE = r"""
const done = arguments[arguments.length - 1];
// MathJax's startup exists only once its script has run (on a busy machine, after the page's load event): wait
// for it (60 s at most) on a page with formulas, then for its startup, then for a typesetting pass of its own (a
// startup promise taken while MathJax still loads its parts resolves before the page is typeset)
const formulas = document.querySelector(".arithmatex") !== null;
const math = !formulas ? Promise.resolve() : new Promise((resolve) => {
  const start = Date.now();
  // ready: the startup promise exists and typesetPromise is defined (it is defined a moment after the promise;
  // asking before then typeset nothing and left a page's formulas raw, one page in forty)
  const ready = () => window.MathJax && MathJax.startup && MathJax.startup.promise
      && typeof MathJax.typesetPromise === "function";
  const poll = () => ready() ? resolve(MathJax.startup.promise)
      : Date.now() - start > 60000 ? resolve() : setTimeout(poll, 50);
  poll();
}).then(() => settle(Date.now()));
// typeset until no formula of the page is left raw, 20 s at most: a typesetting pass that ran while the page's
// layout was still changing can leave a formula raw (one page in a few hundred); a formula MathJax cannot typeset
// stays raw (or becomes an error) however often it is asked, and is reported below
function settle(start) {
  if (!(window.MathJax && typeof MathJax.typesetPromise === "function")) return null;
  return MathJax.typesetPromise().then(() => {
    const raw = Array.from(document.querySelectorAll(".arithmatex")).some((e) => !e.querySelector("mjx-container"));
    return raw && Date.now() - start < 20000 ? new Promise((r) => setTimeout(r, 250)).then(() => settle(start)) : null;
  });
}
const images = Array.from(document.images).map((img) => img.complete ? null
    : new Promise((resolve) => { img.onload = img.onerror = resolve; }));
Promise.all([math, ...images]).then(() => document.fonts.ready).then(() => {
  const main = document.querySelector("article") || document.body;
  const prose = main.cloneNode(true);
  prose.querySelectorAll("pre, code, mjx-container, script, style, .headerlink").forEach((e) => e.remove());
  const longest = (text) => text.split("\n").reduce((a, b) => (b.length > a.length ? b : a), "");
  // a code block scrolls inside its <code> (the theme's overflow: auto): wider content than box is cut off
  const overflowing = Array.from(main.querySelectorAll("pre")).map((pre, index) => {
    const code = pre.querySelector("code");
    const box = code && getComputedStyle(code).display !== "inline" ? code : pre;  // the one that scrolls
    return {index: index, over: box.scrollWidth - box.clientWidth, width: box.clientWidth,
            line: longest(box.textContent).slice(0, 100)};
  }).filter((block) => block.over > 1);
  // lines a code block wraps (each line is a span of its own, pymdownx.highlight's line_spans): reported,
  // not failed (a wrapped line is readable; a diagram that wraps is worth redrawing narrower)
  const wrapped = Array.from(main.querySelectorAll('pre > code > span[id^="__span"]')).filter((line) =>
      line.getBoundingClientRect().height > 1.5 * parseFloat(getComputedStyle(line).lineHeight)).length;
  // a wrap inside a token: where a code line continues on the next row, the characters on both sides of the
  // break are letters, digits or "_" (one identifier or number cut in two; CJK text breaks between any two
  // characters). Read character by character in the code blocks that wrap at all (taller than their lines)
  const cjkScripts = "\\p{Script=Han}\\p{Script=Hiragana}\\p{Script=Katakana}\\p{Script=Hangul}";
  const word = new RegExp(`^(?![${cjkScripts}])[\\p{L}\\p{N}_]$`, "u");
  const tokenBreaks = [];
  main.querySelectorAll("pre > code").forEach((code, index) => {
    const rowHeight = parseFloat(getComputedStyle(code).lineHeight) || 16;
    const rows = code.textContent.replace(/\n$/, "").split("\n").length;
    if (code.getBoundingClientRect().height < (rows + 0.5) * rowHeight) return;
    const text = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    let top = null, before = "\n", context = "";
    for (let node = text.nextNode(); node; node = text.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        const ch = node.data[i];
        context = (context + ch).slice(-40);
        if (ch === "\n") { top = null; before = ch; continue; }
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect) continue;
        if (top !== null && rect.top > top + rowHeight / 2 && word.test(before) && word.test(ch)
            && tokenBreaks.length < 20) {
          tokenBreaks.push({index: index, at: context.slice(-20), width: code.clientWidth});
        }
        top = rect.top;
        before = ch;
      }
    }
  });
  // a table wider than its column: its cells cut off behind a scroll bar (or widening the page)
  const wideTables = Array.from(main.querySelectorAll("table")).map((table, index) => {
    const box = table.closest(".md-typeset__scrollwrap") || table.parentElement;
    return {index: index, over: Math.max(box.scrollWidth - box.clientWidth,
                                         table.getBoundingClientRect().width - box.clientWidth),
            width: box.clientWidth, head: (table.rows[0] ? table.rows[0].textContent : "").trim().slice(0, 80)};
  }).filter((table) => table.over > 1);
  // tofu: a character drawn in its element's fonts looks like a code point no font has (U+10FFFD)
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 48;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  const shape = (family, text) => {
    ctx.clearRect(0, 0, 48, 48);
    ctx.font = `32px ${family}`;
    ctx.textBaseline = "middle";
    ctx.fillText(text, 4, 24);
    const data = ctx.getImageData(0, 0, 48, 48).data;
    let hash = 0;
    for (let i = 3; i < data.length; i += 4) hash = (Math.imul(hash, 31) + data[i]) | 0;
    return hash;
  };
  const notdef = new Map(), checked = new Set(), tofu = new Map();
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT, {acceptNode: (node) =>
      node.parentElement.closest("mjx-container, script, style, svg, .headerlink")
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const family = getComputedStyle(node.parentElement).fontFamily;
    for (const ch of node.textContent) {
      if (ch.codePointAt(0) < 0x80 || /[\s\p{M}\p{Cf}]/u.test(ch) || checked.has(family + ch)) continue;
      checked.add(family + ch);
      if (!notdef.has(family)) notdef.set(family, shape(family, "\u{10FFFD}"));
      if (shape(family, ch) === notdef.get(family)) tofu.set(ch, family);
    }
  }
  const cjk = /[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]/u.test(main.textContent);
  const faces = Array.from(document.fonts).filter((f) => f.family.replace(/["']/g, "") === CJK_FONT);
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
    blocks: main.querySelectorAll("pre").length,
    overflowing: overflowing,
    wrapped: wrapped,
    token_breaks: tokenBreaks,
    wide_tables: wideTables,
    page_overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    code_spans: Array.from(main.querySelectorAll("code")).filter((c) => !c.closest("pre")).map((c) => c.textContent),
    tofu: Array.from(tofu.entries()),
    cjk_font: cjk ? (faces.some((f) => f.status === "loaded") ? "loaded"
                     : faces.length ? "declared, never used" : "not in the site") : null,
  });
}, (error) => done({error: String(error)}));
""".replace("CJK_FONT", repr(CJK_FONT))

#: TeX left in prose: a control word, the \( \) \[ \] delimiters, or $…$ with no space inside either $
#: (arithmatex's rule for inline math, so "$5 and 10 $" is prose)
RAW_TEX = r"(\\[A-Za-z]+|\\[()\[\]]|\$[^\s$](?:[^$]*[^\s$])?\$)"
#: a formula in a code span: a Greek letter, a mathematical sign no programming language writes (· × √ ≤ ∈
#: ⌊ the minus sign, super- and subscripts), TeX's ``_{`` ``^{`` ``\frac{``, or a one-letter name with a
#: one-character subscript (``s_t``, ``W_q``); code spans hold code
MATH_IN_CODE = re.compile(r"[\u0370-\u03ff√∑∏≤≥≠≈∈∉⌊⌋⌈⌉·×∞−⁰¹²³⁴⁵⁶⁷⁸⁹⁻₀₁₂₃₄₅₆₇₈₉ᵀᵢⱼ]|[_^]\{|\\[a-z]+\{"
                          r"|(?<![\w.])[A-Za-z]_[A-Za-z0-9](?!\w)")


@dataclass(frozen=True)
class Problem:
    page: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.page}: {self.kind}: {self.detail}"


@dataclass
class PageReport:
    """What one page showed at one width: counts for the summary, and its problems."""

    page: str
    width: int = WIDTHS[0]
    typeset: int = 0
    images: int = 0
    links: int = 0
    blocks: int = 0
    overflowing: int = 0
    wrapped: int = 0
    tofu: str = ""
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
        request_queue_size = 128  # the browser opens many connections at once (socketserver's backlog: 5)

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
    driver.set_script_timeout(120)  # the probe's waits: 60 s for MathJax, 20 s of typesetting, the images
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


def set_width(driver, width: int) -> None:
    """Lay pages out for a window ``width`` CSS pixels wide (a phone below 600: the theme's mobile layout)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": WINDOW_HEIGHT, "deviceScaleFactor": 1, "mobile": width < 600})


def check_page(driver, base: str, page: str, shots: Path, width: int = WIDTHS[0]) -> tuple[PageReport, dict]:
    """Load one page at ``width`` and check it; return its report and what the probe saw (links and ids)."""
    where = f"{page or '/'} @{width}"
    report = PageReport(page or "/", width)
    _requests(driver)  # forget what came before (the browser's own start page, the last page's late requests)
    driver.get_log("browser")
    driver.get(base + page)
    seen = driver.execute_async_script(PAGE_PROBE)
    if "error" in seen:
        report.problems.append(Problem(where, "console-error", f"the page probe failed: {seen['error']}"))
        return report, {"links": [], "ids": []}
    for match in sorted(set(re.findall(RAW_TEX, seen["prose"])))[:10]:
        report.problems.append(Problem(where, "raw-latex", match[:80]))
    for source in seen["untypeset"][:10]:
        report.problems.append(Problem(where, "raw-latex", f"not typeset: {source}"))
    for error in seen["math_errors"]:
        report.problems.append(Problem(where, "math-error", error))
    for line in seen["prose"].splitlines():
        if ">>>" in line:
            report.problems.append(Problem(where, "doctest-prompt", line.strip()[:80]))
    for src in seen["broken_images"]:
        report.problems.append(Problem(where, "missing-image", src))
    for block in seen["overflowing"]:
        report.problems.append(Problem(where, "overflow", f"code block {block['index'] + 1} is {block['over']} px "
                                                          f"wider than its {block['width']} px: {block['line']!r}"))
    for cut in seen["token_breaks"]:
        report.problems.append(Problem(where, "token-break", f"code block {cut['index'] + 1} ({cut['width']} px) "
                                                             f"wraps inside a token: {cut['at']!r}"))
    for table in seen["wide_tables"]:
        report.problems.append(Problem(where, "overflow", f"table {table['index'] + 1} is {table['over']} px wider "
                                                          f"than its {table['width']} px column: {table['head']!r}"))
    if seen["page_overflow"] > 1:
        report.problems.append(Problem(where, "overflow", f"the page is {seen['page_overflow']} px wider than "
                                                          "the window"))
    for char, family in seen["tofu"]:
        report.problems.append(Problem(where, "tofu", f"{char!r} (U+{ord(char):04X}) has no glyph in {family}"))
    if seen["cjk_font"] not in (None, "loaded"):
        report.problems.append(Problem(where, "cjk-font", f"CJK text, and the font {CJK_FONT!r} is {seen['cjk_font']}"))
    for span in sorted(set(seen["code_spans"])):
        if MATH_IN_CODE.search(span):
            report.problems.append(Problem(where, "math-in-code", span[:80]))
    for entry in driver.get_log("browser"):
        if entry["level"] == "SEVERE":
            report.problems.append(Problem(where, "console-error", entry["message"][:200]))
    for url in _requests(driver):
        if url.startswith(NETWORK_SCHEMES) and not url.startswith(base):
            report.problems.append(Problem(where, "outside-request", url))
    report.problems = list(dict.fromkeys(report.problems))  # a resource that failed twice is one problem
    report.typeset, report.images, report.links = seen["typeset"], seen["images"], len(seen["links"])
    report.blocks, report.overflowing, report.wrapped = seen["blocks"], len(seen["overflowing"]), seen["wrapped"]
    report.tofu = "".join(char for char, _ in seen["tofu"])
    folder = shots / str(width)
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / ((page.strip("/").replace("/", "_").removesuffix(".html") or "index") + ".png")
    screenshot(driver, shot)
    report.screenshot = shot.relative_to(shots).as_posix()
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


def check_site(site: Path, shots: Path, profile: Path, widths: tuple[int, ...] = WIDTHS) -> list[PageReport]:
    """Serve ``site``, load every page in Chromium at each width, and check it; screenshots go to ``shots``."""
    shots.mkdir(parents=True, exist_ok=True)
    reports, seen = [], {}
    with serve(site) as base, chromium(profile) as driver:
        for width in widths:
            set_width(driver, width)
            for page in site_pages(site):
                report, found = check_page(driver, base, page, shots, width)
                reports.append(report)
                seen.setdefault(page, found)  # links and anchors are the same at every width
        links = dead_links(base, seen)
    by_page = {report.page: report for report in reports if report.width == widths[0]}
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
    """One line a page and width: formulas typeset, images, links, code blocks, how many overflow, how many
    code lines wrap, tofu, problems, screenshot; then every problem."""
    lines = [f"{'page':<22} {'width':>5} {'formulas':>8} {'images':>6} {'links':>5} {'blocks':>6} {'overflow':>8} "
             f"{'wrapped':>7} {'tofu':>5} {'problems':>8}  screenshot"]
    for r in reports:
        lines.append(f"{r.page:<22} {r.width:>5} {r.typeset:>8} {r.images:>6} {r.links:>5} {r.blocks:>6} "
                     f"{r.overflowing:>8} {r.wrapped:>7} {r.tofu or '-':>5} {len(r.problems):>8}  {r.screenshot}")
    lines += [str(problem) for r in reports for problem in r.problems]
    return "\n".join(lines)
