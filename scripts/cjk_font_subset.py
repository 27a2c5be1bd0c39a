"""Write the documentation's CJK font: the glyphs of every CJK character in ``docs/`` and nothing else.

The pages quote Chinese (the worked example's 我 愛 你, the sentences of the NoPE and relative pages); a
reader's machine may have no CJK font, and a browser then draws empty boxes. The site therefore carries
a subset of Noto Sans CJK TC Regular (traditional forms: 愛, not 爱) with only the characters the pages
use, as ``docs/stylesheets/fonts/refpos-cjk.woff`` (a few kilobytes), declared in
``docs/stylesheets/extra.css`` for the CJK code points only. Noto Sans CJK is under the SIL Open Font
License 1.1, which allows a subset to be redistributed with its license (``OFL.txt`` beside it).

Run it again when a page gains a CJK character (``refpos/tests/test_docs_site.py`` says so), from Debian's
package, unpacked without installing it::

    apt-get download fonts-noto-cjk && dpkg-deb -x fonts-noto-cjk_*.deb noto
    python scripts/cjk_font_subset.py noto/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc

It needs fontTools (a dependency of matplotlib, the ``plot`` extra).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "stylesheets" / "fonts" / "refpos-cjk.woff"
#: the CJK code points the stylesheet gives to the subset (its @font-face unicode-range)
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
#: the face of the collection: Noto Sans CJK TC (traditional Chinese)
FACE = "Noto Sans CJK TC"


def characters(root: Path = ROOT) -> list[str]:
    """Every CJK character of the documentation's pages (and of the README, which GitHub shows)."""
    pages = [*sorted((root / "docs").rglob("*.md")), root / "README.md"]
    return sorted({char for page in pages for char in CJK.findall(page.read_text(encoding="utf-8"))})


def main(collection: str) -> None:
    from fontTools import subset
    from fontTools.ttLib import TTCollection

    faces = [font for font in TTCollection(collection).fonts if font["name"].getDebugName(1) == FACE]
    if not faces:
        raise SystemExit(f"{collection} has no face {FACE!r}")
    font = faces[0]
    wanted = characters()
    options = subset.Options()
    options.flavor = "woff"  # zlib: readable without brotli; a handful of glyphs either way
    options.layout_features = ["*"]
    options.name_IDs = ["*"]  # keep the copyright and license records
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(text="".join(wanted))
    subsetter.subset(font)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    font.flavor = "woff"
    font.save(OUT)
    print(f"{OUT.relative_to(ROOT)}: {len(wanted)} characters ({''.join(wanted)}), {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
