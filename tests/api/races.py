"""What the write races send, and what their losers may answer: the two contested moves of an ACH
payment from PENDING and the status each leads to, the read that checks the winner's payment,
the answers a loser may get, and the creation that the idempotency tests repeat under one key.
For the races in one process (tests/api/test_concurrent_transitions.py,
tests/api/test_idempotency.py) and across two (tests/api/test_two_instances.py)."""

from __future__ import annotations

from tests.api.conftest import PAYMENT_FIELDS, RESULT_FIELDS

SUBMIT = f"""mutation($input: SubmitPaymentInput!) {{
  result: submitPayment(input: $input) {{ {RESULT_FIELDS} }}
}}"""
SKIP = f"""mutation($input: SkipPaymentInput!) {{
  result: skipPayment(input: $input) {{ {RESULT_FIELDS} }}
}}"""
READ = f"""query($u: ID!, $l: ID!, $p: ID!) {{
  payment(userId: $u, loanId: $l, paymentId: $p) {{ {PAYMENT_FIELDS} }}
}}"""
TARGET = {SUBMIT: "ACHSENT", SKIP: "SKIPPED"}
LOSER_TYPES = {"ConflictError": "CONFLICT", "InvalidTransitionError": "INVALID_TRANSITION"}
REQUEST = {"userId": "alice", "loanId": "loan-1", "amountCents": 2500, "method": "ACH"}
