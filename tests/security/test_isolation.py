"""Isolation (issue 5, item 3): a customer never reaches another customer's data.

The fields under test are found by walking the schema, not listed: every field of every object
type that takes an `ID` (`id`, `ids`, `loanId`, ...), a cursor (`after`) or a `userId`, directly
or inside its input type. Fields below the root (`Loan.payments`) are reached through every root
query field that returns their type. Each is sent by alice aimed at bob's real payments (ACH and
PINless, presented ones with confirmation ids; bob's cursors come from his own listing), and
again aimed at payments that do not exist: alice must get the same answer for both, FORBIDDEN
for both on a service-only field, and bob's data in neither.

Echoes: the table holds no loan item, so a `Loan` is made from the arguments that name it, and
its `id`, `loanId` and `userId` repeat what alice typed (`loan(userId: "bob", loanId: ...)`
answers `userId: "bob"`). On a `Loan`, those three are replaced by a placeholder when they are
exactly values alice typed (or the node id made of them), before comparing and scanning. Nothing
else counts as an echo: any other appearance of a value of bob's is a leak.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLUnionType,
    get_named_type,
    is_leaf_type,
)

from datasource import DynamoConfig
from schema import build_schema
from tests.api.conftest import ALICE, BOB, SERVICE, Api, api_client, error_codes, stored_items
from tests.backends import Backend

# The subgraph's schema, every field of the public one and federation's `_entities` too, asked
# at its endpoint: the two endpoints share their types and resolvers.
SCHEMA = build_schema(subgraph=True).served
ROOTS = ("Query", "Mutation")

# How each argument that aims at data is filled, by its name. An `ID` argument that is not here
# fails the test: a new id-taking field needs a row (what of bob's to aim it at), nothing else.
AIMED = {
    "userId": "user",
    "loanId": "loan",
    "paymentId": "payment",
    "confirmationId": "confirmation",
    "id": "node",
    "ids": "node",
    "after": "cursor",
    "intendedInstallmentId": "installment",
    "installmentId": "installment",
}
# Federation's `_entities(representations:)` aims at the loan and the payment a probe names,
# each by its entity key (`representations`).
REPRESENTATIONS = "representations"
# Required arguments that aim at nothing but that the generator cannot invent.
FIXED: dict[str, Any] = {"amountCents": 100, "returnCode": "R01", "reason": "isolation probe"}
# Every transition is a service's (README "Callers"); a new mutation is assumed to be one too.
CUSTOMER_MUTATIONS = {"createPayment"}
SERVICE_ONLY_QUERIES = {"paymentsByStatus"}
# Events out (SPEC §18): services only, and aimed at no user's data but all of it (the feed) or
# at the service's own endpoints. tests/api/test_webhook_endpoints.py, test_webhook_owners.py
# (where one service client's endpoint is aimed at another's: NOT_FOUND) and test_events_feed.py
# refuse customers each of them (FORBIDDEN), the way this test would.
EVENTS_OUT = {
    ("Query", "events"),
    ("Query", "webhookEndpoints"),
    ("WebhookEndpoint", "deliveries"),
    ("Mutation", "createWebhookEndpoint"),
    ("Mutation", "deleteWebhookEndpoint"),
    ("Mutation", "rotateWebhookSecret"),
    ("Mutation", "enableWebhookEndpoint"),
    ("Mutation", "resendWebhookEvent"),
    ("Mutation", "assignWebhookEndpointOwner"),
}
# What a customer may see in `errors[]` for another user's data: never FORBIDDEN on a field
# a customer may call, and never an error without a code (a request the generator got wrong).
QUIET_CODES = {"NOT_FOUND", "INVALID_INPUT"}

MISSING_LOAN = "loan-9"
MISSING_PAYMENT = "0190f5a4-0000-7000-8000-00000000dead"
OMIT = object()


def aims(name: str, type_: GraphQLInputType) -> bool:
    named = get_named_type(type_)
    if name in ("after", "userId", REPRESENTATIONS) or named.name == "ID":
        return True
    if isinstance(named, GraphQLInputObjectType):
        return any(aims(field_name, field.type) for field_name, field in named.fields.items())
    return False


def object_types() -> Iterator[GraphQLObjectType]:
    for name, type_ in SCHEMA.type_map.items():
        if isinstance(type_, GraphQLObjectType) and not name.startswith("__"):
            yield type_


def id_taking_fields() -> list[tuple[str, str]]:
    return sorted(
        (type_.name, field_name)
        for type_ in object_types()
        for field_name, field in type_.fields.items()
        if any(aims(name, argument.type) for name, argument in field.args.items())
    )


def parents_of(type_name: str) -> list[str]:
    """The root query fields that return `type_name`, itself or through an interface/union."""
    found = []
    for name, field in SCHEMA.query_type.fields.items():  # type: ignore[union-attr]
        returned = get_named_type(field.type)
        if returned.name == type_name or (
            isinstance(returned, GraphQLInterfaceType | GraphQLUnionType)
            and type_name in {t.name for t in SCHEMA.get_possible_types(returned)}
        ):
            found.append(name)
    return sorted(found)


@dataclass(frozen=True)
class Route:
    """How a field is reached: the field itself at the root, or a root field and then it."""

    target: tuple[str, str]
    parent: str | None = None

    @property
    def name(self) -> str:
        field = ".".join(self.target)
        return field if self.parent is None else f"Query.{self.parent}>{field}"

    @property
    def readable_by_customers(self) -> bool:
        type_name, field = self.target
        if type_name == "Mutation":
            return field in CUSTOMER_MUTATIONS
        return not (type_name == "Query" and field in SERVICE_ONLY_QUERIES)


def route_kinds(route: Route) -> set[str]:
    """The kinds of value (`AIMED`) the route's field takes, inside input types too."""
    type_name, field_name = route.target
    field = SCHEMA.get_type(type_name).fields[field_name]  # type: ignore[union-attr]
    kinds: set[str] = set()

    def walk(name: str, type_: GraphQLInputType) -> None:
        named = get_named_type(type_)
        if isinstance(named, GraphQLInputObjectType):
            for inner, definition in named.fields.items():
                walk(inner, definition.type)
        elif name in AIMED:
            kinds.add(AIMED[name])

    for name, definition in field.args.items():
        walk(name, definition.type)
    return kinds


