"""MkDocs hook: every cell of a table carries its column's header as ``data-label``.

On a phone a table of many columns cannot fit its column, and a table wider than the page hides its cells behind
a scroll bar. docs/stylesheets/extra.css lays such a table out as one block per row there, each cell under its
column's name, ``td::before { content: attr(data-label) }``; this hook writes the names into the cells (the text
of each ``<th>`` of the table's header row, tags stripped). The table itself is unchanged on a wider screen.
tox -e docs-browser checks that no table is wider than its column (refpos/tests/site_browser.py).
"""

from __future__ import annotations

import html
import re

TABLE = re.compile(r"<table\b[^>]*>.*?</table>", re.S)
HEADER_CELL = re.compile(r"<th\b[^>]*>(.*?)</th>", re.S)
ROW = re.compile(r"<tr\b[^>]*>.*?</tr>", re.S)
DATA_CELL = re.compile(r"<td\b")
TAG = re.compile(r"<[^>]*>")


def labelled(table: str) -> str:
    """``table`` (one ``<table>`` of the page) with ``data-label`` on each ``<td>``: its column's header text."""
    head = table.split("</thead>", 1)[0] if "</thead>" in table else ""
    names = [html.escape(html.unescape(TAG.sub("", cell)).strip(), quote=True) for cell in HEADER_CELL.findall(head)]
    if not names:
        return table

    def row(match: re.Match) -> str:
        column = iter(names)
        return DATA_CELL.sub(lambda _: f'<td data-label="{next(column, "")}"', match.group(0))

    return ROW.sub(row, table)


def on_page_content(page_html: str, page, config, files) -> str:
    """Label the cells of every table of a page."""
    return TABLE.sub(lambda m: labelled(m.group(0)), page_html)
