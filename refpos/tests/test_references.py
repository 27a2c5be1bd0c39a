"""The repository stands on its own: every reference in code, docs and messages resolves inside it.

Scanned: the text files of ``refpos/``, ``spec_tests/``, ``docs/``, ``golden/`` (README and manifest),
``scripts/`` and the top-level ``README.md``, ``mkdocs.yml``, ``conftest.py``, ``tox.ini``,
``pyproject.toml`` — code, comments, docstrings and the strings ``refpos check`` and the tests print
alike. A reference fails when

* it names a repository file (``docs/rope.md``, ``refpos/check/tables.py``, ``golden/README.md``; in a
  page of ``docs/``, a link or a ``*.md`` relative to the page) that does not exist;
* its ``#anchor`` matches no heading of that page (slugs as Python-Markdown's ``toc`` makes them, or an
  explicit ``{#id}``) and no ``id="…"`` in it;
* it is a bare ``name.md`` outside ``docs/`` (write the path: ``docs/rope.md``);
* it is a section sign ``§`` that does not follow a paper's citation (author and year, or "paper"):
  sections of the project's own pages are cited by anchor, so a ``§`` is a paper's section or a dangling
  reference to a document that is not here;
* it names a document that is not part of the repository (the background notes the project was written
  from) or uses the project's own history ("issue 3", "the seed", "this session"), which a user cannot
  follow.

The last test plants each kind of bad reference in a scratch tree and shows the scanner reports it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THIS = Path(__file__).resolve()

SCANNED_DIRS = ("refpos", "spec_tests", "docs", "golden", "scripts")
SCANNED_FILES = ("README.md", "mkdocs.yml", "conftest.py", "tox.ini", "pyproject.toml")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".json", ".yml", ".yaml", ".toml", ".sh", ".cfg", ".ini", ".js"}
SKIPPED_PARTS = {"__pycache__", "figures", ".pytest_cache", ".hypothesis"}

#: documents outside the repository (written in pieces so that this file does not name them itself)
OUTSIDE = [r"(?<![\w-])" + re.escape(name) for name in ("pitfalls" + ".md", "encodings" + ".md", "design" + ".md",
                                        "attention_worked_example" + ".md", "/work/" + "shared",
                                        "000_f381f6e7", "003_c90b6")] + [r"\bshared" + r" spec\b"]
#: the project's own history: words a user of the repository cannot follow
HISTORY = [r"\b[Ii]ssues?[- ]\d+\b", r"\bthe " + r"issue's\b", r"\bthis " + r"session\b", r"\b[Ss]eed's\b",
           r"\bthe " + r"seeds\b",
           r"\b[Ss]eed " + r"(story|order|example|style|bias)\b", r"\b[Tt]he " + r"seed\b\W*$",
           r"\b[Tt]he " + r"seed[,);:]",
           r"\b[Tt]he " + r"seed (adds|subtracts|prints|follows|calls|names|nudged|rounded|uses|gives)\b"]

#: a ``§`` must follow a citation: a year, "paper", or a named paper, within this many characters
CITATION = re.compile(r"(\b(19|20)\d\d\b|\bpaper\b|RoFormer|Vaswani|Raffel|Shaw|Dai)[^§\n]{0,40}$")
#: repository paths with an optional anchor
REPO_PATH = re.compile(r"(?<![\w/.-])((?:docs|refpos|spec_tests|golden|scripts)/[\w./-]*?\.(?:md|py|json|txt|yml|sh))"
                       r"(#[\w-]+)?")
#: a bare ``name.md`` (with optional anchor), not part of a path or a URL
BARE_MD = re.compile(r"(?<![\w/.-])([\w-]+\.md)(?![\w-])(#[\w-]+)?")
#: a Markdown link target in a page of docs/
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*(?:\{[^}]*#([\w-]+)[^}]*\})?\s*#*\s*$")
HTML_ID = re.compile(r"""\b(?:id|name)=["']([^"']+)["']""")


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}: {self.text!r}"


def slugify(title: str) -> str:
    """A heading's anchor as Python-Markdown's ``toc`` extension makes it (MkDocs' default)."""
    title = re.sub(r"<[^>]+>", "", title)  # inline HTML
    title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    title = re.sub(r"[^\w\s-]", "", title).strip().lower()
    return re.sub(r"[-\s]+", "-", title)


@cache
def anchors_of(path: Path) -> frozenset[str]:
    """Every anchor a page offers: heading slugs (with ``_1``… for repeats), ``{#id}``, HTML ids."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        found.update(HTML_ID.findall(line))
        match = HEADING.match(line) if not fenced else None
        if match:
            if match.group(3):
                found.add(match.group(3))
                continue
            slug = slugify(match.group(2).replace("`", ""))
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}_{n}")
    return frozenset(found)


def scanned_files(root: Path) -> list[Path]:
    files = [root / name for name in SCANNED_FILES if (root / name).is_file()]
    for top in SCANNED_DIRS:
        for path in sorted((root / top).rglob("*")) if (root / top).is_dir() else []:
            if (path.is_file() and path.suffix in TEXT_SUFFIXES and path.resolve() != THIS
                    and not SKIPPED_PARTS & set(path.relative_to(root).parts)):
                files.append(path)
    return files


def _target(root: Path, page: Path, target: str) -> tuple[Path, str | None]:
    """The file and anchor a reference names (a page-relative link inside docs/, else root-relative)."""
    name, _, anchor = target.partition("#")
    base = page.parent if page.parent == root / "docs" else root
    return ((base / name) if name else page), (anchor or None)


def _resolve(root: Path, page: Path, target: str) -> str | None:
    """Why ``target`` does not resolve, or None."""
    path, anchor = _target(root, page, target)
    if not path.is_file():
        return f"no file {path.relative_to(root) if path.is_relative_to(root) else path}"
    if anchor and path.suffix == ".md" and anchor not in anchors_of(path):
        return f"no section #{anchor} in {path.relative_to(root)}"
    return None


def scan(root: Path) -> list[Problem]:
    """Every unresolved or outside reference in the scanned files under ``root``."""
    problems: list[Problem] = []
    for path in scanned_files(root):
        rel = path.relative_to(root).as_posix()
        in_docs = rel.startswith("docs/")
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            def report(why: str, line: str = line, number: int = number, rel: str = rel) -> None:
                problems.append(Problem(rel, number, line.strip()[:160], why))

            for pattern in OUTSIDE:
                if re.search(pattern, line):
                    report("names a document outside the repository")
            for pattern in HISTORY:
                if re.search(pattern, line):
                    report("uses a word of the project's history")
            for match in re.finditer("§", line):
                if not CITATION.search(line[: match.start()]):
                    report("a § that cites no paper (cite a page section by its anchor)")
            spans: list[tuple[int, int]] = []
            for match in REPO_PATH.finditer(line):
                spans.append(match.span())
                why = _resolve(root, root / "README.md", match.group(1) + (match.group(2) or ""))
                if why:
                    report(why)
            if in_docs:
                for match in MD_LINK.finditer(line):
                    target = match.group(1)
                    if re.match(r"[a-z]+:", target) or target.startswith("/"):
                        continue  # URLs and site-absolute paths: checked by the MkDocs build
                    if target.startswith("#") or target.split("#")[0].endswith(".md"):
                        spans.append(match.span(1))
                        why = _resolve(root, path, target)
                        if why:
                            report(why)
            for match in BARE_MD.finditer(line):
                if any(a <= match.start() < b for a, b in spans):
                    continue
                if path.suffix == ".py" and re.search(rf"[\"']{re.escape(match.group(0))}[\"']", line):
                    continue  # a file name in code ("rope.md" in a list of pages), not a reference
                if rel == "mkdocs.yml" or in_docs:
                    why = _resolve(root, root / "docs" / "index.md", match.group(1) + (match.group(2) or ""))
                    if why:
                        report(why)
                elif match.group(1) != "README.md" or match.group(2):
                    report(f"a bare {match.group(1)}: write the path from the repository root (docs/…)")
    return problems


def test_every_reference_resolves_inside_the_repository():
    problems = scan(ROOT)
    assert not problems, f"{len(problems)} references do not resolve:\n" + "\n".join(map(str, problems))


def test_the_new_reference_pages_are_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in ("conventions.md", "anchors.md", "diagnosis.md", "sources.md"):
        assert re.search(rf":\s*{re.escape(page)}\s*$", nav, re.M), page


def test_a_planted_bad_reference_is_reported(tmp_path: Path):
    """The scanner can fail: each kind of bad reference planted in a scratch tree is reported."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "refpos").mkdir()
    (tmp_path / "docs" / "rope.md").write_text("# RoPE\n\n## Layouts: which channels form a pair\n\n"
                                               '<a id="yarn"></a>**YaRN**\n', encoding="utf-8")
    (tmp_path / "docs" / "index.md").write_text(
        "[ok](rope.md#layouts-which-channels-form-a-pair) [ok](rope.md#yarn) [ok](#refpos)\n# refpos\n"
        "[bad anchor](rope.md#no-such-section)\n"
        "[bad page](missing.md)\n", encoding="utf-8")
    (tmp_path / "refpos" / "mod.py").write_text(
        '"""See docs/rope.md#layouts-which-channels-form-a-pair (Vaswani et al. 2017, §3.5)."""\n'
        "# docs/rope.md#no-such-section\n"
        "# docs/nowhere.md\n"
        "# rope.md §8.8\n"
        "# see rope.md\n"
        f"# {'pitfalls' + '.md'} section 18\n"
        f"# the {'shared'} spec\n"
        f"# (issue {3})\n"
        f"# the {'seed'}'s example\n"
        f"# the issue-{8} budget\n", encoding="utf-8")
    found = {(p.path, p.line, p.why) for p in scan(tmp_path)}
    bare = "a bare rope.md: write the path from the repository root (docs/…)"
    assert found == {
        ("docs/index.md", 3, "no section #no-such-section in docs/rope.md"),
        ("docs/index.md", 4, "no file docs/missing.md"),
        ("refpos/mod.py", 2, "no section #no-such-section in docs/rope.md"),
        ("refpos/mod.py", 3, "no file docs/nowhere.md"),
        ("refpos/mod.py", 4, "a § that cites no paper (cite a page section by its anchor)"),
        ("refpos/mod.py", 4, bare),
        ("refpos/mod.py", 5, bare),
        ("refpos/mod.py", 6, "names a document outside the repository"),
        ("refpos/mod.py", 6, f"a bare {'pitfalls' + '.md'}: write the path from the repository root (docs/…)"),
        ("refpos/mod.py", 7, "names a document outside the repository"),
        ("refpos/mod.py", 8, "uses a word of the project's history"),
        ("refpos/mod.py", 9, "uses a word of the project's history"),
        ("refpos/mod.py", 10, "uses a word of the project's history"),
    }, found


@pytest.mark.parametrize(("title", "slug"), [
    ("Layouts: which channels form a pair", "layouts-which-channels-form-a-pair"),
    ("How the cos/sin tables are built", "how-the-cossin-tables-are-built"),
    ("The worked example: 我 愛 你", "the-worked-example"),
    ("T5: buckets (Raffel et al. 2020)", "t5-buckets-raffel-et-al-2020"),
])
def test_slugs_are_python_markdowns(title, slug):
    assert slugify(title) == slug
    toc = pytest.importorskip("markdown.extensions.toc")
    assert toc.slugify(title, "-") == slug


def _catalogue_page() -> tuple[set[str], set[str]]:
    """The ids the catalogue page anchors (its tables) and the ids its examples show refpos check naming."""
    text = (ROOT / "docs" / "diagnosis.md").read_text(encoding="utf-8")
    rows = re.findall(r'^\| <a id="([a-z0-9_]+)"></a>', text, re.M)
    anchored = {re.sub(r"^sinusoid_(?=float32_angles$)", "", a) for a in rows}  # one id, two tables
    examples = text.split("## One example each", 1)[1].split("\n## ", 1)[0]
    outputs = [line for line in examples.splitlines() if line and not line.startswith((">>>", "...", "```"))]
    shown = {name for line in outputs for name in re.findall(r"'([a-z0-9_]+)'", line)}
    return anchored, shown


def test_the_catalogue_page_documents_every_id_with_an_example():
    """docs/diagnosis.md: each catalogued id has an anchor and an example (the examples run in test_docs)."""
    anchored, shown = _catalogue_page()
    assert len(anchored) >= 28
    assert anchored == shown, f"anchored only: {sorted(anchored - shown)}; in examples only: {sorted(shown - anchored)}"
    from refpos.check.shared.catalogue import MISTAKES

    # what refpos check names has a row of the page's tables (closest_mistake: its section on no match)
    diagnosed = {m.id for m in MISTAKES if m.diagnosed and m.doc == f"docs/diagnosis.md#{m.id}"}
    assert diagnosed == anchored, diagnosed ^ anchored
    assert all(m.doc.startswith("docs/diagnosis.md#") for m in MISTAKES if m.diagnosed)
