"""The package's shape: imports flow one way through the layers, and only ``refpos.cli`` talks to a user.

The layers (the front door's docstring states them too), each importing only from itself and the layers
before it::

    0  refpos.backend, refpos.validation, refpos.bounds, refpos.parallel, refpos.encoding, refpos.pairs,
       refpos.mistake_match
    1  refpos.core            (softmax, attention, chunked attention, heads)
    2  refpos.encodings, refpos.rope   (siblings: neither imports the other)
    3  refpos.models          (a model's config.json: the family table, the resolver)
    4  refpos.pipeline
    5  refpos.golden
    6  refpos.check
    7  refpos.testing, refpos.tools    (siblings)
    8  refpos.cli

The front door ``refpos`` (``refpos/__init__.py``) gathers layers 0-4, so only a module of layer 5 or later
may import it. Every import counts, also one inside a function: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]

#: module prefix -> (layer, group); a module belongs to the longest prefix that matches it
LAYERS: dict[str, tuple[int, str]] = {
    "refpos.backend": (0, "base"),
    "refpos.validation": (0, "base"),
    "refpos.bounds": (0, "base"),
    "refpos.parallel": (0, "base"),
    "refpos.encoding": (0, "base"),
    "refpos.pairs": (0, "base"),
    "refpos.inputs": (0, "base"),
    "refpos.installed": (0, "base"),
    "refpos.directory": (0, "base"),
    "refpos.outputs": (0, "base"),
    "refpos.mistake_match": (0, "base"),
    "refpos.core": (1, "core"),
    "refpos.encodings": (2, "encodings"),
    "refpos.rope": (2, "rope"),
    "refpos.models": (3, "models"),
    "refpos.pipeline": (4, "pipeline"),
    "refpos.golden": (5, "golden"),
    "refpos.check": (6, "check"),
    "refpos.testing": (7, "testing"),
    "refpos.tools": (7, "tools"),
    "refpos.cli": (8, "cli"),
    "refpos.__main__": (8, "cli"),
}
FRONT_DOOR = "refpos"
FRONT_DOOR_LAYER = 4  # what refpos/__init__.py gathers


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    """Every module of the package except its tests."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "tests" not in p.relative_to(PACKAGE).parts}


