"""A throttling storm: clients using the service through its API while the proxy in front of
DynamoDB (`harness.proxy`) answers a fraction of its data calls as DynamoDB's throttles.

Each client, as its own user, goes round: create a payment, read it, submit it, read its loan's
page, each write with an idempotency key. A write answered UNAVAILABLE is sent again with the
same key until it is answered otherwise (what a client of a payments API does); only its first
answer counts toward "the first time". The storm ends at its time: the rounds still going
finish on a calm table, their requests sent after it not counted (a write sent again until done
could otherwise keep a storm going for minutes: botocore's adaptive limiter let almost none
through). `recovered_seconds` is how long from the storm's end, once those rounds are done, until
a read and a write are each answered at the first try; then every client's payments are read
back: each stored once and submitted once (`stored_wrong`).
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from harness.proxy import Proxy

__all__ = ["StormFigures", "storm"]

RESULT = """__typename
    ... on PaymentPayload { payment { paymentId status attempts } replayed }
    ... on UserError { code message }"""
CREATE = f"""mutation Create($input: CreatePaymentInput!) {{
  result: createPayment(input: $input) {{ {RESULT} }}
}}"""
SUBMIT = f"""mutation Submit($input: SubmitPaymentInput!) {{
  result: submitPayment(input: $input) {{ {RESULT} }}
}}"""
PAYMENT = """query Payment($u: ID!, $l: ID!, $p: ID!) {
  payment(userId: $u, loanId: $l, paymentId: $p) { paymentId status attempts }
}"""
LOAN_PAGE = """query LoanPage($u: ID!, $l: ID!, $first: Int!, $after: String) {
  loan(userId: $u, loanId: $l) {
    payments(first: $first, after: $after) {
      pageInfo { hasNextPage endCursor }
      edges { node { paymentId status attempts
        history(first: 10) { complete edges { node { version toStatus } } } } }
    }
  }
}"""
LOAN = "loan-1"
UNAVAILABLE = "UNAVAILABLE"
# A client's wait before sending a write again that was answered UNAVAILABLE.
RESEND_AFTER = 0.05


@dataclass
class _Tally:
    """The first answers of one kind of request during the storm."""

    sent: int = 0
    good: int = 0
    seconds: list[float] = field(default_factory=list)

    def p99_ms(self) -> float | None:
        if not self.seconds:
            return None
        ordered = sorted(self.seconds)
        return round(ordered[max(1, math.ceil(0.99 * len(ordered))) - 1] * 1000, 1)


@dataclass(frozen=True)
class StormFigures:
    fraction: float
    capacity: float | None
    seconds: float
    clients: int
    reads: int
    reads_served: int
    writes: int
    writes_first_time: int
    read_p99_ms: float | None
    write_p99_ms: float | None
    # Answers with a 5xx status, or none at all (the connection failed).
    server_errors: int
    # Answers other than the right one or UNAVAILABLE (CONFLICT, INVALID_TRANSITION, …).
    wrong_answers: int
    resent: int
    # DynamoDB data calls the service made during the storm, and how many the proxy throttled.
    data_calls: int
    throttled: int
    recovered_seconds: float
    # Rounds the probe made after the storm until one was answered at the first try (1: the
    # first was, normal answers as soon as the storm ended).
    recovery_rounds: int
    # Payments a client was told about that are missing, stored twice or not submitted once.
    stored_wrong: int
    # From the service's metrics, when served: throttles it counted, times its breaker opened.
    throttles_counted: float | None
    breaker_opens: float | None

    @property
    def requests_per_second(self) -> float:
        """First answers of either kind a second, during the storm."""
        return (self.reads + self.writes) / self.seconds

    @property
    def read_share(self) -> float:
        return self.reads_served / self.reads if self.reads else 1.0

    @property
    def write_share(self) -> float:
        return self.writes_first_time / self.writes if self.writes else 1.0


@dataclass
class _Client:
    http: httpx.AsyncClient
    url: str
    token: str
    user: str
    reads: _Tally
    writes: _Tally
    problems: dict[str, int]
    payments: dict[str, str] = field(default_factory=dict)  # payment id -> its creation key
    # Requests sent from then on (the storm's end) are not counted.
    counted_until: float = math.inf

    async def post(self, query: str, variables: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        try:
            response = await self.http.post(
                f"{self.url}/graphql",
                json={"query": query, "variables": variables},
                headers={"Authorization": f"Bearer {self.token}"},
            )
        except httpx.TransportError:
            self.problems["server_errors"] += 1
            return time.perf_counter() - started, {}
        seconds = time.perf_counter() - started
        if response.status_code >= 500:
            self.problems["server_errors"] += 1
            return seconds, {}
        body: dict[str, Any] = response.json()
        return seconds, body

    async def read(self, query: str, variables: dict[str, Any], *, counted: bool) -> bool:
        counted = counted and time.monotonic() < self.counted_until
        seconds, body = await self.post(query, variables)
        served = bool(body) and "errors" not in body and None not in body["data"].values()
        if not served and body and _code(body) not in (UNAVAILABLE, None):
            self.problems["wrong_answers"] += 1
        if counted:
            self.reads.sent += 1
            self.reads.good += served
            self.reads.seconds.append(seconds)
        return served

    async def write(
        self, query: str, fields: dict[str, Any], *, counted: bool
    ) -> tuple[dict[str, Any], bool]:
        """The write's `result`, sent again with the same key while it answers UNAVAILABLE, and
        whether the first answer was it."""
        first, counted = True, counted and time.monotonic() < self.counted_until
        while True:
            seconds, body = await self.post(query, {"input": fields})
            result = _result(body)
            done = result is not None and result.get("code") != UNAVAILABLE
            if first and counted:
                self.writes.sent += 1
                self.writes.good += done
                self.writes.seconds.append(seconds)
            if result is not None and done:
                if result["__typename"] != "PaymentPayload":
                    self.problems["wrong_answers"] += 1
                return result, first
            if body and result is None and _code(body) != UNAVAILABLE:
                self.problems["wrong_answers"] += 1
                return {}, first
            first = False
            self.problems["resent"] += 1
            await asyncio.sleep(RESEND_AFTER)

    async def round(self, number: int, *, counted: bool) -> bool:
        """One round; whether each of its requests was answered at the first try."""
        key = f"{self.user}-{number}"
        created, created_first = await self.write(
            CREATE,
            {"userId": self.user, "loanId": LOAN, "amountCents": 1000 + number,
             "method": "ACH", "idempotencyKey": key},
            counted=counted,
        )  # fmt: skip
        if "payment" not in created:
            return False
        payment_id = created["payment"]["paymentId"]
        self.payments[payment_id] = key
        ids = {"u": self.user, "l": LOAN, "p": payment_id}
        read = await self.read(PAYMENT, ids, counted=counted)
        _, submitted_first = await self.write(
            SUBMIT,
            {"userId": self.user, "loanId": LOAN, "paymentId": payment_id, "reason": "file",
             "confirmationId": f"conf-{key}", "idempotencyKey": f"submit-{key}"},
            counted=counted,
        )  # fmt: skip
        page = await self.read(LOAN_PAGE, {"u": self.user, "l": LOAN, "first": 20}, counted=counted)
        return created_first and read and submitted_first and page

    async def stored_wrong(self) -> int:
        """Payments told about that are not stored once, submitted once; or stored untold."""
        stored: list[dict[str, Any]] = []
        after = None
        while True:
            variables = {"u": self.user, "l": LOAN, "first": 100, "after": after}
            _, body = await self.post(LOAN_PAGE, variables)
            payments = body["data"]["loan"]["payments"]
            stored += [edge["node"] for edge in payments["edges"]]
            if not payments["pageInfo"]["hasNextPage"]:
                break
            after = payments["pageInfo"]["endCursor"]
        wrong = abs(len(stored) - len(self.payments))
        for payment in stored:
            versions = [event["node"]["version"] for event in payment["history"]["edges"]]
            wrong += not (
                payment["paymentId"] in self.payments
                and (payment["status"], payment["attempts"]) == ("ACHSENT", 1)
                and versions == [1, 2]
            )
        return wrong


def _result(body: dict[str, Any]) -> dict[str, Any] | None:
    data = body.get("data") or {}
    result: dict[str, Any] | None = data.get("result")
    return result


def _code(body: dict[str, Any]) -> str | None:
    errors = body.get("errors") or []
    code: str | None = errors[0].get("extensions", {}).get("code") if errors else None
    return code


async def storm(
    url: str,
    proxy: Proxy,
    *,
    token: str,
    fraction: float = 0.5,
    capacity: float | None = None,
    seconds: float = 15.0,
    clients: int = 4,
    metrics_url: str | None = None,
) -> StormFigures:
    """`clients` clients on the service at `url` while `proxy` throttles `fraction` of its data
    calls, and those beyond `capacity` a second, for `seconds`; `token` a service token (it acts
    for any user)."""
    reads, writes = _Tally(), _Tally()
    problems = {"server_errors": 0, "wrong_answers": 0, "resent": 0}
    run = uuid.uuid4().hex[:8]
    limits = httpx.Limits(max_connections=2 * clients + 2)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        users = [
            _Client(http, url, token, f"storm-{run}-{n}", reads, writes, problems)
            for n in range(clients)
        ]
        calls_before, throttled_before = _data_calls(proxy), sum(proxy.throttled.values())
        proxy.throttle(fraction, capacity=capacity)
        ends = time.monotonic() + seconds
        for client in users:
            client.counted_until = ends
        calls: list[int] = []

        def end_storm() -> None:
            proxy.throttle()
            calls.extend((_data_calls(proxy), sum(proxy.throttled.values())))

        storm_ends = asyncio.get_running_loop().call_later(seconds, end_storm)

        async def go_round(client: _Client) -> None:
            number = 0
            while time.monotonic() < ends:
                await client.round(number, counted=True)
                number += 1

        try:
            await asyncio.gather(*(go_round(client) for client in users))
        finally:
            storm_ends.cancel()
        if not calls:  # the rounds ended before the storm (no round left to start)
            end_storm()
        data_calls, throttled = calls[0] - calls_before, calls[1] - throttled_before
        probe = users[0]
        recovery_rounds = await _until(
            lambda: probe.round(10_000 + len(probe.payments), counted=False)
        )
        recovered = time.monotonic() - ends
        stored_wrong = sum([await client.stored_wrong() for client in users])
        throttles_counted = breaker_opens = None
        if metrics_url is not None:
            families = {
                family.name: family
                for family in text_string_to_metric_families((await http.get(metrics_url)).text)
            }
            throttles_counted = sum(
                sample.value
                for sample in families["loc_payments_dynamodb_throttles"].samples
                if sample.name.endswith("_total")
            )
            breaker_opens = families["loc_payments_dynamodb_breaker_opens"].samples[0].value
    return StormFigures(
        fraction=fraction,
        capacity=capacity,
        seconds=seconds,
        clients=clients,
        reads=reads.sent,
        reads_served=reads.good,
        writes=writes.sent,
        writes_first_time=writes.good,
        read_p99_ms=reads.p99_ms(),
        write_p99_ms=writes.p99_ms(),
        server_errors=problems["server_errors"],
        wrong_answers=problems["wrong_answers"],
        resent=problems["resent"],
        data_calls=data_calls,
        throttled=throttled,
        recovered_seconds=round(recovered, 3),
        recovery_rounds=recovery_rounds,
        stored_wrong=stored_wrong,
        throttles_counted=throttles_counted,
        breaker_opens=breaker_opens,
    )


def _data_calls(proxy: Proxy) -> int:
    return sum(
        count
        for target, count in proxy.calls.items()
        if target.startswith("DynamoDB_") and not target.endswith(".DescribeTable")
    )


async def _until(check: Callable[[], Awaitable[bool]], limit: float = 30.0) -> int:
    """How many checks were made until one passed."""
    ends, checks = time.monotonic() + limit, 1
    while not await check():
        if time.monotonic() > ends:
            raise TimeoutError(f"the service did not recover within {limit} s of the storm")
        checks += 1
    return checks
