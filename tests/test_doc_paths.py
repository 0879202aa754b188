"""Every file, folder and `python -m` module the Markdown pages (docs/ and the README) name exists:
a page that sends its reader to something gone is wrong however well it reads. The other way
round too: every page of docs/ (and heading) that the code names exists.

What counts as a repository path: a word of a code span or of a shell block, or a link's target,
that has a `/` and either starts with a top-level entry of the repository or ends in a file
suffix. URL paths (`/graphql`), URLs, placeholders (`<v>`), globs, MIME types, package names and
paths outside the repository (`../shared/…`) are not; nor is what an install or a build makes.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
# Made by an install, a build or a run: absent from a clone, so a page may name them.
GENERATED = {".venv", ".data", "build", "dist", "node_modules"}
TOP_LEVEL = {entry.name for entry in REPO.iterdir()} - GENERATED

FENCE = re.compile(r"^(```|~~~)(\w*)[^\n]*\n(.*?)^\1", re.MULTILINE | re.DOTALL)
SHELL = {"sh", "shell", "bash", "console"}
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:")
PATH = re.compile(r"[\w.-]+(/[\w.-]+)*/?")
FILE_SUFFIX = re.compile(r"\.[a-z]{1,5}$")
PYTHON_M = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
# `docs/live-updates.md#a-fleet` in a docstring, a comment or a message.
DOCS_PAGE = re.compile(r"\bdocs/([\w-]+\.md)(?:#([\w-]+))?")
HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)
CODE_SUFFIXES = {".py", ".mjs", ".js", ".sh", ".toml", ".yml", ".yaml"}


def _code_words(markdown: str) -> list[str]:
    """The words of the code spans in prose and of the shell blocks."""
    shell = [found[3] for found in FENCE.finditer(markdown) if found[2] in SHELL]
    spans = CODE_SPAN.findall(FENCE.sub("", markdown))
    return [word for text in [*spans, *shell] for word in text.split()]


def repo_paths(markdown: str) -> set[str]:
    """The repository paths a page's code names (relative to the repository's root)."""
    found = set()
    for word in _code_words(markdown):
        # `ARGS=tests/browser`, `"docs/api.md",`, `tests/x.py::test_y`
        word = word.strip("\"'(),;.").rpartition("=")[2].partition("::")[0].removeprefix("./")
        if "/" not in word or PATH.fullmatch(word) is None or word.startswith("../"):
            continue
        parts = word.rstrip("/").split("/")
        if GENERATED.isdisjoint(parts) and (
            parts[0] in TOP_LEVEL or FILE_SUFFIX.search(parts[-1]) is not None
        ):
            found.add(word)
    return found


def missing_paths(markdown: str) -> list[str]:
    return sorted(path for path in repo_paths(markdown) if not (REPO / path).exists())


def missing_links(page: Path, markdown: str) -> list[str]:
    """Link targets (relative to the page) that are no file or folder; anchors are mkdocs'."""
    targets = (link.partition("#")[0] for link in LINK.findall(markdown))
    local = [target for target in targets if target and SCHEME.match(target) is None]
    return sorted({target for target in local if not (page.parent / target).exists()})


def missing_modules(markdown: str) -> list[str]:
    """`python -m NAME` whose NAME would not run from the repository's root: a module of ours
    with no file (or a package with no `__main__`), or a name nothing installed provides."""
    missing = set()
    for name in PYTHON_M.findall(markdown):
        top = name.partition(".")[0]
        if (REPO / top).is_dir() or (REPO / f"{top}.py").is_file():
            module = REPO / name.replace(".", "/")
            runs = module.with_suffix(".py").is_file() or (module / "__main__.py").is_file()
        else:
            runs = importlib.util.find_spec(top) is not None
        if not runs:
            missing.add(name)
    return sorted(missing)


