"""`loc-payments documents check FILE…`: a front-end's CI checks its manifests as the service
would load them (`LOC_TRUSTED_DOCUMENTS`), against this schema and the query limits of the
settings, without starting anything. One line per document, and per problem of a file as a
whole; exit status 1 on any problem."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from process.settings import Settings

__all__ = ["add_arguments", "run_documents"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    check = actions.add_parser(
        "check",
        help="check manifests of trusted documents against the schema",
        description=(
            "Reads each manifest (Apollo's persisted query manifest, Relay's "
            "persisted_queries.json, GraphQL Code Generator's persisted-documents.json) and "
            "checks every document: its id is its text's hash (where it is a hash), it parses, "
            "validates and keeps within the query limits. Exit status 1 on any problem."
        ),
    )
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")


def run_documents(settings: Settings, arguments: argparse.Namespace, out: TextIO) -> int:
    # Imported here: the other commands start without the GraphQL stack.
    from engine import load_trusted_documents
    from schema import build_schema
    from server.app import query_limits

    schema = build_schema(query_limits(settings), production=settings.production)
    _trusted, checked, problems = load_trusted_documents(arguments.files, schema.prepare_trusted)
    for document, reasons in checked:
        where = f"{document.source}: {document.id}"
        named = f" ({document.name})" if document.name else ""
        if reasons:
            for reason in reasons:
                print(f"FAIL {where}{named}: {reason}", file=out)
        else:
            print(f"ok   {where}{named}", file=out)
    for problem in problems:
        if problem.entry is None or not any(
            document.source == problem.source and document.id == problem.entry
            for document, _reasons in checked
        ):
            print(f"FAIL {problem}", file=out)
    return 1 if problems else 0
