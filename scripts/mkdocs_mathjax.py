"""MkDocs hook: serve MathJax from the site itself, so every formula renders with no network.

MathJax 3 comes from PyPI (the ``django-static-mathjax`` package of the ``docs`` extra: the files of the
MathJax 3.2.2 release, in a Python package named ``mathjax``; no Django is needed or imported). At build
time this hook adds its browser build to the site under ``javascripts/mathjax/``: the TeX-to-HTML
component ``tex-chtml.js`` that ``mkdocs.yml`` loads, and the folders it loads from on demand (TeX
extensions, the HTML fonts, the context menu and its accessibility parts). Nothing is fetched from outside
when a page is read.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

#: where the files go in the site (``mkdocs.yml`` loads ``javascripts/mathjax/tex-chtml.js``)
SITE_FOLDER = "javascripts/mathjax"
#: what of MathJax's ``es5/`` folder the site needs: the component and what it loads on demand
NEEDED = ("tex-chtml.js", "input", "output", "ui", "a11y", "sre", "adaptors")


def mathjax_folder() -> Path:
    """The ``es5/`` folder of the installed MathJax package; a clear error when it is not installed."""
    spec = importlib.util.find_spec("mathjax")
    if spec is None or spec.origin is None:
        raise PluginError("MathJax is not installed: pip install -e '.[docs]' (it brings django-static-mathjax)")
    folder = Path(spec.origin).parent / "static" / "mathjax" / "es5"
    if not (folder / "tex-chtml.js").is_file():
        raise PluginError(f"{folder} has no tex-chtml.js: the 'mathjax' package found is not django-static-mathjax")
    return folder


def on_files(files: Files, config) -> Files:
    """Add MathJax's files to the site (``mkdocs serve`` serves them too)."""
    es5 = mathjax_folder()
    for name in NEEDED:
        entry = es5 / name
        paths = [entry] if entry.is_file() else sorted(p for p in entry.rglob("*") if p.is_file())
        for path in paths:
            uri = f"{SITE_FOLDER}/{path.relative_to(es5).as_posix()}"
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