def heading_slug(heading: str) -> str:
    """Python-Markdown's toc slug: the anchor mkdocs gives a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def missing_doc_pages(text: str) -> list[str]:
    """The pages of docs/ (`docs/x.md`, `docs/x.md#heading`) a text names that do not exist."""
    missing = set()
    for page, anchor in DOCS_PAGE.findall(text):
        path = REPO / "docs" / page
        if not path.is_file():
            missing.add(f"docs/{page}")
        elif anchor:
            headings = HEADING.findall(path.read_text())
            if anchor not in {heading_slug(heading) for heading in headings}:
                missing.add(f"docs/{page}#{anchor}")
    return sorted(missing)


def _code_files() -> list[Path]:
    """The repository's own code, scripts and settings, outside docs/ and what an install makes."""
    found = [REPO / "Makefile"]
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [
            name
            for name in subfolders
            if name not in GENERATED and not name.startswith(".") and name != "__pycache__"
        ]
        subfolders[:] = [name for name in subfolders if Path(folder, name) != REPO / "docs"]
        found += [Path(folder, name) for name in files if Path(name).suffix in CODE_SUFFIXES]
    return found


def _pages_where(check: Callable[[Path], list[str]]) -> dict[str, list[str]]:
    found = {str(page.relative_to(REPO)): check(page) for page in PAGES}
    return {page: missing for page, missing in found.items() if missing}


def test_every_repository_path_a_page_names_exists() -> None:
    missing = _pages_where(lambda page: missing_paths(page.read_text()))
    assert missing == {}, f"pages naming files or folders that do not exist: {missing}"


def test_every_link_to_a_file_lands() -> None:
    missing = _pages_where(lambda page: missing_links(page, page.read_text()))
    assert missing == {}, f"links to files or folders that do not exist: {missing}"


def test_every_python_m_command_names_a_module_that_runs() -> None:
    missing = _pages_where(lambda page: missing_modules(page.read_text()))
    assert missing == {}, f"`python -m` of modules that do not exist: {missing}"


def test_every_docs_page_and_heading_the_code_names_exists() -> None:
    here = Path(__file__).resolve()  # its samples name gone pages on purpose
    found = {
        str(path.relative_to(REPO)): missing_doc_pages(path.read_text())
        for path in _code_files()
        if path != here
    }
    missing = {path: pages for path, pages in found.items() if pages}
    assert missing == {}, f"code naming pages or headings of docs/ that do not exist: {missing}"


def test_gone_files_and_modules_are_reported() -> None:
    page = (
        "`tests/datasource/test_responses.py` compares the parsers (`python -m bench.local_cpu "
        "payment` measures both), see `deploy/stack.yaml` and `server/app.py`.\n\n"
        "```sh\n.venv/bin/python -m bench.profile payment --local\ncat bench/gone.json\n```\n"
    )

    assert missing_paths(page) == [
        "bench/gone.json",
        "deploy/stack.yaml",
        "tests/datasource/test_responses.py",
    ]
    assert missing_modules(page) == ["bench.local_cpu"]


def test_gone_pages_and_headings_named_by_code_are_reported() -> None:
    text = (
        '"""How, and what was tested: docs/operations.md#a-fleet; the keys: '
        'docs/live-updates.md#a-fleet (docs/live-updates.md#a-flet, docs/alarms.md)."""'
    )

    assert missing_doc_pages(text) == ["docs/live-updates.md#a-flet", "docs/operations.md"]


def test_what_is_not_a_repository_path_is_left_alone() -> None:
    page = (
        "`/graphql` `/readyz` `LOC_METRICS=app` `application/json` `aws/dynamodb` "
        "`loc-payments/<v> botocore/<v>` `/graphiql-assets/<digest>/…` `@apollo/gateway` "
        "`https://example.com/a/b.json` `../shared/SPEC.md` `docs/*.md` `table 1/8` "
        "`tools/federation/node_modules/.bin/hive-gateway` `.venv/bin/pytest` `build/site` "
        '`python -m pytest -q`\n\n```graphql\nquery { a(path: "tests/none.py") }\n```\n'
    )

    assert missing_paths(page) == []
    assert missing_modules(page) == []
