"""A hypothesis state machine drives payments through the GraphQL API and checks the table.

Each example creates a few random payments (ACH or PINless, any amount, with or without an
intended installment) and then makes random moves: any of the seven transition mutations, with
inputs that fit or do not (confirmation ids, applications that add up or not, return codes, empty
reasons). Expectations come from the API itself, never from a copy of the transition table: a move
that succeeds must have been in the payment's `allowedTransitions` just before (so a move to a
status that was not in it is refused). After every step, on moto:

- the amount never changes;
- a refused move (any error member of `PaymentResult`) leaves the item identical, attribute for
  attribute; a successful one raises `loc_version` by exactly one and stores what it answered;
- attempts never exceed the maximum, never fall, and rise by at most one a move;
- a terminal status (SKIPPED, FAILED, RETURNED, CHARGED_BACK) never moves again;
- a COMPLETED payment's applications add up to its amount (and any applications always do);
- GSI1 and GSI2 list a written payment under its current status, at its current version;
- the history of a payment the step wrote or tried to (its event items, read raw) replays to the
  payment as stored: one event per version, 1 to the current one, in order (so a refused move
  stored none, and a write stored exactly one); the first is the creation (no `from` status, to
  PENDING, at the creation time), each next one moves from the status the one before moved to,
  the last one is the latest write (status, time, reason); the latest confirmation id and return
  code an event set are the payment's; and the presentments among the events (the one place
  this test names moves: SPEC's presentments, see PRESENTMENTS) count its attempts and date its
  first presentment, as its last move to COMPLETED dates its completion;
- when an example ends, each index lists each of its payments exactly once (so under no other
  status), and the table holds nothing that the steps did not write: the payments as last read,
  their confirmation claims, and for each payment one event per version and no other.

Hypothesis's state machines are synchronous, so the API runs on a dedicated event loop (one
`asyncio.Runner`) that owns one app for the whole test. Each example is a new user; every item of
its user's partition (payments, confirmation claims, events) is deleted when it ends, so the
table only ever holds one example's items (moto's index queries scan the whole table, GSI2's one
partition would otherwise hold every example's payments, and moto's TransactWriteItems copies
the whole table for each item it writes).

Cost: a move is about four DynamoDB calls (the service's read and its transactional write, this
test's read, and two index queries after a write), and moto's server, running in this process,
spends 3-10 ms of CPU on each, more on a transaction (a deep copy of the table per item it
writes). This test's read is one Query of the example's partition, which brings the payment's
item and its events together: no dearer on moto than the GetItem it replaced, where a second
Query for the history cost a fifth more. 200 examples of up to 8 steps take 65-110 s on two
cores, so `make test` runs 50 (`tests.hypothesis_profiles`; 500 with HYPOTHESIS_PROFILE=long);
the "loop" rule and Hypothesis's swarm
testing (some examples only loop) make up for the short examples by driving payments to
the attempts maximum quickly.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, ClassVar

import boto3
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from datasource import DynamoConfig
from domain import keys
from tests.api.conftest import Api, api_client
from tests.hypothesis_profiles import examples

MAX_ATTEMPTS = 3
MAX_INT = 2_147_483_647
MAX_PAYMENTS = 2  # of one example; every later step moves one of them
TERMINAL = frozenset({"SKIPPED", "FAILED", "RETURNED", "CHARGED_BACK"})
# What each mutation asks for (SPEC §6). Whether the payment may move there, the API says.
TARGET = {
    "submitPayment": "ACHSENT",
    "completePayment": "COMPLETED",
    "schedulePaymentRetry": "RETRY",
    "failPayment": "FAILED",
    "returnPayment": "RETURNED",
    "chargeBackPayment": "CHARGED_BACK",
    "skipPayment": "SKIPPED",
}
# A move asked for alone, of a payment that exists, is refused for what was asked: never these.
NOT_A_REFUSAL = frozenset({"CONFLICT", "NOT_FOUND", "UNAVAILABLE"})

# Inputs: those that fit a move, and those that do not (which rule takes which: see the rules).
OMIT = "<omit>"  # an optional input left out
CURRENT = "<current>"  # the payment's own confirmation id (a fresh one if it has none)
REASONS = ["collections run", "payments-service callback", "ops request", "x"]
BAD_REASONS = [""]
CONFIRMATION_IDS = [CURRENT, "conf-1", "conf-2"]
BAD_CONFIRMATION_IDS = ["bad#id", "", " conf-1"]
RETURN_CODES = ["R01", "R09", "R02", "R10"]
BAD_RETURN_CODES = ["X1", "R1", "r01"]
APPLICATION_MODES = ["exact", OMIT]
BAD_APPLICATION_MODES = ["off-by-one", "empty", "bad-id", "zero"]
CUTS = st.lists(st.integers(0, MAX_INT), max_size=2)
CREATIONS = st.fixed_dictionaries(
    {
        "loanId": st.sampled_from(["loan-1", "loan-2"]),
        "amountCents": st.integers(1, MAX_INT),
        "method": st.sampled_from(["ACH", "PINLESS"]),
        "process": st.sampled_from(["MANUAL", "AUTO", "RETRY"]),
        "intendedInstallmentId": st.sampled_from(["inst-1", OMIT]),
        "accountLastFour": st.sampled_from(["6789", OMIT]),
    }
)

# Only what the checks read: a smaller document is a faster request, and this test makes many.
PAYMENT = """
    paymentId status amountCents attempts confirmationId returnCode updateReason updatedAt
    intendedInstallmentId allowedTransitions applications { installmentId amountCents }
