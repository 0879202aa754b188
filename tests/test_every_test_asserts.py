"""Every test asserts something (issue 65, item 5): a test that checks nothing passes whatever the
code does. A test function counts as asserting when it holds an `assert`, a `pytest.raises`
(`warns`, `fail`), a `raise AssertionError`, or a call to a helper of tests/ or harness/ that
does (by the helper's name, through helpers that call helpers). A method call counts only when
no function of the service's packages has its name: `store.ping()` is the store's, not a
helper's."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
HELPERS = ("tests", "harness")
_PYTEST_CHECKS = frozenset({"raises", "warns", "fail", "deprecated_call"})
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _checks_itself(function: Function) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "AssertionError":
                return True
        if isinstance(node, ast.Call):
            called = node.func
            if (
                isinstance(called, ast.Attribute)
                and isinstance(called.value, ast.Name)
                and called.value.id == "pytest"
                and called.attr in _PYTEST_CHECKS
            ):
                return True
    return False


def _calls(function: Function, service_names: frozenset[str]) -> set[str]:
    """The names `function` calls: a plain name, or a method no function of the service has."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            called = node.func
            if isinstance(called, ast.Name):
                names.add(called.id)
            elif isinstance(called, ast.Attribute) and called.attr not in service_names:
                names.add(called.attr)
    return names


def _functions(trees: Iterable[ast.Module]) -> Iterable[Function]:
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield node


def assertion_free_tests(
    tests: dict[str, ast.Module], helpers: Iterable[ast.Module], service_names: frozenset[str]
) -> list[str]:
    """`path:line: name` of each test function in `tests` (by path) that asserts nothing."""
    by_name: dict[str, list[Function]] = {}
    for function in _functions(helpers):
        if not function.name.startswith("test"):
            by_name.setdefault(function.name, []).append(function)
    asserting = {name for name, found in by_name.items() if any(map(_checks_itself, found))}
    grown = True
    while grown:
        grown = False
        for name, found in by_name.items():
            if name not in asserting and any(
                _calls(function, service_names) & asserting for function in found
            ):
                asserting.add(name)
                grown = True
    return [
        f"{path}:{function.lineno}: {function.name}"
        for path, tree in tests.items()
        for function in _functions([tree])
        if function.name.startswith("test")
        and not _checks_itself(function)
        and not _calls(function, service_names) & asserting
    ]


def _service_names() -> frozenset[str]:
    return frozenset(
        function.name
        for package in PACKAGES
        if package not in HELPERS
        for function in _functions(
            ast.parse(path.read_text()) for path in (ROOT / package).rglob("*.py")
        )
    )


def test_every_test_asserts_something() -> None:
    trees = {
        str(path.relative_to(ROOT)): ast.parse(path.read_text())
        for folder in HELPERS
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    tests = {path: tree for path, tree in trees.items() if Path(path).name.startswith("test_")}

    assert assertion_free_tests(tests, trees.values(), _service_names()) == []


def test_the_check_sees_a_test_that_asserts_nothing_and_helpers_that_assert() -> None:
    helpers = ast.parse("""
def checked(answer):
    assert answer
async def until_checked(get):
    checked(await get())
class Subscription:
    async def wait_for(self, count):
        if len(self.events) < count:
            raise AssertionError(count)
""")
    tests = ast.parse("""
async def test_nothing(store):
    await store.ping()
async def test_asserts(store):
    assert await store.ping() is None
async def test_raises(store):
    with pytest.raises(Exception):
        await store.ping()
async def test_through_helpers(store):
    await until_checked(store.get)
async def test_a_helpers_method(subscription):
    await subscription.wait_for(2)
async def test_a_service_method_of_a_helpers_name(store):
    store.checked()
def helper_not_a_test():
    pass
""")

    found = assertion_free_tests({"t.py": tests}, [helpers, tests], frozenset({"checked"}))

    assert found == ["t.py:2: test_nothing", "t.py:13: test_a_service_method_of_a_helpers_name"]
