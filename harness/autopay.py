"""An autopay burst through the API: what a lender's ACH morning asks of the service, creations
and presentments of many borrowers' payments, paced at a given rate of payment writes.

Each payment is a borrower's own (a user of its own: autopay creates one payment per loan due),
created with the service's idempotency key and then submitted with a confirmation id, as the
autopay job and the ACH file do. `clients` clients share the work; with `rate`, each write waits
for its slot in an even schedule of `rate` writes a second across them; without, they go as fast
as the service answers (how R is measured). A write answered UNAVAILABLE (the service gave up on
a throttled DynamoDB) counts as refused and is not sent again: the burst's load stays as paced.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["CREATE", "SUBMIT", "BurstFigures", "Write", "autopay", "burst", "throttles_counted"]

ANSWER = (
    "__typename ... on PaymentPayload { payment { paymentId } } ... on UserError { code message }"
)
CREATE = f"mutation($i: CreatePaymentInput!) {{ result: createPayment(input: $i) {{ {ANSWER} }} }}"
SUBMIT = f"mutation($i: SubmitPaymentInput!) {{ result: submitPayment(input: $i) {{ {ANSWER} }} }}"


# A payment write as a burst sends it: a mutation (CREATE, SUBMIT) and its input; the payment's
# id, or None where the write was refused.
Write = Callable[[str, dict[str, Any]], Awaitable[str | None]]


async def autopay(
    write: Write, user: str, *, submit: bool | Callable[[], bool] = True
) -> str | None:
    """One borrower's autopay through `write`: its payment created (ACH, AUTO, $125.00, the
    idempotency key of the borrower's own), then submitted in the ACH file if `submit` (asked
    once the payment is created, if a function). Its id, or None if its creation was refused."""
    loan = {"userId": user, "loanId": "loan-1"}
    payment_id = await write(
        CREATE, {**loan, "amountCents": 12_500, "method": "ACH",
                 "process": "AUTO", "idempotencyKey": f"autopay-{user}"},
    )  # fmt: skip
    if payment_id is not None and (submit() if callable(submit) else submit):
        await write(
            SUBMIT, {**loan, "paymentId": payment_id, "reason": "ach file",
                     "confirmationId": f"ach-{user}", "idempotencyKey": f"submit-{user}"},
        )  # fmt: skip
    return payment_id


@dataclass(frozen=True, slots=True)
class BurstFigures:
    seconds: float
    # Payment writes answered with the payment, and those refused (UNAVAILABLE, any error).
    writes: int
    refused: int

    @property
    def writes_per_second(self) -> float:
        return self.writes / self.seconds


async def burst(
    url: str, *, token: str, seconds: float, clients: int = 8, rate: float | None = None
) -> BurstFigures:
    """Autopay creations and submissions on the service at `url` for `seconds`."""
    run = uuid.uuid4().hex[:8]
    done = refused = 0
    started = time.monotonic()
    ends = started + seconds
    slot = 0
    headers = {"Authorization": f"Bearer {token}"}

    async def write(http: httpx.AsyncClient, query: str, input: dict[str, Any]) -> str | None:
        nonlocal done, refused, slot
        if rate is not None:
            at, slot = started + slot / rate, slot + 1
            await asyncio.sleep(max(0.0, at - time.monotonic()))
        response = await http.post(
            f"{url}/graphql", json={"query": query, "variables": {"i": input}}, headers=headers
        )
        result = ((response.json() if response.status_code == 200 else {}).get("data") or {}).get(
            "result"
        )
        if result is None or "payment" not in result:
            refused += 1
            return None
        done += 1
        payment_id: str = result["payment"]["paymentId"]
        return payment_id

    async def borrower(http: httpx.AsyncClient, client: int) -> None:
        number = 0
        while time.monotonic() < ends:
            user = f"autopay-{run}-{client}-{number}"
            await autopay(
                functools.partial(write, http), user, submit=lambda: time.monotonic() < ends
            )
            number += 1

    limits = httpx.Limits(max_connections=clients + 2)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        await asyncio.gather(*(borrower(http, client) for client in range(clients)))
    return BurstFigures(time.monotonic() - started, done, refused)


async def throttles_counted(metrics_url: str) -> float:
    """`loc_payments_dynamodb_throttles_total` of a service, over every API and index."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(metrics_url)).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "loc_payments_dynamodb_throttles"
        for sample in family.samples
        if sample.name.endswith("_total")
    )