"""
RESULT = f"""
    __typename
    ... on PaymentPayload {{ payment {{ {PAYMENT} }} }}
    ... on UserError {{ code message }}
    ... on InvalidTransitionError {{ currentStatus targetStatus }}
"""
DOCUMENTS = {
    mutation: f"""mutation($input: {mutation[0].upper()}{mutation[1:]}Input!) {{
        result: {mutation}(input: $input) {{ {RESULT} }}
    }}"""
    for mutation in ["createPayment", *TARGET]
}
# What an index entry must share with its primary item (read projected: moto is faster so).
INDEX_PROJECTION = "loc_payment_id, loc_status, loc_version, loc_last_updated"
# The moves that present a payment, each raising its attempts by one (SPEC §6): from PENDING or
# RETRY to ACHSENT, to COMPLETED or RETRY (PINless), and PINless's decline from PENDING to FAILED.
# Only the history's replay names moves; which move is allowed, the API says.
PRESENTMENTS = frozenset(
    {(source, target) for source in ("PENDING", "RETRY") for target in ("ACHSENT", "COMPLETED")}
    | {("PENDING", "RETRY"), ("RETRY", "RETRY"), ("PENDING", "FAILED")}
)
# The caller this test writes as: the service token's subject (tests.api.conftest.SERVICE).
SERVICE_ID = "collections-job"

Item = dict[str, Any]


@dataclass
class Harness:
    """What every example shares: one event loop, one app on it, one raw DynamoDB client."""

    runner: asyncio.Runner
    api: Api
    dynamodb: Any  # boto3's DynamoDB client: the table and its indexes, as they are
    table_name: str


@dataclass
class Tracked:
    """One payment as the test knows it: what it was created with and what was last seen."""

    user_id: str
    loan_id: str
    payment_id: str
    amount: int
    intended_installment_id: str | None
    status: str
    allowed: list[str]  # `allowedTransitions` as the API last answered it
    item: Item  # the stored item, as last read
    events: list[Item] = field(default_factory=list)  # its event items, read with it

    @property
    def key(self) -> Item:
        return {
            "PK": {"S": f"USER#{self.user_id}"},
            "SK": {"S": f"LOAN#{self.loan_id}#PAYMENT#{self.payment_id}"},
        }

    @property
    def history_prefix(self) -> str:
        """The sort-key prefix of the payment's event items."""
        return f"HISTORY#LOAN#{self.loan_id}#PAYMENT#{self.payment_id}#V#"

    def named(self, reason: str) -> dict[str, Any]:
        return {
            "userId": self.user_id,
            "loanId": self.loan_id,
            "paymentId": self.payment_id,
            "reason": reason,
        }


