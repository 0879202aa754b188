"""A GraphQL engine for Strawberry schemas: operations parsed and validated once, costed,
compiled into plans that answer them (as graphql-jit does for graphql-js), and run under query
limits and a document policy. It knows nothing of the service that uses it: what a service adds
to each operation (a time budget, accounting, traces, error wording) comes in as `Hooks`.

    runner = OperationRunner(graphql_schema, compile_operation=partial(compile_operation, schema),
                             limits=QueryLimits(max_depth=8), hooks=Hooks(...))
    result = await runner.run(query, variables=..., context=..., operation_name=...,
                              allowed=[OperationType.QUERY])

`docs/engine.md` says what it does that graphql-core's `execute` does not, and what falls back
to it. Everything not named here is internal.
"""

from engine.compiler import Plan, compile_operation
from engine.document_policy import (
    DocumentPolicy,
    DocumentRefused,
    Documents,
    MalformedDocumentRequest,
)
from engine.limits import QueryLimits
from engine.operations import (
    UNTRACED,
    Extensions,
    Hooks,
    Observed,
    Observer,
    OperationHook,
    OperationRunner,
    Trace,
)
from engine.strawberry_adapter import graphql_schema
from engine.trusted_documents import (
    ManifestsRefused,
    TrustedDocument,
    TrustedDocuments,
    load_trusted_documents,
    read_manifest,
)
from engine.usage import coordinates

__all__ = [
    "UNTRACED",
    "DocumentPolicy",
    "DocumentRefused",
    "Documents",
    "Extensions",
    "Hooks",
    "MalformedDocumentRequest",
    "ManifestsRefused",
    "Observed",
    "Observer",
    "OperationHook",
    "OperationRunner",
    "Plan",
    "QueryLimits",
    "Trace",
    "TrustedDocument",
    "TrustedDocuments",
    "compile_operation",
    "coordinates",
    "graphql_schema",
    "load_trusted_documents",
    "read_manifest",
]