def routes() -> list[Route]:
    found = []
    for type_name, field in id_taking_fields():
        # Over WebSocket only: tests/api/test_live_updates.py aims alice at bob's events.
        if type_name == "Subscription" or (type_name, field) in EVENTS_OUT:
            continue
        if type_name in ROOTS:
            found.append(Route((type_name, field)))
            continue
        parents = parents_of(type_name)
        assert parents, f"{type_name}.{field} takes an id but no root query field reaches it"
        found.extend(Route((type_name, field), parent) for parent in parents)
    return found


ROUTES = routes()


@dataclass(frozen=True)
class Probe:
    """The values one request aims with, by kind (`AIMED`); `user` None omits `userId`."""

    user: str | None
    loan: str
    payment: str
    confirmation: str
    node: str
    cursor: str
    installment: str
    status: str | None = None


def node_id(*parts: str) -> str:
    return base64.urlsafe_b64encode("#".join(parts).encode()).decode().rstrip("=")


def node_parts(value: str) -> list[str] | None:
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode().split("#")
    except ValueError:
        return None


def argument(name: str, type_: GraphQLInputType, probe: Probe) -> Any:
    """The value of one argument or input field, or OMIT for an optional one aiming at nothing."""
    required = isinstance(type_, GraphQLNonNull)
    inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
    if name == REPRESENTATIONS:
        return representations(probe)
    if isinstance(inner, GraphQLList):
        item = argument(name, inner.of_type, probe)
        return OMIT if item is OMIT else [item]
    if isinstance(inner, GraphQLInputObjectType):
        if not required and not aims(name, inner):
            return OMIT
        fields = {n: argument(n, field.type, probe) for n, field in inner.fields.items()}
        return {n: value for n, value in fields.items() if value is not OMIT}
    if name in AIMED:
        value = getattr(probe, AIMED[name])
        if value is None:
            assert not required, f"{name} is required; this probe has none"
            return OMIT
        return value
    assert get_named_type(inner).name != "ID", (
        f"the ID argument {name!r} aims at something this test cannot name: add it to AIMED"
    )
    if name == "status" and (probe.status is not None or required):
        # A cursor belongs to its status's list: page the list it came from.
        return probe.status or next(iter(inner.values))  # type: ignore[union-attr]
    if not required:
        return OMIT
    if name in FIXED:
        return FIXED[name]
    if isinstance(inner, GraphQLEnumType):
        return next(iter(inner.values))
    defaults = {"Int": 1, "String": "isolation probe", "Boolean": False}
    assert inner.name in defaults, f"no value for the required argument {name}: add it to FIXED"
    return defaults[inner.name]


