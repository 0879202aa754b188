"""Private names of libraries only in their adapters: `engine/strawberry_adapter.py` (Strawberry,
and graphql-core's schema behind it) and `datasource/aiobotocore_adapter.py` (aiobotocore and
botocore), each of which refuses at start a release it was not tested with. Everywhere else in
the service, the bench and the harness, an attribute whose name starts with one underscore is
read only on `self` or `cls` (the code's own), and nothing is imported from a library's private
module or under a private name."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = {"engine/strawberry_adapter.py", "datasource/aiobotocore_adapter.py"}
LIBRARIES = {"graphql", "strawberry", "botocore", "aiobotocore", "aioboto3"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names(source: str) -> list[str]:
    """What `source` reads or imports under a private name that is not its own."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            parts = node.module.split(".")
            if parts[0] in LIBRARIES and (
                any(_private(part) for part in parts)
                or any(_private(alias.name) for alias in node.names)
            ):
                found.append(f"line {node.lineno}: from {node.module} import …")
    return found


def test_no_module_but_the_adapters_reads_a_private_name() -> None:
    offenders = {
        relative: found
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (relative := str(path.relative_to(ROOT))) not in ADAPTERS
        and (found := private_names(path.read_text()))
    }

    assert offenders == {}


def test_the_check_sees_each_kind_of_private_name() -> None:
    source = """
from strawberry.types._private import thing
from botocore.client import _hidden
schema._schema
getattr(client, "_endpoint", None)
self._own
cls._own
value.__class__
"""
    assert private_names(source) == [
        "line 2: from strawberry.types._private import …",
        "line 3: from botocore.client import …",
        "line 4: schema._schema",
        "line 5: getattr(client, '_endpoint', None)",
    ]
