"""Cursors: signed, bound to their list, refused when altered or reused elsewhere."""

import base64
import itertools

import pytest

from datasource.cursors import CursorCodec, ListScope
from datasource.items import Item
from datasource.table import GSI1, GSI2
from domain.enums import PaymentStatus
from domain.errors import InvalidCursor

SECRET = b"test-cursor-secret"
TABLE_KEY: Item = {"PK": {"S": "USER#alice"}, "SK": {"S": "LOAN#l1#PAYMENT#p1"}}
GSI1_KEY: Item = TABLE_KEY | {
    "GSI1PK": {"S": "USER#alice"},
    "GSI1SK": {"S": "LOAN#l1#STATUS#PENDING#PAYMENT#p1"},
}
GSI2_KEY: Item = TABLE_KEY | {
    "GSI2PK": {"S": "PAYMENT"},
    "GSI2SK": {"S": "STATUS#PENDING#PAYMENT#p1"},
}
SCOPES = [
    (ListScope(None, "alice", "l1"), TABLE_KEY),
    (ListScope(None, "alice", "l2"), TABLE_KEY),
    (ListScope(None, "bob", "l1"), TABLE_KEY),
    (ListScope(GSI1, "alice", "l1", PaymentStatus.PENDING), GSI1_KEY),
    (ListScope(GSI1, "alice", "l1", PaymentStatus.RETRY), GSI1_KEY),
    (ListScope(GSI1, "bob", "l1", PaymentStatus.PENDING), GSI1_KEY),
    (ListScope(GSI2, status=PaymentStatus.PENDING), GSI2_KEY),
    (ListScope(GSI2, status=PaymentStatus.COMPLETED), GSI2_KEY),
]


@pytest.mark.parametrize(("scope", "key"), SCOPES)
def test_a_cursor_gives_back_its_key(scope: ListScope, key: Item) -> None:
    codec = CursorCodec(SECRET)
    cursor = codec.encode(scope, key)
    assert codec.decode(scope, cursor) == key
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_a_cursor_is_refused_by_every_other_list() -> None:
    codec = CursorCodec(SECRET)
    for (made_for, key), (used_on, _) in itertools.permutations(SCOPES, 2):
        with pytest.raises(InvalidCursor):
            codec.decode(used_on, codec.encode(made_for, key))


def test_every_altered_character_is_refused() -> None:
    codec = CursorCodec(SECRET)
    scope, key = SCOPES[3]
    cursor = codec.encode(scope, key)
    for position in range(len(cursor)):
        replacement = "A" if cursor[position] != "A" else "B"
        altered = cursor[:position] + replacement + cursor[position + 1 :]
        with pytest.raises(InvalidCursor):
            codec.decode(scope, altered)


def test_a_cursor_with_a_forged_key_is_refused() -> None:
    codec = CursorCodec(SECRET)
    scope, key = SCOPES[0]
    raw = base64.urlsafe_b64decode(codec.encode(scope, key) + "==")
    forged = raw.replace(b"alice", b"bobby")
    with pytest.raises(InvalidCursor):
        codec.decode(scope, base64.urlsafe_b64encode(forged).rstrip(b"=").decode())


def test_a_cursor_signed_with_another_secret_is_refused() -> None:
    scope, key = SCOPES[0]
    cursor = CursorCodec(b"another-secret").encode(scope, key)
    with pytest.raises(InvalidCursor):
        CursorCodec(SECRET).decode(scope, cursor)


@pytest.mark.parametrize("cursor", ["", "!!!!", "abc=", "a" * 3000, "é", "YWJj", "YWJ", 42, None])
def test_junk_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursor) as refused:
        CursorCodec(SECRET).decode(SCOPES[0][0], cursor)
    assert refused.value.field == "after"


def test_the_secret_must_not_be_empty() -> None:
    with pytest.raises(ValueError):
        CursorCodec(b"")