def representations(probe: Probe) -> list[dict[str, str]]:
    """The probe's loan and payment as a gateway names them (`userId` omitted: alice's own)."""
    user = probe.user or "alice"
    return [
        {"__typename": "Loan", "userId": user, "loanId": probe.loan},
        {"__typename": "Payment", "id": node_id("Payment", user, probe.loan, probe.payment)},
    ]


def selection(type_: GraphQLOutputType | GraphQLNamedType, depth: int = 3) -> list[str]:
    """Every field a customer could read, nested `depth` deep, with `__typename` everywhere."""
    named = get_named_type(type_)
    if is_leaf_type(named):
        return []
    parts = ["__typename"]
    if isinstance(named, GraphQLInterfaceType | GraphQLUnionType):
        for possible in SCHEMA.get_possible_types(named):
            parts.append(f"... on {possible.name} {{ {' '.join(selection(possible, depth))} }}")
        return parts
    assert isinstance(named, GraphQLObjectType)
    for name, field in named.fields.items():
        if any(isinstance(a.type, GraphQLNonNull) for a in field.args.values()):
            continue
        if is_leaf_type(get_named_type(field.type)):
            parts.append(name)
        elif depth > 0 and len(inner := selection(field.type, depth - 1)) > 1:
            parts.append(f"{name} {{ {' '.join(inner)} }}")
    return parts


class Request:
    def __init__(self, route: Route, target: Probe, parent: Probe) -> None:
        self.variables: dict[str, Any] = {}
        self._declared: list[str] = []
        type_name, field_name = route.target
        field = SCHEMA.get_type(type_name).fields[field_name]  # type: ignore[union-attr]
        wanted = " ".join(selection(field.type))
        inner = f"{field_name}{self._arguments(field.args, target)} {{ {wanted} }}"
        if route.parent is not None:
            outer = SCHEMA.query_type.fields[route.parent]  # type: ignore[union-attr]
            if get_named_type(outer.type).name != type_name:
                inner = f"... on {type_name} {{ {inner} }}"
            inner = f"{route.parent}{self._arguments(outer.args, parent)} {{ __typename {inner} }}"
        operation = "mutation" if type_name == "Mutation" else "query"
        declared = f"({', '.join(self._declared)})" if self._declared else ""
        self.query = f"{operation}{declared} {{ {inner} }}"

    def _arguments(self, arguments: dict[str, Any], probe: Probe) -> str:
        given = []
        for name, definition in arguments.items():
            value = argument(name, definition.type, probe)
            if value is OMIT:
                continue
            variable = f"v{len(self.variables)}"
            self.variables[variable] = value
            self._declared.append(f"${variable}: {definition.type}")
            given.append(f"{name}: ${variable}")
        return f"({', '.join(given)})" if given else ""

    def typed(self) -> set[str]:
        found: set[str] = set()

        def walk(value: Any) -> None:
            if isinstance(value, str):
                found.add(value)
            elif isinstance(value, list):
                for item in value:
                    walk(item)
            elif isinstance(value, dict):
                for item in value.values():
                    walk(item)

        walk(self.variables)
        return found


def without_echoes(body: Any, typed: set[str]) -> Any:
    """The response with a Loan's echoed `id`, `loanId`, `userId` replaced (module docstring)."""
    if isinstance(body, list):
        return [without_echoes(item, typed) for item in body]
    if not isinstance(body, dict):
        return body
    cleaned = {key: without_echoes(value, typed) for key, value in body.items()}
    if body.get("__typename") == "Loan":
        for key in ("loanId", "userId"):
            if cleaned.get(key) in typed:
                cleaned[key] = f"<echo of {key}>"
        parts = node_parts(cleaned["id"]) if isinstance(cleaned.get("id"), str) else None
        if parts is not None and parts[0] == "Loan" and set(parts[1:]) <= typed:
            cleaned["id"] = "<echo of the loan's node id>"
    return cleaned


