"""MkDocs hook: a code line wraps between its tokens, never inside a name or a number.

Code blocks wrap instead of scrolling (docs/stylesheets/extra.css), and a browser breaks a line only at a space or
after a hyphen: a long call (``refpos.to_numpy(refpos.encodings.sinusoidal_frequencies(128))``) or a path
(``spec_tests/adapters/rotary_embedding_torch.xfails.txt``) has no place to break, and on a phone it either runs
out of its column or, told to break anywhere, is cut inside a name. This hook gives each code block the places a
reader would break it — between tokens — as ``<wbr>`` elements (no character: nothing is added to what the copy
button copies, to the search index or to the text):

* after ``/`` and ``::`` (a path, a test id), and after ``(``, ``[``, ``{`` and ``,`` (a call, a list);
* before ``.`` and ``=`` that stand between word characters (``refpos`` / ``.encodings``, ``REFPOS_IMPL`` /
  ``=my_adapter``; a decimal point has a digit before it and stays in its number).

Only the text between the tags of ``<pre><code>…</code></pre>`` is touched. tox -e docs-browser checks the result
(refpos/tests/site_browser.py: no code block wider than its column, no line wrapped inside a token).
"""

from __future__ import annotations

import re

#: one code block of the rendered page (Pygments' <pre><span></span><code>…</code></pre> included)
CODE_BLOCK = re.compile(r"(<pre\b[^>]*>.*?<code\b[^>]*>)(.*?)(</code>\s*</pre>)", re.S)
#: a tag inside a code block (Pygments' token spans, the line spans): left as it is
TAG = re.compile(r"(<[^>]*>)")
#: the places a line may break between tokens, in a code block's text
BREAK = re.compile(r"(?<=/)(?=[\w.])|(?<=::)(?=\w)|(?<=[(\[{,])(?=[^\s)\]}])|(?<=[A-Za-z_)\]])(?=[.=][A-Za-z_&\"'])")


def with_breaks(code: str) -> str:
    """``code`` (the HTML inside one ``<code>``) with a ``<wbr>`` at each place of :data:`BREAK` in its text.

    The places are found in the block's whole text (Pygments puts each token in a span of its own: a ``.`` and
    the name before it are in two spans) and put back in the part of the text they fall in; a place never falls
    inside an entity (``&quot;`` holds none of the characters :data:`BREAK` looks at)."""
    parts = TAG.split(code)  # text, tag, text, tag, …, text
    text = "".join(parts[0::2])
    cuts = sorted({m.start() for m in BREAK.finditer(text)}, reverse=True)
    start = len(text)
    for index in range(len(parts) - 1, -1, -2):  # each text part from the last, with the cuts inside it
        start -= len(parts[index])
        part = parts[index]
        while cuts and cuts[0] >= start:
            at = cuts.pop(0) - start
            part = part[:at] + "<wbr>" + part[at:]
        parts[index] = part
    return "".join(parts)


def on_page_content(html: str, page, config, files) -> str:
    """Add the break opportunities to every code block of a page."""
    return CODE_BLOCK.sub(lambda m: m.group(1) + with_breaks(m.group(2)) + m.group(3), html)
