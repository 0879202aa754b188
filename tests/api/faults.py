"""A DynamoDB that only fails, and the settings that point the service at it: for the reads and
writes under faults (tests/api/test_faults.py) and their traces (tests/api/test_tracing.py).
The server itself is the `faulty` fixture (tests/api/conftest.py)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from process.settings import DEV_JWT_SECRET

THROTTLED = {
    "__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
    "message": "Rate of requests exceeds the allowed throughput.",
}


@dataclass
class FaultyDynamoDB:
    """An HTTP endpoint that speaks just enough DynamoDB to fail: throttle, or answer too late
    (`delay` seconds, or at once from when `released` is set: a stall the test ends)."""

    mode: str = "throttle"
    delay: float = 0.0
    released: threading.Event = field(default_factory=threading.Event)
    requests: list[str] = field(default_factory=list)
    url: str = ""


def faulty_settings(fault: FaultyDynamoDB) -> dict[str, Any]:
    return {
        "env": "test",
        "auth_jwt_secret": DEV_JWT_SECRET,
        "cursor_secret": "a-test-cursor-secret-of-enough-bytes",
        "dynamodb_read_timeout": 0.3,
        "dynamodb_connect_timeout": 0.3,
        "dynamodb_max_attempts": 3,  # attempts in all: the first and two retries
        # These tests are about the SDK's own retries: a budget that never cuts them short.
        "dynamodb_budget": 60.0,
    }
