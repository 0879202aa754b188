"""`python -m schema` prints the schema in SDL; `make schema` writes it to schema.graphql."""

from schema import build_schema

print(build_schema().as_str())
