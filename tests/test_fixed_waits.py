"""No test waits on the clock (issue 65): a sleep of a fixed length is a guess at how long
something takes, wasted on a quiet machine and too short on a loaded one. A test waits for the
event instead: `tests.eventually`, a sentinel written after what must not arrive, or the
product's clock or interval injected.

A fixed wait here: a sleep (`time.sleep`, `asyncio.sleep`, `anyio.sleep`, Playwright's
`wait_for_timeout`, ...) in a file under tests/ or harness/ whose length is a constant expression
(literals; names bound once to one, at the module's top, in the function, as a parameter's
default or imported from another file of the repository; a keyword of a constant's constructor,
as `POLICY.refresh_interval`; sums and products of them) of `LEAST` seconds or more, and that no
loop re-checking something holds (a `while` with a condition, or a loop that can `break` or
`return`)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("tests", "harness")
LEAST = 0.1  # seconds
# The calls that sleep, and the seconds in a unit of their argument.
SLEEPS = {"sleep": 1.0, "wait_for_timeout": 0.001}
_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_LOOPS = (ast.While, ast.For, ast.AsyncFor)
Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


class Module:
    """One file's names bound at its top: to an expression, to another module's name, or to a
    module."""

    def __init__(self, name: str, source: str, modules: Modules) -> None:
        self.name = name
        self.tree = ast.parse(source)
        self.modules = modules
        self.bound: dict[str, ast.expr] = {}
        self.imported: dict[str, tuple[str, str]] = {}
        self.module_aliases: dict[str, str] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    self.bound[target.id] = node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                if isinstance(node.target, ast.Name):
                    self.bound[node.target.id] = node.value
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    local = alias.asname or alias.name
                    if modules.has(f"{node.module}.{alias.name}"):
                        self.module_aliases[local] = f"{node.module}.{alias.name}"
                    else:
                        self.imported[local] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self.module_aliases[alias.asname or alias.name] = alias.name

    def value(self, name: str, seen: frozenset[tuple[str, str]]) -> float | str | None:
        """The constant `name` is bound to at this module's top, if it is one."""
        key = (self.name, name)
        if key in seen:
            return None
        seen |= {key}
        if name in self.bound:
            return Evaluator(self, None).value(self.bound[name], seen)
        if name in self.imported:
            module, original = self.imported[name]
            other = self.modules.get(module)
            return None if other is None else other.value(original, seen)
        return None


class Modules:
    """The repository's modules by dotted name, parsed once; `sources` stands in for the files
    (the check's own test)."""

    def __init__(self, sources: dict[str, str] | None = None) -> None:
        self._sources = sources
        self._parsed: dict[str, Module | None] = {}

    def _source(self, name: str) -> str | None:
        if self._sources is not None:
            return self._sources.get(name)
        base = ROOT.joinpath(*name.split("."))
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path.read_text()
        return None

    def has(self, name: str) -> bool:
        return self._source(name) is not None

    def get(self, name: str) -> Module | None:
        if name not in self._parsed:
            source = self._source(name)
            self._parsed[name] = None if source is None else Module(name, source, self)
        return self._parsed[name]


