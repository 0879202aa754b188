"""A failure of ours in a mutation (DynamoDB refusing a request the service built) reaches the
caller as `errors[]`'s masked INTERNAL, and the log and the metrics as itself, counted once."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from domain.errors import PaymentsError
from tests.api.conftest import RESULT_FIELDS, Api, error_codes

CREATE = (
    "mutation($input: CreatePaymentInput!) "
    f"{{ createPayment(input: $input) {{ {RESULT_FIELDS} }} }}"
)
NEW_PAYMENT = {"userId": "alice", "loanId": "loan-1", "amountCents": 5000, "method": "ACH"}
REFUSED = {"Error": {"Code": "ValidationException", "Message": "a request we built badly"}}


def refuse_transactions(api: Api) -> None:
    """DynamoDB answers every transaction of the app's store with a ValidationException."""

    def refused(model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if model.name != "TransactWriteItems":
            return None
        return AWSResponse("http://dynamodb.test", 400, {}, None), REFUSED

    # Last: the store's own hooks (its accounting, its breaker) see the call first.
    api.app.state.store.client.meta.events.register_last("before-call.dynamodb", refused)


def errors_counted(metrics: str, code: str) -> float:
    prefix = f'loc_payments_errors_total{{code="{code}"}} '
    return sum(
        float(line.removeprefix(prefix)) for line in metrics.splitlines() if line.startswith(prefix)
    )


async def test_a_write_dynamodb_refuses_is_masked_internal_and_logged_as_itself(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    refuse_transactions(api)
    body = await api.post(CREATE, {"input": NEW_PAYMENT})
    metrics = (await api.http.get("/metrics")).text

    assert error_codes(body) == ["INTERNAL"], body
    assert [error["message"] for error in body["errors"]] == ["Unexpected error."]
    [logged] = [record for record in caplog.records if record.name == "loc_payments.graphql"]
    assert logged.exc_info is not None
    error = logged.exc_info[1]
    # The refusal itself, not a ValueError of turning its code into a UserError's.
    assert type(error) is PaymentsError, error
    assert isinstance(error.__cause__, ClientError)
    assert errors_counted(metrics, "INTERNAL") == 1