def layer_of(module: str) -> tuple[int, str]:
    if module == FRONT_DOOR:
        return FRONT_DOOR_LAYER, "front door"
    matches = [prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {Path(__file__).name}")
    return LAYERS[max(matches, key=len)]


def imports_of(path: Path, module: str, known: set[str]) -> list[tuple[str, int, bool]]:
    """``(imported refpos module, line, at module level)`` for every import statement of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf8"))
    top_level = {id(node) for node in tree.body}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            # ``from refpos.golden import tolerance`` imports the module refpos.golden.exact.tolerance
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in targets:
            if target == FRONT_DOOR or target.startswith(FRONT_DOOR + "."):
                found.append((target, node.lineno, id(node) in top_level))
    return found


def test_every_module_is_in_a_layer_and_imports_only_earlier_layers():
    modules = package_modules()
    known = set(modules)
    problems = []
    for module, path in modules.items():
        own_layer, own_group = layer_of(module)
        for target, line, _ in imports_of(path, module, known):
            if target == module:
                continue
            layer, group = layer_of(target)
            if target == FRONT_DOOR and module != FRONT_DOOR and own_layer <= FRONT_DOOR_LAYER:
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} (layer {own_layer}) imports "
                                f"the front door, which gathers layers 0-{FRONT_DOOR_LAYER}")
            elif layer > own_layer or (layer == own_layer and group != own_group and module != FRONT_DOOR):
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} (layer {own_layer}, "
                                f"{own_group}) imports {target} (layer {layer}, {group})")
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_no_import_cycle():
    """The imports form no cycle, counting lazy ones (an import inside a function still ties two modules)."""
    modules = package_modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = {t for t, _, _ in imports_of(path, module, known) if t in known and t != module}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def _talks_to_user(tree: ast.AST) -> list[tuple[int, str]]:
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            hits.append((node.lineno, "print("))
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            hits.append((node.lineno, "import argparse"))
        if isinstance(node, ast.ImportFrom) and node.module == "argparse":
            hits.append((node.lineno, "from argparse import"))
        if (isinstance(node, ast.Attribute) and node.attr in {"stdout", "stderr"}
                and isinstance(node.value, ast.Name) and node.value.id == "sys"):
            hits.append((node.lineno, f"sys.{node.attr}"))
    return hits


def test_only_the_cli_parses_arguments_or_prints():
    problems = []
    for module, path in package_modules().items():
        if layer_of(module)[1] == "cli":
            continue
        for line, what in _talks_to_user(ast.parse(path.read_text(encoding="utf8"))):
            problems.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {what}")
    assert not problems, "only refpos/cli/ may parse arguments or print:\n" + "\n".join(problems)


def test_the_rules_can_fail(tmp_path):
    """The checks above catch what they are for: a planted upward import, a cycle, a print."""
    assert layer_of("refpos.core.attention") < layer_of("refpos.rope.core")
    planted = tmp_path / "planted.py"
    planted.write_text("import sys\nfrom refpos.cli import main\n\n\ndef f():\n    print(sys.stderr)\n")
    assert imports_of(planted, "refpos.core.planted", {"refpos.cli"}) == [("refpos.cli", 2, True)]
    assert [what for _, what in _talks_to_user(ast.parse(planted.read_text()))] == ["print(", "sys.stderr"]
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("refpos.unplaced")


def test_modules_stay_readable_in_size():
    """One concern per module: none over 400 lines (the style's bound; a family's own module may be shorter)."""
    long = {m: n for m, p in package_modules().items() if (n := len(p.read_text(encoding="utf8").splitlines())) > 400}
    assert not long, f"modules over 400 lines (split them by concern): {long}"


def test_no_public_name_hides_a_module():
    """``refpos.attention`` is the function; no module ``refpos.attention`` hides behind it (the modules
    live in subpackages), and no package's ``__all__`` names a function that shares a module's name: a name
    in ``__all__`` that is also a module of the package is that module (``refpos.encodings``)."""
    import importlib
    import pkgutil

    import refpos

    hidden = {}
    for package in [refpos, *(importlib.import_module(f"refpos.{info.name}") for info in pkgutil.iter_modules(
            refpos.__path__) if info.ispkg and info.name != "tests")]:
        for name in getattr(package, "__all__", []):
            module = f"{package.__name__}.{name}"
            if importlib.util.find_spec(module) is not None and getattr(package, name) is not importlib.import_module(
                    module):
                hidden[module] = getattr(package, name)
    assert not hidden, f"public names that hide a module of the same name: {hidden}"


#: the most names the front door may hold (einops: 9; a newcomer's first program needs about fifteen)
FRONT_DOOR_MOST = 25
API_PAGE = PACKAGE.parent / "docs" / "api.md"


def test_the_front_door_is_small_and_every_name_is_documented():
    """``refpos.__all__`` stays a front door (at most ``FRONT_DOOR_MOST`` names); docs/api.md describes each of
    its names and each name of every subpackage's ``__all__``, and every public subpackage has an ``__all__``
    whose names resolve."""
    import importlib

    import refpos

    assert len(refpos.__all__) <= FRONT_DOOR_MOST, f"{len(refpos.__all__)} front-door names: move some out"
    page = API_PAGE.read_text(encoding="utf8")
    undocumented = [f"refpos.{name}" for name in refpos.__all__ if f"`refpos.{name}`" not in page]
    for sub in refpos.SUBPACKAGES:
        package = importlib.import_module(f"refpos.{sub}")
        assert hasattr(package, "__all__"), f"refpos.{sub} has no __all__"
        for name in package.__all__:
            getattr(package, name)  # resolves
            if f"`{name}`" not in page:
                undocumented.append(f"refpos.{sub}.{name}")
    assert not undocumented, f"names of the public API that docs/api.md does not describe: {undocumented}"


def private_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` for every ``from refpos.x import _name``: a helper another module relies on has a
    public name in its own module."""
    tree = ast.parse(path.read_text(encoding="utf8"))
    return [(node.lineno, f"{node.module}.{alias.name}") for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(FRONT_DOOR)
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_imports_a_private_name_of_another(tmp_path):
    problems = [f"{path.relative_to(PACKAGE.parent)}:{line}: imports {name}"
                for path in package_modules().values() for line, name in private_imports(path)]
    assert not problems, "private names imported across modules:\n" + "\n".join(problems)
    planted = tmp_path / "planted.py"
    planted.write_text("from refpos.rope.core import _hidden, apply_rope\nfrom numpy import _core\n")
    assert private_imports(planted) == [(1, "refpos.rope.core._hidden")]


# ------------------------------------------------------------------------------- one record per thing that varies
#: the registry of scaling rules: the one package that may name a rope_type in a comparison
RULE_REGISTRY = "refpos.rope.rules"


def rule_type_matches(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, rope_type)`` of every comparison that matches a rule by its name: ``x == "yarn"``,
    ``kind in ("linear", "ntk")``. A name that is also a placement or a layout (``proportional``), or
    ``"default"``, counts only where the other side reads a ``rope_type``."""
    from refpos.pairs import LAYOUTS, PLACEMENTS
    from refpos.rope.rules import RULES, TYPE_ALIASES

    names = set(RULES) | set(TYPE_ALIASES)
    shared = set(PLACEMENTS) | set(LAYOUTS) | {"default"}
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        literals = [e.value for part in operands for e in ([part] if isinstance(part, ast.Constant) else
                                                           getattr(part, "elts", []))
                    if isinstance(e, ast.Constant) and e.value in names]
        reads_type = any("rope_type" in ast.unparse(part) for part in operands)
        hits += [(node.lineno, name) for name in literals if reads_type or name not in shared]
    return hits


def test_no_rule_type_is_string_matched_outside_the_registry():
    """A scaling rule is one record of refpos.rope.rules: code elsewhere asks the record (its keys, its factor
    rule, spans_head …) or holds the record itself, never compares a rope_type with a rule's name."""
    problems = [f"{path.relative_to(PACKAGE.parent)}:{line}: compares with the rule name {name!r}"
                for module, path in package_modules().items()
                if module != RULE_REGISTRY and not module.startswith(RULE_REGISTRY + ".")
                for line, name in rule_type_matches(ast.parse(path.read_text(encoding="utf8")))]
    assert not problems, "ask the rule's record (refpos.rope.rules.RULES) instead:\n" + "\n".join(problems)


def literal_constants(tree: ast.Module) -> list[tuple[int, str, str]]:
    """``(line, name, value)`` of the module-level UPPER_CASE names bound to a literal collection of two or more
    constants (a tuple, list, set or dict, or ``frozenset``/``MappingProxyType`` of one); sets compare unordered."""
    out = []
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("frozenset", "MappingProxyType") \
                and len(value.args) == 1:
            value = value.args[0]
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            continue
        if not isinstance(literal, (tuple, list, set, frozenset, dict)) or len(literal) < 2:
            continue
        key = repr(sorted(literal, key=repr) if isinstance(literal, (set, frozenset)) else (
            sorted(literal.items(), key=repr) if isinstance(literal, dict) else tuple(literal)))
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        out += [(node.lineno, t.id, key) for t in targets if isinstance(t, ast.Name) and t.id.strip("_").isupper()]
    return out


def test_no_constant_is_defined_twice():
    """Each convention (layouts, placements, dtypes, rope types, …) is stated once: no two modules bind the same
    literal collection, and no name is bound to a literal in two modules (others import or derive it)."""
    by_value: dict[str, list[str]] = {}
    by_name: dict[str, list[str]] = {}
    for _module, path in package_modules().items():
        for line, name, value in literal_constants(ast.parse(path.read_text(encoding="utf8"))):
            where = f"{path.relative_to(PACKAGE.parent)}:{line} {name}"
            by_value.setdefault(value, []).append(where)
            by_name.setdefault(name, []).append(where)
    twice = [places for places in (*by_value.values(), *by_name.values()) if len(places) > 1]
    assert not twice, "one home per constant:\n" + "\n".join(" = ".join(places) for places in twice)


def test_the_catalogue_and_the_mistake_definitions_agree():
    """Every RoPE / M-RoPE mistake refpos check names has one definition (refpos.check.rope.rope_mistakes), and every
    definition is a catalogued mistake of those families: the diagnosis matrix iterates the one, the other
    builds its cases."""
    from refpos.check.rope.rope_mistakes import ROPE_MISTAKES
    from refpos.check.shared import catalogue

    rotation = {m.id for m in catalogue.MISTAKES if m.family in ("rope", "mrope") and m.diagnosed}
    defined = set(ROPE_MISTAKES)
    assert defined <= {m.id for m in catalogue.MISTAKES if m.family in ("rope", "mrope")}, defined
    assert rotation == defined, f"catalogued only: {rotation - defined}; defined only: {defined - rotation}"


def test_the_one_record_rules_can_fail():
    """The three checks above catch what they are for: a rope_type compared with a name, a constant twice."""
    planted = ast.parse('if rope.rope_type == "yarn" or kind in ("linear", "ntk"):\n    pass\n'
                        'if placement == "proportional" or rope.rope_type == "proportional":\n    pass\n')
    assert rule_type_matches(planted) == [(1, "yarn"), (1, "linear"), (1, "ntk"), (3, "proportional")]
    twice = [value for _, _, value in literal_constants(ast.parse('A = ("x", "y")\nB = frozenset({"y", "x"})\n'))]
    assert twice[0] == repr(("x", "y")) and twice[1] == repr(["x", "y"])  # set: unordered, sorted