class Evaluator:
    """A constant expression's value in a module, within a function (its parameters' defaults
    and the names it binds once) or at the module's top; None when it is not constant."""

    def __init__(self, module: Module, scopes: list[Scope] | None) -> None:
        self.module = module
        self.scopes = scopes or []

    def value(
        self, node: ast.expr, seen: frozenset[tuple[str, str]] = frozenset()
    ) -> float | str | None:
        if isinstance(node, ast.Constant):
            constant = node.value
            if isinstance(constant, bool):
                return None
            return constant if isinstance(constant, int | float | str) else None
        if isinstance(node, ast.Name):
            return self._name(node.id, seen)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, seen)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = self.value(node.left, seen), self.value(node.right, seen)
            if isinstance(left, int | float) and isinstance(right, int | float):
                try:
                    return _OPERATORS[type(node.op)](left, right)
                except ZeroDivisionError:
                    return None
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.value(node.operand, seen)
            if isinstance(operand, int | float):
                return -operand if isinstance(node.op, ast.USub) else operand
            return None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("float", "int")
            and len(node.args) == 1
            and not node.keywords
        ):
            argument = self.value(node.args[0], seen)
            try:
                return None if argument is None else float(argument)
            except ValueError:
                return None
        return None

    def _name(self, name: str, seen: frozenset[tuple[str, str]]) -> float | str | None:
        for depth in range(len(self.scopes) - 1, -1, -1):
            scope = self.scopes[depth]
            outer = Evaluator(self.module, self.scopes[:depth])
            default = _parameter_default(scope, name)
            if default is not None:
                return outer.value(default, seen)
            if _is_parameter(scope, name):
                return None
            assigned = _assigned_once(scope, name)
            if assigned is not None:
                key = (f"{self.module.name}:{id(scope)}", name)
                if key in seen:
                    return None
                return Evaluator(self.module, self.scopes[: depth + 1]).value(
                    assigned, seen | {key}
                )
            if _binds(scope, name):
                return None
        return self.module.value(name, seen)

    def _attribute(
        self, node: ast.Attribute, seen: frozenset[tuple[str, str]]
    ) -> float | str | None:
        owner = node.value
        if not isinstance(owner, ast.Name):
            return None
        if any(_binds(scope, owner.id) for scope in self.scopes):
            return None
        module_name = self.module.module_aliases.get(owner.id)
        if module_name is not None:
            other = self.module.modules.get(module_name)
            return None if other is None else other.value(node.attr, seen)
        # A constant built by a call at the top: `POLICY = Policy(interval=0.2)`.
        built = self.module.bound.get(owner.id)
        if isinstance(built, ast.Call):
            for keyword in built.keywords:
                if keyword.arg == node.attr:
                    return Evaluator(self.module, None).value(keyword.value, seen)
        return None


def _arguments(scope: Scope) -> list[ast.arg]:
    arguments = scope.args
    return [
        *arguments.posonlyargs,
        *arguments.args,
        *arguments.kwonlyargs,
        *([arguments.vararg] if arguments.vararg else []),
        *([arguments.kwarg] if arguments.kwarg else []),
    ]


def _is_parameter(scope: Scope, name: str) -> bool:
    return any(argument.arg == name for argument in _arguments(scope))


