"""Which document a request runs, and whether its caller may send it (SPEC §14).

A request names its document by `documentId` (`sha256:<hex>` of a trusted document's text, or
its manifest's id), Relay's `doc_id`, Apollo's `extensions.persistedQuery` (a trusted document,
or one registered by automatic persisted queries), or sends `query` text. `DocumentPolicy`
(`LOC_DOCUMENTS`: `any`, `trusted-for-customers`, `trusted`) says who may send text; a
federation gateway may under every policy. A refusal is a `DocumentRefused` with its code
(`DOCUMENT_NOT_TRUSTED`, `PERSISTED_QUERY_NOT_IN_LIST`, `PERSISTED_QUERY_NOT_FOUND`), nothing
run; a malformed id or a text that is not the named document's is an HTTP 400. APQ keeps the
last `APQ_DOCUMENTS` texts registered that parse and validate (a bounded dict: no cachetools).

Each form, policy and code, and what to do: docs/protocols.md#trusted-documents.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from enum import StrEnum

from engine.errors import DocumentRefused, MalformedDocumentRequest
from engine.trusted_documents import SHA256_PREFIX, TrustedDocuments

__all__ = [
    "APQ_DOCUMENTS",
    "DOCUMENT_NOT_TRUSTED",
    "PERSISTED_QUERY_NOT_FOUND",
    "PERSISTED_QUERY_NOT_IN_LIST",
    "DocumentPolicy",
    "Documents",
]

APQ_DOCUMENTS = 1000
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_ID_LENGTH = 256


class DocumentPolicy(StrEnum):
    ANY = "any"
    TRUSTED_FOR_CUSTOMERS = "trusted-for-customers"
    TRUSTED = "trusted"


PERSISTED_QUERY_NOT_FOUND = "PERSISTED_QUERY_NOT_FOUND"
PERSISTED_QUERY_NOT_IN_LIST = "PERSISTED_QUERY_NOT_IN_LIST"
DOCUMENT_NOT_TRUSTED = "DOCUMENT_NOT_TRUSTED"


class Documents:
    """The trusted documents, the APQ registry and the policy over them."""

    def __init__(
        self,
        trusted: TrustedDocuments,
        policy: DocumentPolicy,
        *,
        is_valid: Callable[[str], bool],
        apq_documents: int = APQ_DOCUMENTS,
    ) -> None:
        self.trusted = trusted
        self.policy = policy
        self._is_valid = is_valid
        self._registered: OrderedDict[str, str] = OrderedDict()
        self._apq_documents = apq_documents

    def may_send_text(self, *, is_service: bool, from_gateway: bool = False) -> bool:
        return (
            from_gateway
            or self.policy is DocumentPolicy.ANY
            or (self.policy is DocumentPolicy.TRUSTED_FOR_CUSTOMERS and is_service)
        )

    def text_for(
        self,
        *,
        query: str | None,
        document_id: object,
        doc_id: object,
        extensions: Mapping[str, object] | None,
        is_service: bool,
        from_gateway: bool = False,
    ) -> str | None:
        """The text the request runs (None: it names none). Raises `DocumentRefused` (its
        `code` the refusal's) when the policy refuses it, and `MalformedDocumentRequest` when
        the request's document id, persisted query or text is malformed."""
        may_send_text = self.may_send_text(is_service=is_service, from_gateway=from_gateway)
        identifier = _identifier(document_id, doc_id)
        persisted = None if extensions is None else extensions.get("persistedQuery")
        if identifier is not None:
            text = self._trusted(identifier)
            if text is None:
                raise DocumentRefused(
                    PERSISTED_QUERY_NOT_IN_LIST, f"No trusted document has the id {identifier}."
                )
            if query is not None and query != text:
                raise MalformedDocumentRequest("The query is not the text of the document named.")
            return text
        if persisted is not None:
            return self._persisted(_sha256_hash(persisted), query, may_send_text=may_send_text)
        if query is not None and not may_send_text:
            raise DocumentRefused(
                DOCUMENT_NOT_TRUSTED,
                "This caller must name a trusted document (documentId), not send its text.",
            )
        return query

    def _trusted(self, identifier: str) -> str | None:
        digest = identifier.removeprefix(SHA256_PREFIX)
        if digest != identifier:
            if not _SHA256.fullmatch(digest):
                raise MalformedDocumentRequest("A sha256: document id is 64 lowercase hex digits.")
            return self.trusted.by_sha256(digest)
        return self.trusted.by_id(identifier)

    def _persisted(self, digest: str, query: str | None, *, may_send_text: bool) -> str:
        text = self.trusted.by_sha256(digest)
        if text is None and may_send_text:
            text = self._registered.get(digest)
            if text is not None:
                self._registered.move_to_end(digest)
        if query is None:
            if text is not None:
                return text
            if may_send_text:
                raise DocumentRefused(PERSISTED_QUERY_NOT_FOUND, "PersistedQueryNotFound")
            raise DocumentRefused(
                PERSISTED_QUERY_NOT_IN_LIST, f"No trusted document has the hash {digest}."
            )
        if hashlib.sha256(query.encode()).hexdigest() != digest:
            raise MalformedDocumentRequest("provided sha does not match query")
        if text is None:
            if not may_send_text:
                raise DocumentRefused(
                    DOCUMENT_NOT_TRUSTED,
                    "This caller must name a trusted document, not register one.",
                )
            if self._is_valid(query):
                self._register(digest, query)
        return query

    def _register(self, digest: str, text: str) -> None:
        self._registered[digest] = text
        if len(self._registered) > self._apq_documents:
            self._registered.popitem(last=False)


def _identifier(document_id: object, doc_id: object) -> str | None:
    given = [value for value in (document_id, doc_id) if value is not None]
    if not given:
        return None
    if len(given) > 1:
        raise MalformedDocumentRequest("Name the document once: documentId or doc_id.")
    identifier = given[0]
    if not isinstance(identifier, str) or not 0 < len(identifier) <= _MAX_ID_LENGTH:
        raise MalformedDocumentRequest(
            f"A document id is a string of 1 to {_MAX_ID_LENGTH} characters."
        )
    return identifier


def _sha256_hash(persisted: object) -> str:
    if (
        not isinstance(persisted, dict)
        or type(persisted.get("version")) is not int
        or persisted["version"] != 1
        or not isinstance(persisted.get("sha256Hash"), str)
        or not _SHA256.fullmatch(persisted["sha256Hash"])
    ):
        raise MalformedDocumentRequest(
            "extensions.persistedQuery is {version: 1, sha256Hash: <64 lowercase hex digits>}."
        )
    digest: str = persisted["sha256Hash"]
    return digest
