"""Trusted documents (SPEC §14): the front-ends' operations, read from the manifests their
builds emit, each checked against the schema once, at start.

It reads Apollo's persisted query manifest, Relay's persisted queries and GraphQL Code
Generator's persisted documents. An id of 32, 40 or 64 hex digits, or `sha256:<hex>`, is a hash
and must be its text's; any other id is a custom one, taken as it is. A request names a document
by its manifest's id or by `sha256:<hex>` of its text (`engine.document_policy`). A manifest that
cannot be read, an id not its text's hash, an id given to two texts, a document that does not
validate or costs more than the limits allow: each is a `Problem` naming the file and the entry,
and the service does not start with any.

Each format, and how a front end makes its manifest: docs/protocols.md#trusted-documents.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson
from graphql import GraphQLError

from engine.errors import Problem

__all__ = [
    "APOLLO_FORMAT",
    "SHA256_PREFIX",
    "TrustedDocument",
    "TrustedDocuments",
    "load_trusted_documents",
    "read_manifest",
]

APOLLO_FORMAT = "apollo-persisted-query-manifest"
_HEX = re.compile(r"[0-9a-fA-F]+")
_HASHES = {32: "md5", 40: "sha1", 64: "sha256"}
# GraphQL Code Generator's client preset (6.x) writes its ids so, as the working group's form.
SHA256_PREFIX = "sha256:"


@dataclass(frozen=True, slots=True)
class TrustedDocument:
    id: str  # as its manifest gives it
    text: str
    source: str  # the file it came from
    name: str | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def read_manifest(path: Path) -> tuple[list[TrustedDocument], list[Problem]]:
    """The documents of one manifest file, and what is wrong with it."""
    source = str(path)
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as error:
        return [], [Problem(source, None, f"cannot be read ({error.strerror})")]
    except orjson.JSONDecodeError as error:
        return [], [Problem(source, None, f"is not JSON ({error})")]
    if not isinstance(data, dict):
        return [], [Problem(source, None, "is neither a manifest object nor an id-to-text map")]
    if "format" in data:
        entries, problems = _apollo_entries(source, data)
    else:
        entries, problems = _map_entries(source, data)
    documents = []
    for document in entries:
        mismatch = _hash_mismatch(document)
        if mismatch is None:
            documents.append(document)
        else:
            problems.append(Problem(source, document.id, mismatch))
    return documents, problems


def _apollo_entries(
    source: str, data: dict[str, object]
) -> tuple[list[TrustedDocument], list[Problem]]:
    if data.get("format") != APOLLO_FORMAT or data.get("version") != 1:
        reason = f"has format {data.get('format')!r} version {data.get('version')!r}"
        return [], [Problem(source, None, f'{reason}; expected "{APOLLO_FORMAT}" version 1')]
    operations = data.get("operations")
    if not isinstance(operations, list):
        return [], [Problem(source, None, '"operations" is not a list')]
    documents, problems = [], []
    for index, operation in enumerate(operations):
        entry = f"operations[{index}]"
        if not isinstance(operation, dict):
            problems.append(Problem(source, entry, "is not an object"))
            continue
        fields = {name: operation.get(name) for name in ("id", "body", "name")}
        wrong = [
            name
            for name, value in fields.items()
            if not isinstance(value, str) and (name != "name" or value is not None)
        ]
        if wrong or not fields["id"]:
            problems.append(Problem(source, entry, f"needs string {', '.join(wrong or ['id'])}"))
            continue
        documents.append(
            TrustedDocument(
                id=str(fields["id"]),
                text=str(fields["body"]),
                source=source,
                name=fields["name"] if isinstance(fields["name"], str) else None,
            )
        )
    return documents, problems


def _map_entries(
    source: str, data: dict[str, object]
) -> tuple[list[TrustedDocument], list[Problem]]:
    documents, problems = [], []
    for identifier, text in data.items():
        if not identifier:
            problems.append(Problem(source, repr(identifier), "an empty id"))
        elif not isinstance(text, str):
            problems.append(Problem(source, identifier, "its document is not a string"))
        else:
            documents.append(TrustedDocument(id=identifier, text=text, source=source))
    return documents, problems


def _hash_mismatch(document: TrustedDocument) -> str | None:
    hexdigits = document.id.removeprefix(SHA256_PREFIX)
    algorithm = "sha256" if hexdigits != document.id else _HASHES.get(len(hexdigits))
    if algorithm is None or not _HEX.fullmatch(hexdigits):
        return None  # a custom id
    digest = hashlib.new(algorithm, document.text.encode()).hexdigest()
    if digest == hexdigits.lower():
        return None
    return f"the id is not the {algorithm} of its document ({digest})"


class TrustedDocuments:
    """Every trusted document by its manifest's id and by the sha256 of its text."""

    def __init__(self, documents: Iterable[TrustedDocument] = ()) -> None:
        self._by_id: dict[str, str] = {}
        self._by_sha256: dict[str, str] = {}
        self._manifests: dict[str, str] = {}
        for document in documents:
            self._by_id[document.id] = document.text
            self._by_sha256[document.sha256] = document.text
            self._manifests.setdefault(document.text, Path(document.source).stem)

    def __len__(self) -> int:
        return len(self._by_sha256)

    def by_id(self, identifier: str) -> str | None:
        return self._by_id.get(identifier)

    def by_sha256(self, digest: str) -> str | None:
        return self._by_sha256.get(digest)

    def manifest_of(self, text: str) -> str | None:
        """The name of the (first) manifest that holds `text`: its client, for the metrics."""
        return self._manifests.get(text)


def load_trusted_documents(
    paths: Iterable[Path], prepare: Callable[[str], list[GraphQLError]]
) -> tuple[TrustedDocuments, list[tuple[TrustedDocument, list[str]]], list[Problem]]:
    """The manifests' documents (a directory: each `*.json` in it), each prepared by `prepare`
    (the schema's: parse, validate, cost, compile, once), each with its problems; and the
    manifests' problems, theirs included. The service starts only with no problem."""
    documents: list[TrustedDocument] = []
    problems: list[Problem] = []
    for named in paths:
        # A directory stands for every manifest in it (an image's mounted manifests).
        for path in sorted(named.glob("*.json")) if named.is_dir() else [named]:
            read, unreadable = read_manifest(path)
            documents += read
            problems += unreadable
    texts: dict[str, TrustedDocument] = {}
    checked = []
    for document in documents:
        reasons = [error.message for error in prepare(document.text)]
        first = texts.setdefault(document.id, document)
        if first.text != document.text:
            reasons.append(f"the id names another document too (in {first.source})")
        checked.append((document, reasons))
        problems += [Problem(document.source, document.id, reason) for reason in reasons]
    return TrustedDocuments(documents), checked, problems
