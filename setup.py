"""Build step of the wheel: the spec suite and the committed goldens go inside the package.

Everything else about the package is in ``pyproject.toml``. A wheel carries ``spec_tests/`` and
``golden/`` as ``refpos/_suite/spec_tests/`` and ``refpos/_suite/golden/`` (the repository keeps its own
layout), and beside them ``refpos/_suite/pytest.ini``, written from ``[tool.pytest.ini_options]`` of
``pyproject.toml`` so that the installed suite runs under the same pytest settings as the repository's.
``refpos.installed`` finds them; ``refpos suite`` runs the suite. An editable install copies nothing: it
reads the checkout's own folders.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: repository folders that ship in the wheel, under refpos/_suite/
BUNDLED = ("spec_tests", "golden")
#: never shipped: caches that a test run leaves in the folders
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")


def pytest_ini(pyproject: Path) -> str:
    """The ``[pytest]`` section with the repository's pytest settings (``testpaths`` left out)."""
    options = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    lines = ["# written by setup.py from pyproject.toml's [tool.pytest.ini_options] when the wheel was built",
             "[pytest]"]
    for key, value in options.items():
        if key == "testpaths":
            continue
        if isinstance(value, list):
            lines.append(f"{key} =")
            lines += [f"    {item}" for item in value]
        else:
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


class BuildWithSuite(build_py):
    """``build_py``, then the suite, the goldens and their pytest settings into ``refpos/_suite/``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "refpos" / "_suite"
        for name in BUNDLED:
            if (target / name).exists():
                shutil.rmtree(target / name)
            shutil.copytree(HERE / name, target / name, ignore=LEFT_OUT)
        (target / "pytest.ini").write_text(pytest_ini(HERE / "pyproject.toml"), encoding="utf-8")


if __name__ == "__main__":  # as setuptools runs it (the tests import the functions above)
    setup(cmdclass={"build_py": BuildWithSuite})
