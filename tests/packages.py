"""The packages of the repository's own code, which the house tests read (import circles,
layers and boundaries, private names, public names)."""

# Bottom to top: a package imports only from the layers below its own, never from a package beside
# it or above it. The process kit (settings, start-up, logging, tracing, the embedded DynamoDB)
# sits below the server and the jobs, which stand side by side; the deploy generator and the
# command line are rooms above both. The tests' shared tools and the bench drive it from outside.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"domain", "engine"}),
    frozenset({"datasource"}),
    frozenset({"resolvers"}),
    frozenset({"schema"}),
    frozenset({"process"}),
    frozenset({"server", "jobs"}),
    frozenset({"infra"}),
    frozenset({"cli"}),
    frozenset({"harness"}),
    frozenset({"bench"}),
)

PACKAGES = tuple(package for layer in LAYERS for package in sorted(layer))