def _parameter_default(scope: Scope, name: str) -> ast.expr | None:
    arguments = scope.args
    positional = [*arguments.posonlyargs, *arguments.args]
    for argument, default in zip(
        positional[len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True
    ):
        if argument.arg == name:
            return default
    for argument, maybe in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if argument.arg == name:
            return maybe
    return None


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `scope`'s body, not those of the functions defined in it."""
    for child in ast.iter_child_nodes(scope):
        if isinstance(child, _FUNCTIONS):
            continue
        yield child
        yield from _own_nodes(child)


def _bindings(scope: Scope, name: str) -> list[ast.AST]:
    found: list[ast.AST] = []
    for node in _own_nodes(scope):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            found.append(node)
    return found


def _binds(scope: Scope, name: str) -> bool:
    return _is_parameter(scope, name) or bool(_bindings(scope, name))


def _assigned_once(scope: Scope, name: str) -> ast.expr | None:
    """The expression `name` is bound to, when `scope` binds it once, by a plain assignment."""
    if len(_bindings(scope, name)) != 1:
        return None
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node.value
    return None


def _sleep_length(call: ast.Call) -> tuple[ast.expr, float] | None:
    """The argument of a call that sleeps, and the seconds in a unit of it."""
    func = call.func
    name = (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else ""
    )
    if name not in SLEEPS:
        return None
    if call.args:
        return call.args[0], SLEEPS[name]
    for keyword in call.keywords:
        if keyword.arg in ("delay", "seconds", "secs", "timeout"):
            return keyword.value, SLEEPS[name]
    return None


def _rechecks(loop: ast.While | ast.For | ast.AsyncFor) -> bool:
    """Whether `loop` asks something again each time round: a `while` with a condition, or a
    body that can leave it (a `break` of its own, a `return`)."""
    if isinstance(loop, ast.While) and not (
        isinstance(loop.test, ast.Constant) and loop.test.value
    ):
        return True
    return _leaves(loop.body, in_inner_loop=False)


def _leaves(nodes: list[ast.stmt] | list[ast.AST], *, in_inner_loop: bool) -> bool:
    for node in nodes:
        if isinstance(node, _FUNCTIONS):
            continue
        if isinstance(node, ast.Return) or (isinstance(node, ast.Break) and not in_inner_loop):
            return True
        inner = in_inner_loop or isinstance(node, _LOOPS)
        if _leaves(list(ast.iter_child_nodes(node)), in_inner_loop=inner):
            return True
    return False


def fixed_waits(path: str, module: Module) -> list[str]:
    """Each fixed wait of `module` (see the module), as `path:line: the call`."""
    found: list[str] = []

    def visit(
        node: ast.AST, scopes: list[Scope], loops: list[ast.While | ast.For | ast.AsyncFor]
    ) -> None:
        if isinstance(node, ast.Call):
            sleep = _sleep_length(node)
            if sleep is not None:
                argument, unit = sleep
                seconds = Evaluator(module, scopes).value(argument)
                if (
                    isinstance(seconds, int | float)
                    and seconds * unit >= LEAST
                    and not any(_rechecks(loop) for loop in loops)
                ):
                    found.append(
                        f"{path}:{node.lineno}: {ast.unparse(node)} ({seconds * unit:g} s)"
                    )
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FUNCTIONS):
                visit(child, [*scopes, child], [])
            elif isinstance(child, _LOOPS):
                visit(child, scopes, [*loops, child])
            else:
                visit(child, scopes, loops)

    visit(module.tree, [], [])
    return found


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_no_test_or_harness_sleeps_a_fixed_time() -> None:
    modules = Modules()
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = modules.get(_module_name(path))
            assert module is not None, path
            found += fixed_waits(str(path.relative_to(ROOT)), module)

    assert found == [], "wait for the event, not the clock (tests.eventually):\n" + "\n".join(found)


def test_the_check_names_each_kind_of_fixed_wait_and_leaves_a_wait_for_an_event() -> None:
    modules = Modules(
        {
            "pkg.timing": "SETTLE = 0.25\n",
            "pkg.test_it": """
import asyncio
import time
from pkg import timing
from pkg.timing import SETTLE
POLL = 0.05
POLICY = Policy(refresh_interval=0.2, timeout=0.5)
async def test_fixed(page, done, delay):
    await asyncio.sleep(0.5)
    time.sleep(2)
    await asyncio.sleep(SETTLE)
    await asyncio.sleep(timing.SETTLE * 2)
    await asyncio.sleep(2 * POLL + 0.1)
    await asyncio.sleep(POLICY.refresh_interval)
    await page.wait_for_timeout(1000)
    for _ in range(3):
        await asyncio.sleep(1)
    pause = 3 * POLL
    await asyncio.sleep(pause)
    await asyncio.sleep(float("0.5"))
async def helper(settle: float = 0.5):
    await asyncio.sleep(settle)
async def test_waits_for_events(page, done, delay):
    await asyncio.sleep(0.05)
    await asyncio.sleep(POLL)
    await page.wait_for_timeout(50)
    await asyncio.sleep(delay)
    await asyncio.sleep(0)
    while not done():
        await asyncio.sleep(0.5)
    while True:
        if done():
            break
        await asyncio.sleep(1)
    for _ in range(10):
        if done():
            return
        await asyncio.sleep(SETTLE)
""",
        }
    )
    module = modules.get("pkg.test_it")
    assert module is not None

    found = [line.split(": ", 1)[0] for line in fixed_waits("test_it.py", module)]

    assert found == [f"test_it.py:{line}" for line in (9, 10, 11, 12, 13, 14, 15, 17, 19, 20, 22)]
