"""Where the spec suite (``spec_tests/``) and the committed goldens (``golden/``) are.

In a source checkout they are the repository's own folders, beside the ``refpos`` package. A wheel
(``pip install refpos``) carries copies of both inside the package, in ``refpos/_suite/`` (``setup.py``
copies them there when the wheel is built), so the suite and the goldens need no clone:
``refpos suite`` runs the one, ``refpos golden verify`` and ``refpos check CASE`` read the other.
"""

from __future__ import annotations

from pathlib import Path

#: the folder of the ``refpos`` package
PACKAGE = Path(__file__).resolve().parent
#: where a wheel keeps its copies of ``spec_tests/`` and ``golden/``
BUNDLED = PACKAGE / "_suite"


def is_checkout(folder: Path) -> bool:
    """Whether ``folder`` is a refpos source checkout: the project file beside the suite and the goldens."""
    return ((folder / "pyproject.toml").is_file() and (folder / "spec_tests" / "conftest.py").is_file()
            and (folder / "golden" / "manifest.json").is_file())


def suite_root() -> Path:
    """The folder that holds ``spec_tests/`` and ``golden/``: the checkout's root, else the wheel's copies.

    Raises
    ------
    FileNotFoundError
        Neither is there (a package built without them).
    """
    if is_checkout(PACKAGE.parent):
        return PACKAGE.parent
    if (BUNDLED / "spec_tests" / "conftest.py").is_file() and (BUNDLED / "golden" / "manifest.json").is_file():
        return BUNDLED
    raise FileNotFoundError(f"no spec suite and goldens beside {PACKAGE} nor in {BUNDLED}: this refpos was "
                            "installed without them (build the wheel with pip or python -m build)")
