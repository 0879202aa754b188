"""A GraphQL engine for Strawberry schemas: operations parsed and validated once, costed,
compiled into plans that answer them (as graphql-jit does for graphql-js), and run under query
limits and a document policy. It knows nothing of the service that uses it: what a service adds
to each operation (a time budget, accounting, traces, error wording) comes in as `Hooks`, and the
objects whose fields a plan reads from the records they carry as `StoredSource`s.

`OperationRunner.run` answers an operation; `run_in_parts` one whose `@defer` and `@stream` a
client reads in parts (`engine.incremental`). What it raises is one tree, `EngineError`'s (drawn in
`engine/errors.py`): a request refused before its operation runs (`RequestError`), an operation
the service's `Hooks.admit` refused (`Refusal`), and what stops a service's start. Everything not
named here is internal.

How to use it, what it adds to graphql-core's `execute` and what falls back: docs/engine.md.
"""

from engine.compiler import Plan, compile_operation
from engine.document_policy import (
    DOCUMENT_NOT_TRUSTED,
    PERSISTED_QUERY_NOT_FOUND,
    DocumentPolicy,
    Documents,
)
from engine.errors import (
    DocumentRefused,
    EngineError,
    MalformedDocumentRequest,
    ManifestsRefused,
    MissingQuery,
    NoSuchOperation,
    OperationTypeNotAllowed,
    Refusal,
    RequestError,
    UntestedStrawberry,
)
from engine.incremental import INCREMENTAL_DIRECTIVES, Defer20220824, Merged
from engine.limits import QueryLimits, actual_cost, operation_cost, uncapped_lists
from engine.operations import (
    UNTRACED,
    Admission,
    Charge,
    Extensions,
    FirstParse,
    Held,
    Holding,
    Hooks,
    Observed,
    Observer,
    OperationHook,
    OperationRunner,
    Trace,
)
from engine.parts import Part, Parts
from engine.stored import StoredField, StoredSource
from engine.strawberry_adapter import check_version, describe_values, graphql_schema
from engine.trusted_documents import (
    TrustedDocument,
    TrustedDocuments,
    load_trusted_documents,
    read_manifest,
)
from engine.usage import coordinates

__all__ = [
    "DOCUMENT_NOT_TRUSTED",
    "INCREMENTAL_DIRECTIVES",
    "PERSISTED_QUERY_NOT_FOUND",
    "UNTRACED",
    "Admission",
    "Charge",
    "Defer20220824",
    "DocumentPolicy",
    "DocumentRefused",
    "Documents",
    "EngineError",
    "Extensions",
    "FirstParse",
    "Held",
    "Holding",
    "Hooks",
    "MalformedDocumentRequest",
    "ManifestsRefused",
    "Merged",
    "MissingQuery",
    "NoSuchOperation",
    "Observed",
    "Observer",
    "OperationHook",
    "OperationRunner",
    "OperationTypeNotAllowed",
    "Part",
    "Parts",
    "Plan",
    "QueryLimits",
    "Refusal",
    "RequestError",
    "StoredField",
    "StoredSource",
    "Trace",
    "TrustedDocument",
    "TrustedDocuments",
    "UntestedStrawberry",
    "actual_cost",
    "check_version",
    "compile_operation",
    "coordinates",
    "describe_values",
    "graphql_schema",
    "load_trusted_documents",
    "operation_cost",
    "read_manifest",
    "uncapped_lists",
]
