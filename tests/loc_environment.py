"""A fixture for the tests of the server and of the jobs, which read settings from LOC_*."""

import os

import pytest

from harness.processes import KEPT_SETTINGS


@pytest.fixture(autouse=True)
def no_loc_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own LOC_* variables must not change what these tests see; the suite's
    record of AWS operations goes on."""
    for name in list(os.environ):
        if name.upper().startswith("LOC_") and name not in KEPT_SETTINGS:
            monkeypatch.delenv(name)
