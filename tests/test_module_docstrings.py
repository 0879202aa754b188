"""A module's docstring states its contract (STYLE: what it offers and promises its callers); the
explanation, the rationale and the history are on the docs site, where the docstring points."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.packages import LAYERS

REPO = Path(__file__).resolve().parents[1]

# The service's own packages: every layer up to the command line (the tests' shared tools and the
# bench sit above it).
_CLI = LAYERS.index(frozenset({"cli"}))
PRODUCT = sorted(package for layer in LAYERS[: _CLI + 1] for package in layer)

# Enough for a contract, or the key schema's table of every key; an essay is longer.
MOST_LINES = 15


def _docstring_lines(path: Path) -> int:
    docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    return 0 if docstring is None else len(docstring.splitlines())


def test_no_module_docstring_of_the_service_is_an_essay() -> None:
    modules = [path for package in PRODUCT for path in sorted((REPO / package).rglob("*.py"))]
    assert modules
    long = {
        str(path.relative_to(REPO)): lines
        for path in modules
        if (lines := _docstring_lines(path)) > MOST_LINES
    }
    assert long == {}, (
        f"module docstrings over {MOST_LINES} lines (keep the contract, move the rest to docs/ "
        f"and point to the section): {long}"
    )
