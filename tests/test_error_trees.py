"""Every public exception class of the repository's packages lives in its package's `errors.py`,
whose docstring draws the tree of them all (as httpx's `_exceptions.py` does): one file to read
to know what a package can raise. Private control-flow classes (`_`-named) stay where they are
used, and so do the bench's fakes of a library's own exceptions."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
# The bench's fake DynamoDB raises what botocore would, under botocore's name.
FAKES = {"bench.fake_dynamodb.ResourceNotFoundException"}


def _modules() -> list[str]:
    return [
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name == "__init__.py" or not path.name.startswith("_")
    ]


def _exceptions(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    return [
        name
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == module_name
        and not name.startswith("_")
    ]


def outside_error_trees(modules: list[str]) -> list[str]:
    """Each public exception class defined in a module that is not an `errors` module."""
    return sorted(
        f"{module}.{name}"
        for module in modules
        if module.rsplit(".", 1)[-1] != "errors"
        for name in _exceptions(module)
        if f"{module}.{name}" not in FAKES
    )


def test_every_public_exception_is_in_an_errors_module() -> None:
    assert outside_error_trees(_modules()) == []


def test_each_errors_module_draws_every_class_it_holds() -> None:
    undrawn = {
        module: [name for name in _exceptions(module) if name not in (doc or "")]
        for module in _modules()
        if module.rsplit(".", 1)[-1] == "errors"
        for doc in [importlib.import_module(module).__doc__]
    }
    assert {module: names for module, names in undrawn.items() if names} == {}


def test_the_check_finds_an_exception_outside_a_tree() -> None:
    assert outside_error_trees(["tests.test_error_trees", "jobs.errors"]) == []
    assert outside_error_trees(["bench.local_pass", "bench.fake_dynamodb"]) == []
    assert outside_error_trees(["email.errors", "json.decoder"]) == ["json.decoder.JSONDecodeError"]
