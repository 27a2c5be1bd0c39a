"""What the documentation needs to read right, checked on its sources (no browser; ``tox -e docs-browser``
reads the built site):

* no formula is written as a code span (math is typeset; code spans hold code), by the same rule the
  browser check applies to the rendered pages (``site_browser.MATH_IN_CODE``);
* every listing of a file is inlined, so that it reads on GitHub too (no ``--8<--`` placeholder), and is
  the file itself, character for character (``<!-- listing: PATH -->`` before its fence);
* the bundled CJK font subset draws every CJK character the pages use, carries its license, and the
  stylesheet loads it; the stylesheet's wrapped code blocks have the line spans they rely on;
* the site's hooks give code its places to break between tokens (never inside a name or a number) and every
  table cell its column's name (a wide table stacks on a phone under those names).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from refpos.tests.site_browser import CJK_FONT, MATH_IN_CODE
from refpos.tests.test_docs import prose_lines

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
FONT = DOCS / "stylesheets" / "fonts" / "refpos-cjk.woff"
STYLESHEET = DOCS / "stylesheets" / "extra.css"
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LISTING = re.compile(r"<!-- listing: (\S+) -->\n```[a-z]*\n(.*?)\n```", re.S)


def math_in_code_spans(text: str) -> list[tuple[int, str]]:
    """``(line, span)`` of every code span outside fenced blocks that holds a formula."""
    return [(number, m.group(1)) for number, line in prose_lines(text) for m in CODE_SPAN.finditer(line)
            if MATH_IN_CODE.search(m.group(1))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_formula_is_a_code_span(page: Path):
    found = math_in_code_spans(page.read_text(encoding="utf-8"))
    assert not found, f"docs/{page.name}: formulas as code spans (write them as $…$): {found}"


def test_the_formula_rule_can_fail():
    """Formulas are found; code, config keys and file names are not."""
    text = ("The angle `φ_j = p·ω_j`, sections `s_t + s_h + s_w = m`, `q·kᵀ`, `x^{2}`, `−inf`.\n\n"
            "```text\n`ω` inside a fence\n```\n\n`rope_theta`, `inv_freq`, `x ** 2 - 1`, `golden/cases`, `q_len`.\n")
    assert [span for _, span in math_in_code_spans(text)] == ["φ_j = p·ω_j", "s_t + s_h + s_w = m", "q·kᵀ",
                                                              "x^{2}", "−inf"]


def test_no_page_uses_a_placeholder():
    found = [page.name for page in PAGES if "--8<--" in page.read_text(encoding="utf-8")]
    assert not found, f"pages with --8<-- placeholders (GitHub shows them as they are): {found}"


def test_listings_are_the_files():
    listings = [(page, path, body) for page in PAGES
                for path, body in LISTING.findall(page.read_text(encoding="utf-8"))]
    assert len(listings) >= 3, listings
    for page, path, body in listings:
        listed = ROOT / path
        assert listed.is_file(), f"docs/{page.name} lists {path}, which does not exist"
        assert body == listed.read_text(encoding="utf-8").rstrip("\n"), (
            f"docs/{page.name}: the listing of {path} differs from the file: copy the file into the page")


def test_a_changed_listing_is_caught():
    page = '<!-- listing: docs/examples/run_engine.py -->\n```python\nimport json\n```\n'
    (path, body), = LISTING.findall(page)
    assert path == "docs/examples/run_engine.py" and body != (ROOT / path).read_text(encoding="utf-8").rstrip("\n")


# ------------------------------------------------------------------------------------------ the CJK font
def _subset_script():
    spec = importlib.util.spec_from_file_location("cjk_font_subset", ROOT / "scripts" / "cjk_font_subset.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cjk_font_subset", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(importlib.util.find_spec("fontTools") is None, reason="fontTools (with matplotlib) is not here")
def test_the_font_subset_draws_every_cjk_character_of_the_pages():
    from fontTools.ttLib import TTFont

    wanted = _subset_script().characters(ROOT)
    assert {"我", "愛", "你"} <= set(wanted)
    cmap = TTFont(FONT).getBestCmap()
    missing = [char for char in wanted if ord(char) not in cmap]
    assert not missing, (f"{FONT.name} lacks {''.join(missing)}: rerun scripts/cjk_font_subset.py (its docstring "
                         "says how)")
    assert len(cmap) <= len(wanted) + 2, f"{FONT.name} carries {len(cmap)} characters, the pages use {len(wanted)}"


def test_the_font_ships_with_its_license_and_is_loaded():
    assert FONT.is_file() and FONT.stat().st_size < 100_000
    license_text = (FONT.parent / "OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in license_text and "Noto Sans CJK" in license_text
    css = STYLESHEET.read_text(encoding="utf-8")
    assert f'font-family: "{CJK_FONT}"' in css and 'url("fonts/refpos-cjk.woff")' in css
    script = _subset_script()
    assert script.OUT == FONT
    ranges = re.search(r"unicode-range: ([^;]+);", css).group(1)
    for char in script.characters(ROOT):  # every character the subset holds is routed to it
        assert any(int(lo, 16) <= ord(char) <= int(hi, 16) for lo, hi in re.findall(r"U\+([0-9A-F]+)-([0-9A-F]+)",
                                                                                     ranges)), char


def test_the_site_loads_the_stylesheet_and_gives_lines_their_spans():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^extra_css:\n  - stylesheets/extra\.css", config, re.M)
    assert re.search(r"line_spans: __span", config), "extra.css indents wrapped lines through the line spans"
    assert 'span[id^="__span"]' in STYLESHEET.read_text(encoding="utf-8")


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_code_breaks_fall_between_tokens_only():
    """A <wbr> after "/", "::", "(", ","; before "." and "=" between names; never inside a name, a number or an
    entity, whichever Pygments span a character is in."""
    hook = _hook("mkdocs_code_breaks")
    code = ('<span class="n">refpos</span><span class="o">.</span><span class="n">to_numpy</span><span class="p">('
            '</span><span class="mf">3.25</span>, &quot;x&quot;) spec_tests/adapters/apple_mlx.xfails.txt t.py::test_x '
            'REFPOS_IMPL=my_adapter -0.5')
    out = hook.with_breaks(code)
    assert out.replace("<wbr>", "") == code
    text = re.sub(r"<(?!wbr>)[^>]*>", "", out)
    pieces = text.split("<wbr>")
    assert pieces == ["refpos", ".to_numpy(", '3.25, &quot;x&quot;) spec_tests/', "adapters/", "apple_mlx", ".xfails",
                      ".txt t", ".py::", "test_x REFPOS_IMPL", "=my_adapter -0.5"], pieces
    page = f'<p>a.b/c</p><pre><span></span><code>{code}</code></pre>'
    assert hook.on_page_content(page, None, None, None).startswith("<p>a.b/c</p>")  # prose is left alone
    assert "<wbr>" in hook.on_page_content(page, None, None, None)


def test_table_cells_carry_their_columns_name():
    hook = _hook("mkdocs_table_labels")
    table = ('<table><thead><tr><th>model <code>type</code></th><th>A &amp; B</th></tr></thead><tbody>'
             '<tr><td>llama</td><td>1</td></tr><tr><td class="x">qwen</td><td>2</td></tr></tbody></table>')
    out = hook.on_page_content(f"<p>x</p>{table}", None, None, None)
    assert out.count('<td data-label="model type"') == 2 and out.count('<td data-label="A &amp; B"') == 2, out
    assert hook.labelled("<table><tr><td>no header</td></tr></table>") == "<table><tr><td>no header</td></tr></table>"


def test_the_site_runs_both_hooks_and_the_stylesheet_uses_them():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    css = STYLESHEET.read_text(encoding="utf-8")
    assert "  - scripts/mkdocs_code_breaks.py" in config and "  - scripts/mkdocs_table_labels.py" in config
    assert "overflow-wrap: normal;" in css and "overflow-wrap: anywhere" not in css.split("table:not")[0]
    assert "content: attr(data-label);" in css
