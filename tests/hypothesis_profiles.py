"""Hypothesis's example counts, set by profile: `make test` runs a fixed budget (the `default`
profile), `HYPOTHESIS_PROFILE=long` ten times as many examples of every property, `soak` fifty
times (`make test-cost` runs the cost's property so).

A test states its count in the default profile through `examples(count)`; the profile loaded
scales it. No profile keeps an example database (it would be a `.hypothesis/` directory in the
checkout)."""

from __future__ import annotations

import os

from hypothesis import settings

DEFAULT = "default"
LONG = "long"
SOAK = "soak"
BASE_EXAMPLES = 100

settings.register_profile(DEFAULT, max_examples=BASE_EXAMPLES, database=None)
settings.register_profile(LONG, max_examples=10 * BASE_EXAMPLES, database=None)
settings.register_profile(SOAK, max_examples=50 * BASE_EXAMPLES, database=None)


def load() -> None:
    """Load the profile HYPOTHESIS_PROFILE names (`default` without it); before collection."""
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", DEFAULT))


def examples(count: int) -> int:
    """`count` in the default profile, scaled as the loaded profile's `max_examples` is."""
    return max(1, count * settings().max_examples // BASE_EXAMPLES)
