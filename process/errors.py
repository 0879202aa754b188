"""The exceptions of a process's start, which `loc-payments` turns into one line and exit 1:

RuntimeError
├── JavaMissing              no Java 17+ for the embedded DynamoDB Local
├── DynamoDBLocalMissing     DynamoDB Local's jar is not installed (`make install`)
└── DynamoDBLocalFailed      the emulator exited or did not answer
"""

from __future__ import annotations

__all__ = ["DynamoDBLocalFailed", "DynamoDBLocalMissing", "JavaMissing"]


class JavaMissing(RuntimeError):
    def __init__(self, detail: str = "") -> None:
        message = (
            "Java 17+ is needed for the embedded DynamoDB; install it "
            "(apt-get install openjdk-17-jre-headless) or set LOC_DYNAMODB_ENDPOINT"
        )
        super().__init__(f"{message} ({detail})" if detail else message)


class DynamoDBLocalMissing(RuntimeError):
    pass


class DynamoDBLocalFailed(RuntimeError):
    """The emulator exited or did not answer; the message carries the end of its output."""
