import os

import pytest


@pytest.fixture(autouse=True)
def _no_loc_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's own LOC_* variables must not change what these tests see.
    for name in list(os.environ):
        if name.upper().startswith("LOC_"):
            monkeypatch.delenv(name)
