"""The classification of schema changes and the rule of a deliberate change (`schema.evolution`),
on small schemas."""

from __future__ import annotations

import pytest

from schema.evolution import Document, broken_documents, parse_sdl, refusals, schema_changes

BEFORE = """
type Query {
  payment(id: ID!, status: Status): Payment
  count: Int
  legacy: String @deprecated(reason: "Use payment.")
}
type Payment {
  id: ID!  amount: Int  note: String @deprecated(reason: "Use reason.")  reason: String }
enum Status { PENDING DONE OLD @deprecated(reason: "Use DONE.") }
"""


def changed(before: str, after: str) -> list[tuple[str, str, str | None]]:
    return [
        (change.level, change.kind, change.coordinate)
        for change in schema_changes(parse_sdl(before), parse_sdl(after))
    ]


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        pytest.param(
            BEFORE.replace("  amount: Int", ""),
            ("breaking", "FIELD_REMOVED", "Payment.amount"),
            id="a-removed-field",
        ),
        pytest.param(
            BEFORE.replace("amount: Int", "amount: String"),
            ("breaking", "FIELD_CHANGED_KIND", "Payment.amount"),
            id="a-type-changed",
        ),
        pytest.param(
            BEFORE.replace("status: Status)", "status: Status!)"),
            ("breaking", "ARG_CHANGED_KIND", "Query.payment(status:)"),
            id="an-argument-made-required",
        ),
        pytest.param(
            BEFORE.replace("PENDING DONE", "PENDING DONE FAILED"),
            ("dangerous", "VALUE_ADDED_TO_ENUM", "Status.FAILED"),
            id="an-enum-value-added",
        ),
        pytest.param(
            BEFORE.replace("reason: String }", "reason: String  currency: String }"),
            ("safe", "FIELD_ADDED", "Payment.currency"),
            id="a-field-added",
        ),
        pytest.param(
            BEFORE.replace("amount: Int", 'amount: Int @deprecated(reason: "Use cents.")'),
            ("safe", "DEPRECATION_ADDED", "Payment.amount"),
            id="a-field-deprecated",
        ),
    ],
)
def test_each_change_is_classified(after: str, expected: tuple[str, str, str]) -> None:
    assert changed(BEFORE, after) == [expected]


def test_a_breaking_change_comes_before_the_others() -> None:
    after = BEFORE.replace("  amount: Int", "").replace("PENDING DONE", "PENDING DONE NEW")
    assert [level for level, _, _ in changed(BEFORE, after)] == ["breaking", "dangerous"]


LIST = Document(
    "apollo.json", "id-1", "PaymentList", "query PaymentList { payment(id: 1) { id amount } }"
)
NOTES = Document("relay.json", "id-2", "Notes", "query Notes { payment(id: 1) { note } }")


def test_a_removal_that_was_not_deprecated_is_refused() -> None:
    [refusal] = refusals(parse_sdl(BEFORE), parse_sdl(BEFORE.replace("  amount: Int", "")), [])
    assert refusal.why == "Payment.amount was not @deprecated first"


def test_a_deprecated_unused_removal_is_accepted() -> None:
    after = BEFORE.replace('  note: String @deprecated(reason: "Use reason.")', "")
    assert refusals(parse_sdl(BEFORE), parse_sdl(after), [LIST]) == []


def test_a_deprecated_removal_a_document_still_uses_is_refused_naming_it() -> None:
    after = BEFORE.replace('  note: String @deprecated(reason: "Use reason.")', "")
    [refusal] = refusals(parse_sdl(BEFORE), parse_sdl(after), [LIST, NOTES])
    assert refusal.why == "Payment.note is still used by Notes (id-2, relay.json)"


def test_a_deprecated_enum_value_goes_and_a_required_argument_does_not() -> None:
    after = BEFORE.replace(' OLD @deprecated(reason: "Use DONE.")', "").replace(
        "status: Status)", "status: Status, currency: String!)"
    )
    [refusal] = refusals(parse_sdl(BEFORE), parse_sdl(after), [LIST])
    assert refusal.change.kind == "REQUIRED_ARG_ADDED"


def test_the_documents_a_change_breaks_are_named() -> None:
    after = parse_sdl(BEFORE.replace('  note: String @deprecated(reason: "Use reason.")', ""))
    [(document, error)] = broken_documents(after, [LIST, NOTES])
    assert document is NOTES
    assert "Cannot query field 'note' on type 'Payment'" in error.message
