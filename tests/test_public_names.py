"""Each public module of the repository's packages (a file whose name does not start with `_`,
and each package's `__init__.py`) says what it offers others in `__all__`, and whatever the
repository takes from one, by `from package.module import name` or by reading `module.name`, is in
that list or a submodule: what a module keeps for itself is visible at its top. The tests are held
to it too, since a name a test takes is one the module offers, with two exceptions: a `_`-named
helper a test reads on purpose, and `tests/engine/`, the white-box tests of the engine's
internals."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
WHITE_BOX = ROOT / "tests" / "engine"


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _public_modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if not path.name.startswith("_") or path.name == "__init__.py"
    }


def declared(source: str) -> list[str] | None:
    """The names of a module's `__all__`, or None when it declares none (or not as a literal)."""
    for node in ast.parse(source).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(
            value, ast.List | ast.Tuple
        ):
            names = [e.value for e in value.elts if isinstance(e, ast.Constant)]
            if len(names) == len(value.elts):
                return [name for name in names if isinstance(name, str)]
    return None


def undeclared_names(
    source: str, offered: dict[str, list[str] | None], submodules: set[str]
) -> list[str]:
    """What `source` takes from a public module without the module's `__all__` naming it: a
    `from module import name`, or `module.name` read on a module it imported (`import a.b`,
    `import a.b as m`, `from a import b`). A private name read that way is left to the
    private-names test, which holds the packages to their own; a test may reach one."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}
    found: list[tuple[int, str]] = []

    def undeclared(module: str, name: str) -> bool:
        return name not in (offered[module] or []) and f"{module}.{name}" not in submodules

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in offered:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif node.module in offered and undeclared(node.module, alias.name):
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in offered:
                    bound[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not node.attr.startswith("_"):
            read = ast.unparse(node.value)
            module = bound.get(read) if isinstance(node.value, ast.Name) else read
            if module in offered and read in bound and undeclared(module, node.attr):
                found.append((node.lineno, f"{read}.{node.attr}"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_every_public_module_declares_all() -> None:
    missing = [
        name for name, path in _public_modules().items() if declared(path.read_text()) is None
    ]

    assert missing == []


def test_what_is_taken_from_a_public_module_is_what_it_declares() -> None:
    modules = _public_modules()
    offered = {name: declared(path.read_text()) for name, path in modules.items()}
    submodules = {
        _module_name(path) for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }
    importers = [
        path
        for folder in (*PACKAGES, "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not path.is_relative_to(WHITE_BOX)
    ]
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in importers
        if (found := undeclared_names(path.read_text(), offered, submodules))
    }

    assert offenders == {}


def test_the_check_sees_each_way_of_taking_an_undeclared_name() -> None:
    offered = {"pkg.mod": declared('__all__ = ["shown"]\nshown = 1\nhidden = 2\n')}
    source = """
from pkg.mod import shown
from pkg.mod import hidden
from pkg import mod
import pkg.mod
import pkg.mod as other
from elsewhere.mod import anything
mod.shown, mod.hidden, mod._own
pkg.mod.hidden
other.hidden
"""
    assert undeclared_names(source, offered, {"pkg.mod"}) == [
        "line 3: from pkg.mod import hidden",
        "line 8: mod.hidden",
        "line 9: pkg.mod.hidden",
        "line 10: other.hidden",
    ]
    assert declared("x = 1\n") is None
