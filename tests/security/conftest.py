"""The API tests' fixtures (`api`, `clock`), for security tests that go through HTTP too."""

from tests.api.conftest import api, clock

__all__ = ["api", "clock"]