@dataclass
class World:
    api: Api
    config: DynamoConfig
    theirs: list[Probe]
    own: Probe
    secrets: set[str]
    alices_loans: frozenset[str] = frozenset({"loan-1"})

    def missing(self, probe: Probe) -> Probe:
        """The same request aimed at things that exist nowhere: bob's user, nothing else."""
        missing_payment_node = node_id("Payment", "bob", MISSING_LOAN, MISSING_PAYMENT)
        payment_node = (node_parts(probe.node) or [""])[0] == "Payment"
        return replace(
            probe,
            loan=MISSING_LOAN,
            payment=MISSING_PAYMENT,
            confirmation="conf-none",
            node=missing_payment_node if payment_node else node_id("Loan", "bob", MISSING_LOAN),
            cursor=forged(probe.cursor),
            installment="inst-none",
        )


def forged(cursor: str) -> str:
    """A cursor of the same length that no list ever handed out."""
    return "A" * len(cursor)


@pytest.fixture(scope="module")
async def world(moto_backend: Backend) -> AsyncIterator[World]:
    config = moto_backend.config(f"test-isolation-{uuid.uuid4().hex}")
    async with api_client(config) as public:
        api = public.at("/subgraph")
        yield await seed(api, config)
    await moto_backend.client.delete_table(TableName=config.table_name)


async def seed(api: Api, config: DynamoConfig) -> World:
    """bob: ACH and PINless payments in four statuses on two loans; alice: one of her own."""

    def create(loan: str, method: str, amount: int) -> Any:
        extra = {"intendedInstallmentId": f"inst-b{amount}"}
        return api.create(user="bob", loan=loan, method=method, amount=amount, **extra)

    sent = await create("loan-1", "ACH", 7301)
    sent = (await api.move("submitPayment", sent, confirmationId="ach-bob-1"))["payment"]
    pending = await create("loan-1", "ACH", 7302)
    done = await create("loan-2", "PINLESS", 7303)
    done = (await api.move("completePayment", done, confirmationId="pin-bob-3"))["payment"]
    retry = await create("loan-2", "PINLESS", 7304)
    retry = (await api.move("schedulePaymentRetry", retry, reason="declined"))["payment"]
    mine = await api.create(user="alice", loan="loan-1", method="ACH")
    await api.move("submitPayment", mine, confirmationId="ach-alice-1")

    async def cursors(loan: str, status: str | None) -> dict[str, str]:
        """bob's own listing, as bob: each payment's cursor in the list."""
        page = await api.data(
            "query($l: ID!, $s: PaymentStatus) { loan(loanId: $l) { payments(status: $s) {"
            " edges { cursor node { paymentId } } } } }",
            {"l": loan, "s": status},
            as_=BOB,
        )
        edges = page["loan"]["payments"]["edges"]
        return {edge["node"]["paymentId"]: edge["cursor"] for edge in edges}

    def probe(payment: dict[str, Any], *, node: str, cursor: str, status: str | None) -> Probe:
        return Probe(
            user="bob",
            loan=payment["loanId"],
            payment=payment["paymentId"],
            confirmation=payment["confirmationId"] or "ach-bob-1",
            node=node,
            cursor=cursor,
            installment=payment["intendedInstallmentId"],
            status=status,
        )

    theirs = [
        probe(
            sent,
            node=sent["id"],
            cursor=(await cursors("loan-1", None))[sent["paymentId"]],
            status=None,
        ),
        probe(
            pending,
            node=pending["loan"]["id"],
            cursor=(await cursors("loan-1", "PENDING"))[pending["paymentId"]],
            status="PENDING",
        ),
        probe(
            done,
            node=done["id"],
            cursor=(await cursors("loan-2", "COMPLETED"))[done["paymentId"]],
            status="COMPLETED",
        ),
        probe(
            retry,
            node=retry["loan"]["id"],
            cursor=(await cursors("loan-2", None))[retry["paymentId"]],
            status=None,
        ),
    ]
    secrets = {"bob"}
    for payment in (sent, pending, done, retry):
        secrets |= {payment["id"], payment["paymentId"], payment["loan"]["id"]}
        secrets |= {payment["confirmationId"] or "", payment["intendedInstallmentId"]}
    secrets |= {p.cursor for p in theirs}
    own = Probe(
        user=None,
        loan="loan-1",
        payment=mine["paymentId"],
        confirmation="ach-alice-1",
        node=mine["loan"]["id"],
        cursor="",
        installment="inst-1",
    )
    return World(api, config, theirs, own, secrets - {""})


