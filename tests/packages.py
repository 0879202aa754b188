"""The packages of the repository's own code, which the house tests read (import circles,
layers and boundaries, private names, public names)."""

# Bottom to top: a package imports only from the layers below its own, never from a package beside
# it or above it. The command line is the service's top; the tests' shared tools and the bench
# drive it from outside.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"domain", "engine"}),
    frozenset({"datasource"}),
    frozenset({"resolvers"}),
    frozenset({"schema"}),
    frozenset({"server"}),
    frozenset({"jobs", "infra"}),
    frozenset({"cli"}),
    frozenset({"harness"}),
    frozenset({"bench"}),
)

PACKAGES = tuple(package for layer in LAYERS for package in sorted(layer))
