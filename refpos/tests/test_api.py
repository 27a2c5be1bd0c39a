"""The public API: the front door's names, and the deprecated aliases of ``refpos.MOVED``.

Every alias resolves to the very object at its home, with one DeprecationWarning that names the home; no
alias is listed by ``refpos.__all__`` or ``dir(refpos)``; every home is public (in its package's ``__all__``,
or a module). The repository's own code never uses an alias: pyproject's pytest configuration turns the
warning into an error (checked here too).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import tomllib
import warnings
from pathlib import Path

import pytest

import refpos

ROOT = Path(__file__).resolve().parents[2]


def is_module(path: str) -> bool:
    try:
        return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package
        return False


def resolve_alias(name: str) -> tuple[object, list[warnings.WarningMessage]]:
    """``refpos.<name>`` and the warnings its lookup raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(refpos, name)
    return value, caught


@pytest.mark.parametrize("name", sorted(refpos.MOVED))
def test_each_alias_is_its_home_object_with_one_warning_naming_the_home(name):
    pytest.importorskip("hypothesis")  # refpos.strategies, refpos.hypothesis_profiles
    home = refpos.MOVED[name]
    value, caught = resolve_alias(name)
    assert value is pkgutil.resolve_name(home)
    assert [w.category for w in caught] == [DeprecationWarning]
    message = str(caught[0].message)
    assert message == refpos.deprecation_message(name) and home in message and f"refpos.{name} " in message
    assert caught[0].filename == __file__  # the warning points at the line that used the alias


@pytest.mark.parametrize("name", sorted(refpos.MOVED))
def test_each_home_is_public(name):
    """An alias leads to a documented home: a module, or a name its package lists in ``__all__``, or a function
    that shares its module's name (``refpos.core.softmax.softmax``)."""
    pytest.importorskip("hypothesis")
    home, _, attribute = refpos.MOVED[name].rpartition(".")
    if is_module(refpos.MOVED[name]):
        return
    assert attribute == name, f"refpos.{name} must lead to the same name, not {refpos.MOVED[name]}"
    package = importlib.import_module(home)
    assert attribute in getattr(package, "__all__", ()) or home.rpartition(".")[2] == attribute, refpos.MOVED[name]


def test_no_alias_is_listed_or_bound():
    names = set(refpos.MOVED)
    assert not names & set(refpos.__all__)
    assert not names & set(dir(refpos))
    assert not names & set(vars(refpos)), "an alias bound in the module would resolve without its warning"
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec("from refpos import *", namespace)
    assert not names & set(namespace)
    assert set(refpos.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="'no_such_name'"):
        refpos.no_such_name  # noqa: B018
    assert not hasattr(refpos, "no_such_name")


def test_subpackages_resolve_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in refpos.SUBPACKAGES:
            assert getattr(refpos, name) is importlib.import_module(f"refpos.{name}")


def test_the_pytest_configuration_makes_an_alias_an_error():
    """pyproject's filter matches refpos's deprecation message (and only refpos's), so any use of an alias by
    the repository's code, tests or docs fails the run."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf8"))
    filters = config["tool"]["pytest"]["ini_options"]["filterwarnings"]
    errors = [f.split(":") for f in filters if f.startswith("error:") and f.endswith(":DeprecationWarning")]
    assert len(errors) == 1, filters
    pattern = errors[0][1]
    assert all(re.match(pattern, refpos.deprecation_message(name)) for name in refpos.MOVED)
    assert not re.match(pattern, "numpy.foo is deprecated")
    with pytest.raises(DeprecationWarning, match=re.escape("refpos.encodings.alibi_slopes")):
        refpos.alibi_slopes  # noqa: B018 -- under this run's filters the alias is an error
