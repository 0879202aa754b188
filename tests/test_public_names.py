"""Each public module of the repository's packages (a file whose name does not start with `_`)
says what it offers others in `__all__`, and every `from package.module import name` in the
repository, the tests' included, names something in that list or a submodule: what a module
keeps for itself is visible at its top. The tests are held to it too, because a name a test
imports is one the module offers; the exception is `tests/engine/`, whose white-box tests of the
engine's own internals the import test already allows."""

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
        if not path.name.startswith("_")
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


def undeclared_imports(
    source: str, offered: dict[str, list[str] | None], submodules: set[str]
) -> list[str]:
    """`from module import name` lines of `source` whose name is not in the module's `__all__`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in offered:
            names = offered[node.module] or []
            for alias in node.names:
                if alias.name not in names and f"{node.module}.{alias.name}" not in submodules:
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
    return found


def test_every_public_module_declares_all() -> None:
    missing = [
        name for name, path in _public_modules().items() if declared(path.read_text()) is None
    ]

    assert missing == []


def test_every_import_from_a_public_module_names_what_it_declares() -> None:
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
        if (found := undeclared_imports(path.read_text(), offered, submodules))
    }

    assert offenders == {}


def test_the_check_sees_an_import_of_an_undeclared_name() -> None:
    offered = {"pkg.mod": declared('__all__ = ["shown"]\nshown = 1\nhidden = 2\n')}
    source = """
from pkg.mod import shown
from pkg.mod import hidden
from pkg import mod
from other.mod import anything
"""
    assert undeclared_imports(source, offered, {"pkg.mod"}) == [
        "line 3: from pkg.mod import hidden"
    ]
    assert declared("x = 1\n") is None
