"""The peers the service is measured against, each an ASGI app over the same payments.

    http_floor      P0  a plain Starlette endpoint returning precomputed response bytes
    graphql_core    P1  graphql-core on `schema.graphql`, parse and validation cached
    strawberry_app  P2  Strawberry with default settings, written as a user would first write it
    (the service)   P3  `server.app.create_app`, served as `loc-payments serve` serves it

P1 and P2 read through the service's own `PaymentStore` on the same fake DynamoDB client, so
all peers make the same DynamoDB calls, each with the same injected latency.
"""
