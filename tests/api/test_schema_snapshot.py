"""The committed schema.graphql is the contract; a change to it must be deliberate."""

from pathlib import Path

from schema import build_schema

SNAPSHOT = Path(__file__).parents[2] / "schema.graphql"


def test_schema_matches_the_committed_snapshot() -> None:
    printed = build_schema().as_str() + "\n"
    assert printed == SNAPSHOT.read_text(), (
        "The GraphQL schema changed. If that is intended, accept it with `make schema` "
        "and commit schema.graphql with the change."
    )


def test_the_contract_names_of_the_spec_are_present() -> None:
    sdl = SNAPSHOT.read_text()
    for line in [
        "node(id: ID!): Node",
        # The spec's arguments first; `last` and `before` (backward paging, ours) after them.
        "paymentsByStatus(status: PaymentStatus!, first: Int = null, after: String = null, ",
        "createPayment(input: CreatePaymentInput!): PaymentResult!",
        "submitPayment(input: SubmitPaymentInput!): PaymentResult!",
        "completePayment(input: CompletePaymentInput!): PaymentResult!",
        "schedulePaymentRetry(input: SchedulePaymentRetryInput!): PaymentResult!",
        "failPayment(input: FailPaymentInput!): PaymentResult!",
        "returnPayment(input: ReturnPaymentInput!): PaymentResult!",
        "chargeBackPayment(input: ChargeBackPaymentInput!): PaymentResult!",
        "skipPayment(input: SkipPaymentInput!): PaymentResult!",
        "type Loan implements Node",
        "type Payment implements Node",
        "interface UserError",
        "enum PaymentMethod",
    ]:
        assert line in sdl, line