class PaymentLifecycle(RuleBasedStateMachine):
    harness: ClassVar[Harness]

    def __init__(self) -> None:
        super().__init__()
        self.user_id = f"user-{uuid.uuid4()}"
        self.tracked: dict[str, Tracked] = {}
        # What the last step wrote or tried to (checked after it), and what it changed.
        self.touched: list[Tracked] = []
        self.changed: list[Tracked] = []
        # Set by a step, cleared once its checks passed: a failed example skips the final check.
        self.unchecked = False

    # --- steps ----------------------------------------------------------------------------

    @initialize(creations=st.lists(CREATIONS, min_size=1, max_size=MAX_PAYMENTS))
    def create_payments(self, creations: list[dict[str, Any]]) -> None:
        self.begin_step()
        for creation in creations:
            self.create(creation)

    # Four kinds of move, each a rule, so that Hypothesis varies their mix from one example to the
    # next (swarm testing): some examples only loop, and get far; others try anything at all.

    @rule(data=st.data())
    def loop(self, data: st.DataObject) -> None:
        """Present or retry the most presented payment that can still move: whichever of
        `submitPayment` and `schedulePaymentRetry` the API says is open (both, once neither is),
        with fitting inputs, so that the attempts reach the maximum and moves then try to pass it.
        """
        self.move_in_style("loop", data)

    @rule(data=st.data())
    def move(self, data: st.DataObject) -> None:
        """A move the API says is open, of a payment that can still move, with fitting inputs."""
        self.move_in_style("fit", data)

    @rule(data=st.data())
    def probe(self, data: st.DataObject) -> None:
        """A move the API says is open, with any inputs, the unfitting ones first."""
        self.move_in_style("probe", data)

    @rule(data=st.data())
    def wild(self, data: st.DataObject) -> None:
        """Any of the seven transition mutations, of any payment, with any inputs."""
        self.move_in_style("wild", data)

    def move_in_style(self, style: str, data: st.DataObject) -> None:
        movable = [payment for payment in self.tracked.values() if payment.allowed]
        if not movable:
            style = "wild"  # every payment is in a terminal status: only refusals remain
        if style == "loop":
            payment = max(movable, key=lambda p: (attempts(p.item), version(p.item)))
            loop = ["submitPayment", "schedulePaymentRetry"]
            mutations = [m for m in loop if TARGET[m] in payment.allowed] or loop
        else:
            payments = movable if style != "wild" else list(self.tracked.values())
            ids = [payment.payment_id for payment in payments]
            payment = self.tracked[data.draw(st.sampled_from(ids), label="payment")]
            open_moves = [mutation for mutation in TARGET if TARGET[mutation] in payment.allowed]
            mutations = open_moves if style != "wild" else list(TARGET)
        mutation = data.draw(st.sampled_from(mutations), label="mutation")
        reasons = REASONS if style in ("fit", "loop") else REASONS + BAD_REASONS
        reason = data.draw(st.sampled_from(reasons), label="reason")
        extra = data.draw(self.inputs(mutation, payment, style), label="input")
        self.begin_step()
        self.transition(mutation, payment, reason, **extra)

    def inputs(
        self, mutation: str, payment: Tracked, style: str
    ) -> st.SearchStrategy[dict[str, Any]]:
        """What a mutation takes beyond the payment and the reason."""
        current = payment.item.get("loc_confirmation_id", {}).get("S")
        own = current or f"conf-{payment.payment_id[-6:]}"

        def pick(good: list[str], bad: list[str]) -> st.SearchStrategy[str]:
            options = {"fit": good, "loop": good, "probe": bad + good, "wild": good + bad}[style]
            return st.sampled_from(options).map(lambda choice: own if choice == CURRENT else choice)

        if mutation == "submitPayment":
            return given(confirmationId=pick(CONFIRMATION_IDS, BAD_CONFIRMATION_IDS))
        # As the schema describes these inputs: a PINless completion is a presentment and takes
        # a confirmation id, an ACH one may repeat the payment's; an ACH retry takes the return
        # code, a PINless one (a decline) none.
        ach = payment.item["loc_payment_method"] == {"S": "ach"}
        if mutation == "completePayment":
            modes = pick(APPLICATION_MODES, BAD_APPLICATION_MODES)
            confirmations = [CURRENT, OMIT] if ach else [CURRENT]
            return given(
                confirmationId=pick(confirmations, [OMIT, *CONFIRMATION_IDS]),
                applications=st.builds(application_list, st.just(payment.amount), modes, CUTS),
            )
        if mutation == "schedulePaymentRetry":
            codes = ["R01", "R09"] if ach else [OMIT]
            return given(returnCode=pick(codes, [OMIT, *RETURN_CODES, *BAD_RETURN_CODES]))
        if mutation == "returnPayment":
            return given(returnCode=pick(RETURN_CODES, BAD_RETURN_CODES))
        return st.just({})

    # --- what creations and moves must do -------------------------------------------------

    def begin_step(self) -> None:
        self.unchecked = True
        self.touched, self.changed = [], []

    def create(self, creation: dict[str, Any]) -> None:
        fields = {"userId": self.user_id, **without_omitted(creation)}
        result = self.mutate("createPayment", fields)
        assert result["__typename"] == "PaymentPayload", result
        created = result["payment"]
        assert created["status"] == "PENDING", result
        assert created["amountCents"] == fields["amountCents"], result
        assert created["attempts"] == 0, result
        assert created["applications"] == [], result
        payment = Tracked(
            user_id=self.user_id,
            loan_id=fields["loanId"],
            payment_id=created["paymentId"],
            amount=fields["amountCents"],
            intended_installment_id=created["intendedInstallmentId"],
            status=created["status"],
            allowed=created["allowedTransitions"],
            item={},
        )
        item = self.read_item(payment)
        assert item["loc_version"] == {"N": "1"}, item
        self.tracked[payment.payment_id] = payment
        self.touched.append(payment)
        self.changed.append(payment)

    def transition(self, mutation: str, payment: Tracked, reason: str, **extra: Any) -> None:
        target = TARGET[mutation]
        status_before, allowed_before, before = payment.status, payment.allowed, payment.item
        result = self.mutate(mutation, {**payment.named(reason), **extra})
        after = self.read_item(payment)
        self.touched.append(payment)

        if result["__typename"] != "PaymentPayload":
            # Refused: a typed error for what was asked, and not one attribute changed.
            assert result.get("code") and result["code"] not in NOT_A_REFUSAL, result
            if result["__typename"] == "InvalidTransitionError":
                assert result["currentStatus"] == status_before, result
                assert result["targetStatus"] == target, result
            assert after == before, (result, diff(before, after))
            return

        moved = result["payment"]
        # Allowed by the payment's own account just before: so a move to a status that was not
        # in `allowedTransitions` never succeeds, and a terminal status never moves.
        assert target in allowed_before, (status_before, target, allowed_before, result)
        assert status_before not in TERMINAL, (status_before, result)
        assert reason != "", result  # every move needs a reason
        assert moved["status"] == target, result
        assert moved["paymentId"] == payment.payment_id, result
        assert moved["updateReason"] == reason, result
        assert moved["amountCents"] == payment.amount, result
        if mutation == "completePayment":
            expected = extra.get("applications")
            if expected is None:
                # Without a list, the whole amount goes to the intended installment.
                assert payment.intended_installment_id is not None, result
                expected = [
                    {
                        "installmentId": payment.intended_installment_id,
                        "amountCents": payment.amount,
                    }
                ]
            assert moved["applications"] == expected, result
        if "confirmationId" in extra:
            assert moved["confirmationId"] == extra["confirmationId"], result
        if "returnCode" in extra:
            assert moved["returnCode"] == extra["returnCode"], result
        # The table holds what the caller was told, one version on.
        assert version(after) == version(before) + 1, diff(before, after)
        assert after["loc_status"] == {"S": target}, diff(before, after)
        assert after["loc_update_reason"] == {"S": reason}, diff(before, after)
        assert after["loc_last_updated"] == {"S": moved["updatedAt"]}, diff(before, after)
        assert attempts(after) == moved["attempts"], diff(before, after)
        assert attempts(before) <= attempts(after) <= attempts(before) + 1, diff(before, after)
        assert after.get("loc_confirmation_id", {}).get("S") == moved["confirmationId"]
        assert after.get("loc_return_code", {}).get("S") == moved["returnCode"]
        payment.status, payment.allowed = target, moved["allowedTransitions"]
        self.changed.append(payment)

    # --- checked after every step ---------------------------------------------------------

    @invariant(check_during_init=True)
    def stored_payments_keep_their_properties(self) -> None:
        for payment in self.touched:
            item = payment.item
            status, p, loan = payment.status, payment.payment_id, payment.loan_id
            assert item["loc_amount"] == {"N": str(payment.amount)}, item
            assert item["loc_status"] == {"S": status}, item
            assert 0 <= attempts(item) <= MAX_ATTEMPTS, item
            if status in TERMINAL:
                assert payment.allowed == [], (status, payment.allowed)
            applications = item["loc_applications"]["L"]
            if status == "COMPLETED":
                assert applications, item
            if applications:
                total = sum(int(a["M"]["amount"]["N"]) for a in applications)
                assert total == payment.amount, item
            assert item["GSI1PK"] == {"S": f"USER#{payment.user_id}"}, item
            assert item["GSI1SK"] == {"S": f"LOAN#{loan}#STATUS#{status}#PAYMENT#{p}"}, item
            # Its shard of GSI2's default layout (64 shards: `PAYMENT#<k>`).
            shard = keys.status_partition(p, keys.DEFAULT_GSI2_SHARDS)
            assert item["GSI2PK"] == {"S": shard}, item
            assert item["GSI2SK"] == {"S": f"STATUS#{status}#PAYMENT#{p}"}, item
        for payment in self.changed:
            # A written item is listed under its new status, at its new version. (An unchanged
            # item has unchanged index entries; that no other is listed, the example's end checks.)
            entry = {name: payment.item[name] for name in INDEX_PROJECTION.split(", ")}
            assert self.in_gsi1(payment, payment.status) == [entry]
            assert self.in_gsi2(payment, payment.status) == [entry]
        for payment in self.touched:
            # Whether the step wrote (one event more) or was refused (none): the history replays.
            self.check_history(payment)
        self.unchecked = False

    def check_history(self, payment: Tracked) -> None:
        """The payment's events replay to the payment, both as last read (together)."""
        item, events = payment.item, payment.events
        # Made since history exists: its history is complete, one event per version, in order.
        assert item["loc_history_from"] == {"N": "1"}, item
        assert [version(event) for event in events] == list(range(1, version(item) + 1)), events
        for event in events:
            assert event["SK"] == {"S": f"{payment.history_prefix}{version(event):06d}"}, event
            assert event["loc_user_id"] == {"S": payment.user_id}, event
            assert event["loc_loan_id"] == {"S": payment.loan_id}, event
            assert event["loc_payment_id"] == {"S": payment.payment_id}, event
            assert event["loc_actor_kind"] == {"S": "SERVICE"}, event
            assert event["loc_actor_id"] == {"S": SERVICE_ID}, event
            # In no payment index: only in the events feed's GSI4, under its own time.
            indexed = sorted(name for name in event if name.startswith("GSI"))
            assert indexed == ["GSI4PK", "GSI4SK"], event
            assert event["GSI4SK"]["S"].startswith(event["loc_event_date"]["S"] + "#"), event
        # Each write was a request of its own.
        assert len({event["loc_request_id"]["S"] for event in events}) == len(events), events
        first, last = events[0], events[-1]
        assert "loc_from_status" not in first, first
        assert first["loc_to_status"] == {"S": "PENDING"}, first
        assert first["loc_event_date"] == item["loc_created_date"], (first, item)
        for earlier, later in itertools.pairwise(events):
            assert later.get("loc_from_status") == earlier["loc_to_status"], (earlier, later)
            assert earlier["loc_event_date"]["S"] < later["loc_event_date"]["S"], (earlier, later)
        assert last["loc_to_status"] == item["loc_status"], (last, item)
        assert last["loc_event_date"] == item["loc_last_updated"], (last, item)
        assert last["loc_update_reason"] == item["loc_update_reason"], (last, item)
        # No move takes a confirmation id or a return code away: the latest one set is held.
        for name in ("loc_confirmation_id", "loc_return_code"):
            set_by_writes = [event[name] for event in events if name in event]
            held = set_by_writes[-1] if set_by_writes else None
            assert item.get(name) == held, (name, item.get(name), events)
        presentments = [
            event
            for event in events
            if (event.get("loc_from_status", {}).get("S"), event["loc_to_status"]["S"])
            in PRESENTMENTS
        ]
        assert attempts(item) == len(presentments), (item, events)
        first_presented = presentments[0]["loc_event_date"] if presentments else None
        assert item.get("loc_first_presented_date") == first_presented, (item, events)
        completions = [event for event in events if event["loc_to_status"] == {"S": "COMPLETED"}]
        completed = completions[-1]["loc_event_date"] if completions else None
        assert item.get("loc_completed_date") == completed, (item, events)

    def in_gsi1(self, payment: Tracked, status: str) -> list[Item]:
        """The loan's payments in `status` (GSI1), narrowed to this payment."""
        listed = self.query(
            IndexName="GSI1",
            KeyConditionExpression="GSI1PK = :pk AND begins_with(GSI1SK, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": f"USER#{payment.user_id}"},
                ":prefix": {"S": f"LOAN#{payment.loan_id}#STATUS#{status}#"},
            },
            ProjectionExpression=INDEX_PROJECTION,
        )
        return [item for item in listed if item["loc_payment_id"]["S"] == payment.payment_id]

    def in_gsi2(self, payment: Tracked, status: str) -> list[Item]:
        """What GSI2 holds under this payment's key for `status`."""
        return self.query(
            IndexName="GSI2",
            KeyConditionExpression="GSI2PK = :pk AND GSI2SK = :sk",
            ExpressionAttributeValues={
                ":pk": {"S": keys.status_partition(payment.payment_id, keys.DEFAULT_GSI2_SHARDS)},
                ":sk": {"S": f"STATUS#{status}#PAYMENT#{payment.payment_id}"},
            },
            ProjectionExpression=INDEX_PROJECTION,
        )

    def teardown(self) -> None:
        try:
            if not self.unchecked:
                self.check_whole_example()
        finally:
            # Every item of the example's user, whatever it is (payments, claims, events), even
            # of a payment that a failed step left untracked.
            written = self.query(
                KeyConditionExpression="PK = :pk",
                ExpressionAttributeValues={":pk": {"S": f"USER#{self.user_id}"}},
                ProjectionExpression="PK, SK",
                ConsistentRead=True,
            )
            keys = [{"DeleteRequest": {"Key": key}} for key in written]
            for start in range(0, len(keys), 25):
                self.harness.dynamodb.batch_write_item(
                    RequestItems={self.harness.table_name: keys[start : start + 25]}
                )

    def check_whole_example(self) -> None:
        """The table holds this example's payments as last read, their claims and their events
        (one per version), and each index lists each payment once."""
        user = {"S": f"USER#{self.user_id}"}
        fields = "SK, loc_version, loc_last_updated"
        stored = self.query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": user},
            ProjectionExpression=f"{fields}, loc_payment_id, loc_confirmation_id",
            ConsistentRead=True,
        )
        payments = [item for item in stored if item["SK"]["S"].startswith("LOAN#")]
        claims = [item for item in stored if item["SK"]["S"].startswith("CONFIRMATION#")]
        events = [item for item in stored if item["SK"]["S"].startswith("HISTORY#")]
        assert len(payments) + len(claims) + len(events) == len(stored), stored
        # Every payment's history, as the steps checked it one payment at a time, and no event
        # of a payment the example did not make (nor of a version it did not write).
        histories: dict[str, list[int]] = {}
        for event in events:
            prefix = event["SK"]["S"].rpartition("#V#")[0] + "#V#"
            histories.setdefault(prefix, []).append(version(event))
        assert histories == {
            t.history_prefix: list(range(1, version(t.item) + 1)) for t in self.tracked.values()
        }
        expected = [{f: t.item[f] for f in fields.split(", ")} for t in self.tracked.values()]
        assert sorted(
            ({f: item[f] for f in fields.split(", ")} for item in payments), key=str
        ) == sorted(expected, key=str)
        # A confirmation id names one payment: each claim is a payment's, each id held is claimed
        # by its holder, and so no two payments hold one id.
        owner = {c["loc_confirmation_id"]["S"]: c["loc_payment_id"]["S"] for c in claims}
        assert set(owner.values()) <= set(self.tracked), claims
        for payment in self.tracked.values():
            held = payment.item.get("loc_confirmation_id", {}).get("S")
            if held is not None:
                assert owner.get(held) == payment.payment_id, (held, claims)
        gsi1 = self.query(
            IndexName="GSI1",
            KeyConditionExpression="GSI1PK = :pk",
            ExpressionAttributeValues={":pk": user},
            ProjectionExpression="GSI1SK",
        )
        listed = Counter(entry["GSI1SK"]["S"] for entry in gsi1)
        assert listed == Counter(t.item["GSI1SK"]["S"] for t in self.tracked.values())
        # GSI2's shards hold every user's payments; the table holds this example's only, so
        # the whole index (one Scan, not a Query of each of its 64 shards) is this example's.
        gsi2 = self.scan(IndexName="GSI2", ProjectionExpression="GSI2SK")
        listed = Counter(entry["GSI2SK"]["S"] for entry in gsi2)
        assert listed == Counter(t.item["GSI2SK"]["S"] for t in self.tracked.values())

    # --- helpers --------------------------------------------------------------------------

    def mutate(self, mutation: str, input: dict[str, Any]) -> dict[str, Any]:
        api, runner = self.harness.api, self.harness.runner
        data = runner.run(api.data(DOCUMENTS[mutation], {"input": input}))
        result: dict[str, Any] = data["result"]
        return result

    def read_item(self, payment: Tracked) -> Item:
        """The payment's item, and its events with it: one Query of the example's partition
        (a few payments, their claims and events), no dearer on moto than a GetItem."""
        stored = self.query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": payment.key["PK"]},
            ConsistentRead=True,
        )
        [payment.item] = [item for item in stored if item["SK"] == payment.key["SK"]]
        prefix = payment.history_prefix
        # In sort-key order, which the zero-padded version makes the order of the writes.
        payment.events = [item for item in stored if item["SK"]["S"].startswith(prefix)]
        return payment.item

    def scan(self, **parameters: Any) -> list[Item]:
        return self.query(scan=True, **parameters)

    def query(self, *, scan: bool = False, **parameters: Any) -> list[Item]:
        items: list[Item] = []
        read = self.harness.dynamodb.scan if scan else self.harness.dynamodb.query
        while True:
            response = read(TableName=self.harness.table_name, **parameters)
            items.extend(response["Items"])
            if "LastEvaluatedKey" not in response:
                return items
            parameters["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def given(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """An input of these fields, without those that came out as OMIT."""
    return st.fixed_dictionaries(fields).map(without_omitted)


def without_omitted(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value != OMIT}


def application_list(amount: int, mode: str, cuts: list[int]) -> list[dict[str, Any]] | str:
    """Applications for `amount`: parts that add up to it exactly, or ones that do not."""
    if mode == OMIT:
        return OMIT
    if mode == "empty":
        return []
    if mode == "off-by-one":
        return [{"installmentId": "inst-1", "amountCents": amount + 1 if amount < MAX_INT else 1}]
    if mode == "zero":
        return [
            {"installmentId": "inst-1", "amountCents": amount},
            {"installmentId": "inst-2", "amountCents": 0},
        ]
    points = sorted({1 + cut % (amount - 1) for cut in cuts}) if amount > 1 else []
    bounds = [0, *points, amount]
    installment = "inst#{}" if mode == "bad-id" else "inst-{}"
    return [
        {"installmentId": installment.format(index + 1), "amountCents": high - low}
        for index, (low, high) in enumerate(itertools.pairwise(bounds))
    ]


def version(item: Item) -> int:
    return int(item["loc_version"]["N"])


def attempts(item: Item) -> int:
    return int(item["loc_payment_attempts"]["N"])


def diff(before: Item, after: Item) -> dict[str, tuple[Any, Any]]:
    return {
        name: (before.get(name), after.get(name))
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    }


async def open_api(stack: AsyncExitStack, config: DynamoConfig) -> Api:
    # moto stalls past the client's read timeout on a loaded machine, and botocore then sends
    # the transaction again: tests/moto_idempotency.py makes moto apply the resend once, as
    # DynamoDB does, so that resend is not refused as another writer's move.
    api: Api = await stack.enter_async_context(api_client(config, max_attempts=MAX_ATTEMPTS))
    return api


@pytest.mark.slow  # hypothesis's stateful runs: about 20 s
def test_payment_lifecycle_state_machine(moto_config: DynamoConfig) -> None:
    dynamodb = boto3.client(
        "dynamodb",
        region_name=moto_config.region,
        endpoint_url=moto_config.endpoint_url,
        aws_access_key_id=moto_config.aws_access_key_id,
        aws_secret_access_key=moto_config.aws_secret_access_key,
    )
    # A loop of its own, not made the thread's current one, so pytest-asyncio's stays as it was.
    runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
    stack = AsyncExitStack()
    try:
        api = runner.run(open_api(stack, moto_config))
        harness = Harness(runner, api, dynamodb, moto_config.table_name)
        machine = type("PaymentLifecycleOnMoto", (PaymentLifecycle,), {"harness": harness})
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples(25),
                stateful_step_count=8,
                deadline=None,
                # No example database: it would be a `.hypothesis/` directory in the checkout.
                database=None,
            ),
        )
        # Each example deleted all it wrote, events included: the table is as it began (its
        # layout record, written at the service's start, aside).
        left = dynamodb.scan(TableName=moto_config.table_name, ProjectionExpression="PK")["Items"]
        assert [item["PK"]["S"] for item in left] == [keys.LAYOUT_PARTITION]
    finally:
        try:
            runner.run(stack.aclose())
        finally:
            runner.close()
            dynamodb.close()
