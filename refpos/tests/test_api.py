"""The public API: the front door's names, and the deprecated aliases of ``refpos.MOVED``.

Every alias resolves to the very object at its home, with one DeprecationWarning that names the home; a module
alias also in the import statement forms (``import refpos.adapter``, ``from refpos.adapter import X``,
``import refpos.rope.layers``); no alias is listed by ``refpos.__all__`` or ``dir(refpos)``; every home is public
(in its package's ``__all__``, or a module). The repository's own code never uses an alias: pyproject's pytest
configuration turns the warning into an error (checked here too).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
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


#: the aliases that are attributes of refpos (``refpos.rope.layers`` is a module path: an import form only)
ATTRIBUTES = sorted(name for name in refpos.MOVED if "." not in name)
#: the aliases an import statement loads: ``(alias, module at home)``
MODULES = sorted((name, refpos.moved_module(name)) for name in refpos.MOVED if refpos.moved_module(name))


@pytest.mark.parametrize("name", ATTRIBUTES)
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


def _forget(alias: str) -> None:
    """Drop ``refpos.<alias>`` from ``sys.modules`` (an earlier import would answer without the finder)."""
    sys.modules.pop(f"refpos.{alias}", None)


@pytest.mark.parametrize(("name", "home"), MODULES)
def test_each_module_alias_imports_with_the_statement_forms_and_one_warning(name, home):
    pytest.importorskip("hypothesis")
    module = importlib.import_module(home)
    for statement in (f"import refpos.{name}", f"import refpos.{name} as alias",
                      f"from refpos.{name} import __name__ as alias"):
        _forget(name)
        namespace: dict[str, object] = {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(statement, __file__, "exec"), namespace)
        assert [str(w.message) for w in caught] == [refpos.deprecation_message(name)], statement
        assert caught[0].filename == __file__, caught[0].filename  # the warning points at the import statement
        assert sys.modules[f"refpos.{name}"] is module
        if "as alias" in statement:
            assert namespace["alias"] in (module, module.__name__, getattr(refpos.encodings, name, None),
                                          pkgutil.resolve_name(refpos.MOVED[name]))
    assert module.__name__ == home and module.__spec__.name == home  # the module keeps its own name and spec
    _forget(name)


def test_the_old_import_forms_of_the_issue_work():
    """``from refpos.adapter import X`` and ``refpos.rope.layers``, the forms a first hour tried."""
    for alias in ("adapter", "rope.layers"):
        _forget(alias)
    with pytest.warns(DeprecationWarning, match=re.escape(refpos.deprecation_message("adapter"))):
        from refpos.adapter import rope_frequencies  # noqa: F401
    with pytest.warns(DeprecationWarning, match=re.escape(refpos.deprecation_message("rope.layers"))):
        from refpos.rope.layers import hf_layers
    assert hf_layers is refpos.models.hf_layers
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("refpos.no_such_module")
    with pytest.raises(ModuleNotFoundError):  # a moved name that is no module has no import form
        importlib.import_module("refpos.alibi_slopes")


def test_no_alias_is_listed_or_bound():
    with warnings.catch_warnings():  # an import of an alias binds nothing in refpos either
        warnings.simplefilter("ignore", DeprecationWarning)
        importlib.import_module("refpos.adapter")
    refpos._IMPORTED.clear()
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
