"""No import circle among the service's modules: each package reads from the ones below it, and
within a package a module that needs another's names does not also give it its own. Every import
counts, those made only for type checking too (a circle there is still knowledge kept both ways)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest

import datasource
import engine
from tests.packages import LAYERS, PACKAGES

REPO = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project's modules it imports. `from package import module` is an import of
    the module, not of the package's `__init__`."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    targets.append(submodule if submodule in modules else node.module)
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == module:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _circles(_imports(_modules())) == []


def test_the_check_finds_a_circle() -> None:
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}
    assert _circles(graph) == [["a.x", "a.y", "a.z"]]


def _importing(graph: dict[str, set[str]], package: str, of: set[str]) -> dict[str, list[str]]:
    """Each module of `package` that imports a module of the packages `of`, with those."""
    found = {
        module: sorted(name for name in imported if name.split(".")[0] in of)
        for module, imported in graph.items()
        if module.split(".")[0] == package
    }
    return {module: names for module, names in found.items() if names}


def test_the_engine_imports_nothing_of_the_payments() -> None:
    """`engine` could be published on its own: what the service adds comes in as hooks."""
    payments = set(PACKAGES) - {"engine"}
    assert _importing(_imports(_modules()), "engine", payments) == {}


def test_the_boundary_check_finds_an_import_across_it() -> None:
    graph = {"engine.x": {"datasource.deadline", "engine.y"}, "engine.y": set()}
    assert _importing(graph, "engine", {"datasource"}) == {"engine.x": ["datasource.deadline"]}


def _upward(graph: dict[str, set[str]], layers: tuple[frozenset[str], ...]) -> dict[str, list[str]]:
    """Each module that imports a module of a package beside its own or above it, with those."""
    height = {package: level for level, layer in enumerate(layers) for package in layer}
    found = {
        module: sorted(
            name
            for name in imported
            if name.split(".")[0] != module.split(".")[0]
            and height[name.split(".")[0]] >= height[module.split(".")[0]]
        )
        for module, imported in graph.items()
    }
    return {module: names for module, names in found.items() if names}


def test_each_package_imports_only_the_layers_below_it() -> None:
    """`cli` starts the service and the jobs and prints the stack; `server` is the running
    service and knows nothing of them (the layers are drawn in tests/packages.py)."""
    assert _upward(_imports(_modules()), LAYERS) == {}


def test_the_layer_check_finds_an_import_up_or_across() -> None:
    layers = (frozenset({"low"}), frozenset({"mid", "side"}), frozenset({"top"}))
    graph = {
        "low.a": {"low.b"},
        "mid.a": {"low.a", "mid.b", "side.a"},
        "side.a": {"top.a"},
        "top.a": {"low.a", "mid.a", "side.a"},
    }
    assert _upward(graph, layers) == {"mid.a": ["side.a"], "side.a": ["top.a"]}


def _side_doors(sources: dict[str, str], package: str, front: list[str]) -> dict[str, list[str]]:
    """Each file that imports `package` other than from its front door (`from package import`
    of a name in `front`, its `__all__`), with the lines that do."""
    found: dict[str, list[str]] = {}
    for name, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                doors = [a.name for a in node.names if a.name.startswith(f"{package}.")]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith(f"{package}."):
                    doors = [node.module]
                elif node.module == package:
                    doors = [f"{package}.{a.name}" for a in node.names if a.name not in front]
                else:
                    continue
            else:
                continue
            found.setdefault(name, []).extend(f"line {node.lineno}: {door}" for door in doors)
    return {name: lines for name, lines in found.items() if lines}


def _outside(package: str) -> dict[str, str]:
    """The sources of every file but `package`'s own and its white-box tests (`tests/package/`)."""
    paths = [path for name in PACKAGES for path in (REPO / name).rglob("*.py")]
    paths += (REPO / "tests").rglob("*.py")
    return {
        str(path.relative_to(REPO)): path.read_text()
        for path in paths
        if path.relative_to(REPO).parts[0] != package
        and path.relative_to(REPO).parts[:2] != ("tests", package)
    }


@pytest.mark.parametrize("package", [engine, datasource], ids=lambda module: module.__name__)
def test_a_package_is_entered_only_by_its_front_door(package: ModuleType) -> None:
    """Outside `engine/` and `datasource/` and their own tests (the white-box ones), each is
    imported only from its package, and only the names of its `__all__`: what it keeps inside
    may change without a caller noticing."""
    name = package.__name__
    assert _side_doors(_outside(name), name, package.__all__) == {}


def test_the_door_check_finds_a_side_door() -> None:
    sources = {
        "server/a.py": "from engine.limits import QueryLimits\nfrom engine import Hooks\n",
        "bench/b.py": "import engine.operations\nfrom engine import _completion, Plan\n",
        "schema/c.py": "from engine import OperationRunner\nimport engine\n",
    }
    assert _side_doors(sources, "engine", engine.__all__) == {
        "server/a.py": ["line 1: engine.limits"],
        "bench/b.py": ["line 1: engine.operations", "line 2: engine._completion"],
    }


# The outside stores' client libraries, which only `datasource` may import (STYLE: it builds
# their clients and turns their errors into the domain's).
STORE_CLIENTS = {"redis", "aioboto3", "aiobotocore", "boto3", "botocore"}
# What runs the stores for the tests and the bench, not the service.
STORE_TOOLS = {"harness", "bench"}


def _store_imports(paths: dict[str, Path]) -> dict[str, list[str]]:
    """Each module that imports a store's client library, with those it imports."""
    found: dict[str, list[str]] = {}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            else:
                continue
            found.setdefault(name, []).extend(
                t for t in targets if t.split(".")[0] in STORE_CLIENTS
            )
    return {name: sorted(set(targets)) for name, targets in found.items() if targets}


def test_only_the_datasource_talks_to_the_stores() -> None:
    """Redis as DynamoDB: no module of the service outside `datasource` imports a store's client
    or catches its errors."""
    service = {
        name: path
        for name, path in _modules().items()
        if name.split(".")[0] not in STORE_TOOLS | {"datasource"}
    }
    assert _store_imports(service) == {}


def test_the_store_check_finds_an_import_of_a_client(tmp_path: Path) -> None:
    module = tmp_path / "live.py"
    module.write_text("from redis.exceptions import RedisError\nimport orjson\n")
    assert _store_imports({"server.live": module}) == {"server.live": ["redis.exceptions"]}