def variants(world: World, route: Route) -> Iterator[tuple[str, Probe, Probe, Probe]]:
    """(name, target, the same aimed at nothing, the parent's probe) for each way to aim."""
    for index, probe in enumerate(world.theirs):
        missing = world.missing(probe)
        if route.parent is not None:
            # The list reached through bob's loan, and through alice's own.
            yield f"probe {index} on bob's loan", probe, missing, probe
            yield f"probe {index} on alice's own loan", probe, missing, world.own
            continue
        yield f"probe {index}", probe, missing, probe
        if route.target[0] == "Query" and probe.loan not in world.alices_loans:
            # bob's ids under alice's own user: the lookups must be scoped to her.
            own_user = replace(probe, user=None)
            yield f"probe {index} as her own user", own_user, world.missing(own_user), own_user


def leaks(body: Any, secrets: set[str]) -> list[str]:
    text = json.dumps(body)
    return sorted(secret for secret in secrets if secret in text)


async def answer(api: Api, request: Request, *, as_: str, user: str) -> Any:
    """The response, echoes replaced; the caller's own id is an echo when `userId` is omitted."""
    body = await api.post(request.query, request.variables, as_=as_)
    return without_echoes(body, request.typed() | {user})


@pytest.mark.parametrize("route", ROUTES, ids=[route.name for route in ROUTES])
async def test_another_customers_data_reads_like_missing_data(world: World, route: Route) -> None:
    before = stored_items(world.config)
    failures: list[str] = []
    sent = 0
    aimed_at_real_data = False
    for name, target, missing, parent in variants(world, route):
        theirs_request = Request(route, target, parent)
        missing_parent = world.missing(parent) if parent.user == "bob" else parent
        missing_request = Request(route, missing, missing_parent)
        theirs = await answer(world.api, theirs_request, as_=ALICE, user="alice")
        nothing = await answer(world.api, missing_request, as_=ALICE, user="alice")
        sent += 1
        where = f"{route.name}, {name}: {theirs_request.query} {theirs_request.variables}"
        if theirs != nothing:
            failures.append(f"{where}\n  bob's data:   {theirs}\n  missing data: {nothing}")
        if found := leaks(theirs, world.secrets):
            failures.append(f"{where}\n  shows bob's {found}: {theirs}")
        codes = set(error_codes(theirs)) | set(error_codes(nothing))
        if route.readable_by_customers and not codes <= QUIET_CODES:
            failures.append(f"{where}\n  answers {codes}, not null/empty/NOT_FOUND: {theirs}")
        if not route.readable_by_customers and (
            error_codes(theirs) != ["FORBIDDEN"] or error_codes(nothing) != ["FORBIDDEN"]
        ):
            failures.append(f"{where}\n  a service-only field must be FORBIDDEN: {theirs}")
        if route.readable_by_customers and route.target[0] == "Query":
            # The control: sent by bob, the same request does reach bob's data.
            as_bob = await answer(world.api, theirs_request, as_=BOB, user="bob")
            missing_as_bob = await answer(world.api, missing_request, as_=BOB, user="bob")
            aimed_at_real_data |= as_bob != missing_as_bob

    assert sent, f"{route.name} was never exercised"
    if route.readable_by_customers and route.target[0] == "Query":
        assert aimed_at_real_data, f"no request of {route.name} reaches bob's data even as bob"
    assert not failures, "\n\n".join(failures)
    assert stored_items(world.config) == before


def test_the_generator_finds_every_field_the_specification_names() -> None:
    """The walk itself: what SPEC §6 names must be among the fields it found."""
    found = {".".join(route.target) for route in ROUTES}
    assert found >= {
        "Query.node",
        "Query.payment",
        "Query.loan",
        "Query.paymentByConfirmation",
        "Query.paymentsByStatus",
        "Loan.payments",
        "Query._entities",
        *(
            f"Mutation.{name}"
            for name in SCHEMA.mutation_type.fields  # type: ignore[union-attr]
            if ("Mutation", name) not in EVENTS_OUT
        ),
    }


REFUSED = "refused"


