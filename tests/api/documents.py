"""GraphQL documents that more than one test module sends: a page of a loan's payments (for
tests/api/test_queries.py and tests/api/test_app_lifetime.py) and a payment with its history's
first versions, by an operation name (for tests/api/test_tracing.py and
tests/api/test_trace_export.py)."""

from __future__ import annotations

LOAN_PAGE = """
query($userId: ID, $loanId: ID!, $status: PaymentStatus, $first: Int, $after: String) {
  loan(userId: $userId, loanId: $loanId) {
    id loanId userId
    payments(status: $status, first: $first, after: $after) {
      edges { cursor node { paymentId status amountCents } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
}
"""
PAYMENT = """query Payment($u: ID, $l: ID!, $p: ID!) {
  payment(userId: $u, loanId: $l, paymentId: $p) {
    paymentId status amountCents loan { loanId } history(first: 5) { edges { node { version } } }
  }
}"""
