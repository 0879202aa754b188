"""`python -m schema` prints the schema in SDL as its clients see it; with `--subgraph`, as a
federation composer sees it (`_service { sdl }`). `make schema` writes them to schema.graphql
and schema.subgraph.graphql."""

import argparse

from schema import build_schema

parser = argparse.ArgumentParser(prog="python -m schema", description=__doc__)
parser.add_argument("--subgraph", action="store_true", help="the federation subgraph's SDL")
print(build_schema(subgraph=parser.parse_args().subgraph).as_str())