def confusions(world: World) -> list[tuple[str, str, str | None]]:
    """(what, node id, the type `node` may answer: a type name, None for null, or REFUSED)."""
    probe = world.theirs[0]  # bob's presented ACH payment on loan-1
    payment = probe.payment
    return [
        ("bob's payment", probe.node, "Payment"),
        ("bob's loan", node_id("Loan", "bob", "loan-1"), "Loan"),
        ("his payment under his other loan", node_id("Payment", "bob", "loan-2", payment), None),
        ("his payment under alice", node_id("Payment", "alice", "loan-1", payment), None),
        ("a Payment id of a loan's two parts", node_id("Payment", "bob", "loan-1"), REFUSED),
        (
            "a Loan id of a payment's three parts",
            node_id("Loan", "bob", "loan-1", payment),
            REFUSED,
        ),
        (
            "a Payment id with a fourth part",
            node_id("Payment", "bob", "loan-1", payment, "x"),
            REFUSED,
        ),
        ("an unknown type", node_id("Foo", "bob", "loan-1", payment), REFUSED),
        ("an unknown type, loan-shaped", node_id("Foo", "bob", "loan-1"), REFUSED),
        ("the interface's name", node_id("Node", "bob", "loan-1", payment), REFUSED),
        ("another object type", node_id("PaymentApplication", "bob", "loan-1", payment), REFUSED),
        ("a type in lower case", node_id("payment", "bob", "loan-1", payment), REFUSED),
        ("no type at all", node_id("bob", "loan-1", payment), REFUSED),
        ("an empty loan part", node_id("Loan", "bob", ""), REFUSED),
        ("a bare payment id", payment, REFUSED),
    ]


def node_argument(route: Route) -> str:
    field = SCHEMA.query_type.fields[route.target[1]]  # type: ignore[union-attr]
    names: list[str] = [name for name in field.args if AIMED.get(name) == "node"]
    (name,) = names
    return name


NODE_ROUTES = [
    route
    for route in ROUTES
    if route.target[0] == "Query" and route.parent is None and "node" in route_kinds(route)
]


@pytest.mark.parametrize("route", NODE_ROUTES, ids=[route.name for route in NODE_ROUTES])
async def test_a_node_id_answers_only_the_type_it_names(world: World, route: Route) -> None:
    """As the owner and as a service, so that nothing hides a confusion behind "not yours"."""
    name = node_argument(route)
    failures = []
    for what, given, answers in confusions(world):
        request = Request(route, replace(world.theirs[0], node=given), world.theirs[0])
        for caller in (BOB, SERVICE):
            body = await world.api.post(request.query, request.variables, as_=caller)
            found = (body.get("data") or {}).get(route.target[1])
            nodes = [node for node in (found if isinstance(found, list) else [found]) if node]
            errors = [
                (error.get("extensions", {}).get("code"), error.get("extensions", {}).get("field"))
                for error in body.get("errors", [])
            ]
            if answers == REFUSED:
                ok = not nodes and bool(errors)
                ok &= all(
                    e == ("INVALID_INPUT", name) or e == ("INVALID_INPUT", f"{name}[0]")
                    for e in errors
                )
            elif answers is None:
                ok = not nodes and not errors
            else:
                ok = [(node["__typename"], node["id"]) for node in nodes] == [(answers, given)]
                ok &= not errors
            if not ok:
                failures.append(f"{what} ({given}) should be {answers}: {body}")
    assert not failures, "\n".join(failures)


PAYMENT_ID_ROUTES = [
    route for route in ROUTES if route.parent is None and "payment" in route_kinds(route)
]


@pytest.mark.parametrize("route", PAYMENT_ID_ROUTES, ids=[r.name for r in PAYMENT_ID_ROUTES])
async def test_a_node_id_is_not_a_payment_id(world: World, route: Route) -> None:
    """A Payment's or a Loan's node id where a payment id is expected: INVALID_INPUT, by name."""
    before = stored_items(world.config)
    for given in (world.theirs[0].node, world.theirs[1].node):
        request = Request(route, replace(world.theirs[0], payment=given), world.theirs[0])
        body = await world.api.post(request.query, request.variables, as_=SERVICE)
        if route.target[0] == "Mutation":
            result = body["data"][route.target[1]]
            assert (result["__typename"], result["field"]) == ("InvalidInputError", "paymentId")
        else:
            assert body["data"][route.target[1]] is None
            assert [e["extensions"] for e in body["errors"]] == [
                {"code": "INVALID_INPUT", "field": "paymentId"}
            ]
    assert stored_items(world.config) == before
