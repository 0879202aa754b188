"""The peers the service is measured against: P1 (`graphql_core`), the engine floor on the
fake DynamoDB; the Node.js peer (`node/`) on DynamoDB Local."""

__all__: list[str] = []
