"""`/readyz`: whether this instance can serve, as its status; and, for its operators, why.

Ready means the circuit breaker is closed and the table answers a `DescribeTable` within
`READINESS_TIMEOUT_SECONDS`, and in `test` and `prod` is as the service needs it (that answer
compared, `datasource.table_fit`; `TableMismatch` else). The answer is kept for
`READINESS_CACHE_SECONDS`, and probes that come together share one call: however often `/readyz`
is asked, DynamoDB is asked at most once per interval. Until the table is known to be as needed,
`TableCheck.watch` asks every `TABLE_RECHECK_SECONDS` too, probes or none.

Anyone who reaches the API port may ask, so in `test` and `prod` it answers the status alone:
`{"status": "ok"}`, or 503 `{"status": "unavailable"}`. The detail (why not, the live updates,
the webhook endpoints delivering, the JWKS's state and keys, the table) is the operators': on the
metrics port (`LOC_METRICS_PORT`, `server.operators_port`), and on the API port in `local`;
`budgets` there says whether the fleet's broker holds the budgets or each instance its share.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse

from datasource import PaymentStore
from domain.errors import StorageUnavailable
from server.auth import AuthConfig
from server.budgets import Budgets
from server.live_feed import LiveFeed
from server.webhook_worker.delivery import WebhookDispatcher

__all__ = [
    "READINESS_CACHE_SECONDS",
    "READINESS_TIMEOUT_SECONDS",
    "TABLE_MISMATCH",
    "TABLE_RECHECK_SECONDS",
    "TableCheck",
    "readyz",
]

# A readiness probe that waits out the client's retries would time out itself; answer quickly.
READINESS_TIMEOUT_SECONDS = 2.0
# How long the table's answer stands: short against an orchestrator's probe period (10 s or
# more), long enough that no flood of probes becomes a flood of DescribeTables.
READINESS_CACHE_SECONDS = 2.0
# How often a table not known to be as the service needs it is compared again without a probe:
# the load balancer's health-check period (`infra.stack`), an orchestrator's usual one.
TABLE_RECHECK_SECONDS = 10.0
# The reason a table that answers is not ready: it lacks what the service needs.
TABLE_MISMATCH = "TableMismatch"


class TableCheck:
    """The table's last answer to `DescribeTable`, asked again once `max_age` old."""

    def __init__(
        self,
        *,
        max_age: float = READINESS_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_age = max_age
        self._clock = clock
        self._checked_at = -math.inf
        self._problem: str | None = None
        self._asking = asyncio.Lock()

    def _fresh(self) -> bool:
        return self._clock() - self._checked_at < self._max_age

    async def problem(self, store: PaymentStore) -> str | None:
        """None while the table answers, else why not (the error's name)."""
        if not self._fresh():
            async with self._asking:
                if not self._fresh():  # no probe that waited before this one asked meanwhile
                    self._problem = await _ask(store)
                    self._checked_at = self._clock()
        return self._problem

    async def watch(self, store: PaymentStore, *, every: float = TABLE_RECHECK_SECONDS) -> None:
        """While the store's table is not known to be as the service needs it, ask again every
        `every` seconds (probes between share the answers): a table put right is used without
        a restart, whether anything probes `/readyz` or not. Returns once it is."""
        fit = store.fit
        if fit is None:
            return
        while not fit.fits:
            await asyncio.sleep(every)
            await self.problem(store)


async def _ask(store: PaymentStore) -> str | None:
    try:
        async with asyncio.timeout(READINESS_TIMEOUT_SECONDS):
            await store.ping()
    except (StorageUnavailable, TimeoutError) as error:
        return type(error).__name__
    if store.fit is not None and not store.fit.fits:
        return TABLE_MISMATCH
    return None


async def readyz(request: Request, *, detail: bool) -> JSONResponse:
    """Ready or not; with `detail`, why not or what else runs."""
    state = request.app.state
    store: PaymentStore = state.store
    if store.breaker is not None and store.breaker.state == "open":
        # Known already: no need to wait on a DynamoDB that is not answering.
        problem: str | None = "CircuitOpen"
    else:
        table: TableCheck = state.table_check
        problem = await table.problem(store)
    if problem is not None:
        reason: dict[str, object] = {"reason": problem} if detail else {}
        if detail and problem == TABLE_MISMATCH and store.fit is not None:
            reason |= {"table": store.table_name, "tableProblems": list(store.fit.problems)}
        return JSONResponse({"status": "unavailable", **reason}, status_code=503)
    if not detail:
        return JSONResponse({"status": "ok"})
    live: LiveFeed = state.live
    auth: AuthConfig = state.auth
    ready: dict[str, object] = {
        "status": "ok",
        "liveUpdates": live.state,
        "streamReader": live.reads_stream,
        "table": store.table_name,
    }
    sender: WebhookDispatcher | None = state.webhooks
    if sender is not None:
        ready["webhookEndpointsDelivering"] = len(sender.delivering)
    budgets: Budgets | None = state.budgets
    if budgets is not None:
        # Held by each instance while the broker fails: not a reason for 503 either.
        ready["budgets"] = budgets.state
    if auth.jwks is not None:
        # Cached keys keep working while the provider cannot be read: not a reason for 503.
        ready |= {"jwks": auth.jwks.state, "jwksKeys": len(auth.jwks)}
    return JSONResponse(ready)
