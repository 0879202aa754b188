"""`loc-payments schema diff OLD NEW [--documents MANIFEST…]` and `loc-payments schema accept`
(`make schema`), the schema's evolution (SPEC §19, `schema.evolution`).

    diff    OLD and NEW are SDL files or `git:<rev>` (schema.graphql as committed at a revision);
            one line per change (`breaking`, `dangerous`, `safe`), then each trusted document of
            the manifests that NEW breaks. Exit 1 on a breaking change, 2 on bad input.
    accept  writes schema.graphql and schema.subgraph.graphql from the code, unless a breaking
            change of the public schema is refused (`schema.evolution.refusals`) against the
            committed schema.graphql and the committed manifests: then it prints each refusal
            and writes nothing (exit 1).

`history_refusals` applies the same rule to every commit of schema.graphql since the rule came
in, so a snapshot rewritten by hand fails the tests.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from graphql import GraphQLError, GraphQLSchema

from cli.errors import BadInput
from engine import read_manifest
from schema.evolution import (
    Document,
    RefusedChange,
    broken_documents,
    parse_sdl,
    refusals,
    schema_changes,
)

__all__ = [
    "FORMER_MANIFESTS",
    "MANIFESTS",
    "RULE_FILE",
    "SNAPSHOT",
    "SUBGRAPH_SNAPSHOT",
    "accept",
    "add_arguments",
    "committed_documents",
    "history_refusals",
    "run_schema",
]

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = "schema.graphql"
SUBGRAPH_SNAPSHOT = "schema.subgraph.graphql"
# The committed manifests; a commit made before they moved under tools/ (issue 60) kept them
# in FORMER_MANIFESTS, where the history check reads them.
MANIFESTS = "tools/trusted-documents/manifests"
FORMER_MANIFESTS = "trusted-documents/manifests"
# The file whose first commit brought the rule in: commits before it are not held to it.
RULE_FILE = "schema/evolution.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    diff = actions.add_parser(
        "diff",
        help="classify the changes from OLD to NEW (SDL files or git:<rev>)",
        description=(
            "Prints each change from OLD to NEW as breaking, dangerous or safe (graphql-core's "
            "classification), and with --documents each trusted document NEW breaks. Exit "
            "status 1 on a breaking change, 2 on bad input."
        ),
    )
    diff.add_argument("old", metavar="OLD")
    diff.add_argument("new", metavar="NEW")
    diff.add_argument("--documents", nargs="+", type=Path, default=[], metavar="MANIFEST")
    actions.add_parser(
        "accept",
        help="write the snapshots from the code, refusing a breaking change (make schema)",
    )


def run_schema(arguments: argparse.Namespace, out: TextIO) -> int:
    try:
        if arguments.action == "diff":
            return _diff(arguments.old, arguments.new, arguments.documents, out)
        return accept(REPO, out)
    except BadInput as error:
        print(f"loc-payments schema: {error}", file=out)
        return 2


def _diff(old: str, new: str, manifests: Sequence[Path], out: TextIO) -> int:
    old_schema, new_schema = _schema(old), _schema(new)
    documents = _documents(manifests)
    changes = schema_changes(old_schema, new_schema)
    for change in changes:
        print(change, file=out)
    if not changes:
        print("no changes", file=out)
    for document, error in broken_documents(new_schema, documents):
        print(f"breaks    {document.label}: {error.message}", file=out)
    return 1 if any(change.level == "breaking" for change in changes) else 0


def accept(repo: Path, out: TextIO) -> int:
    """Write the snapshots from the code, or print what is refused (exit 1)."""
    from schema import build_schema  # the GraphQL stack, only for this action

    public, subgraph = build_schema(), build_schema(subgraph=True)
    new_sdl = public.as_str() + "\n"
    committed = _git_show(repo, "HEAD", SNAPSHOT) or (repo / SNAPSHOT).read_text()
    refused = refusals(
        _parsed(committed, f"HEAD:{SNAPSHOT}"),
        public.served,
        committed_documents(repo, "HEAD"),
    )
    if refused:
        for refusal in refused:
            print(refusal, file=out)
        print(
            "nothing written: deprecate first (@deprecated with a reason naming the "
            "replacement), wait until no client uses it, then remove it",
            file=out,
        )
        return 1
    for change in schema_changes(_parsed(committed, SNAPSHOT), public.served):
        print(change, file=out)
    for path, text in ((SNAPSHOT, new_sdl), (SUBGRAPH_SNAPSHOT, subgraph.as_str() + "\n")):
        unchanged = (repo / path).exists() and (repo / path).read_text() == text
        (repo / path).write_text(text)
        print(f"{'unchanged' if unchanged else 'wrote    '} {path}", file=out)
    return 0


def history_refusals(repo: Path) -> list[tuple[str, RefusedChange]]:
    """Every refused change a commit of schema.graphql made since the rule came in."""
    introduced = _git(repo, "log", "--diff-filter=A", "--format=%H", "--", RULE_FILE).split()
    if not introduced:
        return []
    since = introduced[-1]
    found = []
    for commit in _git(repo, "log", "--format=%H", "HEAD", "--", SNAPSHOT).split():
        if not _is_ancestor(repo, since, commit):
            continue  # made before the rule
        before = _git_show(repo, f"{commit}^", SNAPSHOT)
        after = _git_show(repo, commit, SNAPSHOT)
        if before is None or after is None:
            continue
        old = _parsed(before, f"{commit}^:{SNAPSHOT}")
        new = _parsed(after, f"{commit}:{SNAPSHOT}")
        for refusal in refusals(old, new, committed_documents(repo, f"{commit}^")):
            found.append((commit, refusal))
    return found


def _schema(where: str) -> GraphQLSchema:
    if where.startswith("git:"):
        revision = where.removeprefix("git:")
        text = _git_show(REPO, revision, SNAPSHOT)
        if text is None:
            raise BadInput(f"{where}: no revision {revision!r} with a {SNAPSHOT}")
        return _parsed(text, where)
    try:
        return _parsed(Path(where).read_text(), where)
    except OSError as error:
        raise BadInput(f"{where}: cannot be read ({error.strerror})") from None


def _parsed(text: str, where: str) -> GraphQLSchema:
    try:
        return parse_sdl(text)
    except (GraphQLError, TypeError) as error:
        first = str(error).splitlines()[0]
        raise BadInput(f"{where}: not a GraphQL schema in SDL ({first})") from None


def _documents(manifests: Sequence[Path]) -> list[Document]:
    documents = []
    for path in manifests:
        found, problems = read_manifest(path)
        if problems:
            raise BadInput(f"{problems[0]}")
        documents += [Document(d.source, d.id, d.name, d.text) for d in found]
    return documents


def committed_documents(repo: Path, revision: str) -> list[Document]:
    """The documents of the manifests committed at `revision`."""
    for manifests in (MANIFESTS, FORMER_MANIFESTS):
        listed = _git(repo, "ls-tree", "--name-only", f"{revision}:{manifests}").split()
        if listed:
            break
    documents = []
    with tempfile.TemporaryDirectory() as folder:
        for name in listed:
            text = _git_show(repo, revision, f"{manifests}/{name}")
            if text is None or not name.endswith(".json"):
                continue
            copy = Path(folder) / name
            copy.write_text(text)
            found, _problems = read_manifest(copy)
            source = f"{manifests}/{name}"
            documents += [Document(source, d.id, d.name, d.text) for d in found]
    return documents


def _git(repo: Path, *arguments: str) -> str:
    run = subprocess.run(
        ["git", "-C", str(repo), *arguments], capture_output=True, text=True, check=False
    )
    return run.stdout if run.returncode == 0 else ""


def _is_ancestor(repo: Path, ancestor: str, commit: str) -> bool:
    run = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", ancestor, commit],
        capture_output=True,
        check=False,
    )
    return run.returncode == 0


def _git_show(repo: Path, revision: str, path: str) -> str | None:
    run = subprocess.run(
        ["git", "-C", str(repo), "show", f"{revision}:{path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return run.stdout if run.returncode == 0 else None
