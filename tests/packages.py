"""The packages of the repository's own code, which the house tests read (import circles and
boundaries, private names)."""

PACKAGES = (
    "domain",
    "datasource",
    "resolvers",
    "engine",
    "schema",
    "server",
    "jobs",
    "harness",
    "bench",
)
