"""The transition table, tested from `RULES` itself: every allowed move and every refused one."""

import dataclasses
import itertools

import pytest

from domain.enums import PaymentMethod, PaymentStatus
from domain.errors import InvalidInput, InvalidTransition
from domain.transitions import (
    RULES,
    TERMINAL,
    ApplicationRequest,
    Requirement,
    Rule,
    TransitionRequest,
    allowed_targets,
    apply_transition,
)
from tests.payment_samples import ALLOWED_MOVES, LATER, payment_in, request_for

S = PaymentStatus
MAX_ATTEMPTS = 3
ALLOWED = {(rule.source, rule.target, method) for rule, method in ALLOWED_MOVES}
REFUSED = [
    move
    for move in itertools.product(PaymentStatus, PaymentStatus, PaymentMethod)
    if move not in ALLOWED
]


def _id(move: tuple[Rule, PaymentMethod]) -> str:
    rule, method = move
    return f"{rule.source.value}->{rule.target.value}-{method.value}"


@pytest.mark.parametrize("move", ALLOWED_MOVES, ids=_id)
def test_every_allowed_move(move: tuple[Rule, PaymentMethod]) -> None:
    rule, method = move
    payment = payment_in(rule.source, method)
    request = request_for(rule)

    moved = apply_transition(payment, request, max_attempts=MAX_ATTEMPTS, now=LATER)

    assert moved.status is rule.target
    assert moved.attempts == payment.attempts + (1 if rule.presentment else 0)
    assert moved.version == payment.version + 1
    assert moved.update_reason == request.reason
    assert moved.updated_at == LATER
    assert moved.created_at == payment.created_at
    if Requirement.CONFIRMATION_ID in rule.requires:
        assert moved.confirmation_id == "conf-new"
    else:
        assert moved.confirmation_id == payment.confirmation_id
    if Requirement.RETURN_CODE in rule.requires:
        assert moved.return_code == "R01"
    if Requirement.APPLICATIONS in rule.requires:
        # No explicit list: the whole amount goes to the intended installment.
        [application] = moved.applications
        assert application.installment_id == payment.intended_installment_id
        assert application.amount_cents == payment.amount_cents
        assert application.payment_id == payment.payment_id
        assert application.payment_date == LATER
    else:
        assert moved.applications == payment.applications
    unchanged = ("user_id", "loan_id", "payment_id", "amount_cents", "method", "process")
    for name in unchanged:
        assert getattr(moved, name) == getattr(payment, name)


@pytest.mark.parametrize(
    ("source", "target", "method"), REFUSED, ids=lambda value: getattr(value, "value", value)
)
def test_every_refused_move(
    source: PaymentStatus, target: PaymentStatus, method: PaymentMethod
) -> None:
    payment = payment_in(source, method)
    # A request that would satisfy any rule: only the table itself may refuse it.
    request = request_for(Rule(source, target, frozenset(PaymentMethod)), confirmation_id=None)
    with pytest.raises(InvalidTransition) as refused:
        apply_transition(payment, request, max_attempts=MAX_ATTEMPTS, now=LATER)
    assert refused.value.current is source
    assert refused.value.target is target


def test_the_seed_diagram_is_in_the_table() -> None:
    diagram = {
        (S.PENDING, S.ACHSENT),
        (S.ACHSENT, S.COMPLETED),
        (S.ACHSENT, S.RETRY),
        (S.ACHSENT, S.RETURNED),
        (S.RETRY, S.FAILED),
    }
    assert diagram <= {(source, target) for source, target, _ in ALLOWED}


def test_terminal_statuses_have_no_way_out() -> None:
    assert {rule.source for rule in RULES}.isdisjoint(TERMINAL)
    assert {S.SKIPPED, S.FAILED, S.RETURNED, S.CHARGED_BACK} == TERMINAL


STATES = list(itertools.product(PaymentStatus, PaymentMethod))


@pytest.mark.parametrize(("status", "method"), STATES)
def test_allowed_targets_follow_the_table(status: PaymentStatus, method: PaymentMethod) -> None:
    payment = payment_in(status, method)
    rules = [
        rule
        for rule, rule_method in ALLOWED_MOVES
        if (rule.source, rule_method) == (status, method)
    ]
    assert allowed_targets(payment, max_attempts=MAX_ATTEMPTS, now=LATER) == [
        rule.target for rule in rules
    ]
    spent = dataclasses.replace(payment, attempts=MAX_ATTEMPTS)
    # Spent: no presentment; an ACH return still goes to RETRY, from where it can only fail.
    assert allowed_targets(spent, max_attempts=MAX_ATTEMPTS, now=LATER) == [
        rule.target for rule in rules if not rule.presentment
    ]


PRESENTMENTS = [(rule, method) for rule, method in ALLOWED_MOVES if rule.presentment]


@pytest.mark.parametrize("move", PRESENTMENTS, ids=_id)
def test_a_presentment_is_refused_at_the_maximum_attempts(
    move: tuple[Rule, PaymentMethod],
) -> None:
    rule, method = move
    payment = payment_in(rule.source, method, attempts=MAX_ATTEMPTS)
    with pytest.raises(InvalidTransition, match="maximum"):
        apply_transition(payment, request_for(rule), max_attempts=MAX_ATTEMPTS, now=LATER)
    below = dataclasses.replace(payment, attempts=MAX_ATTEMPTS - 1)
    moved = apply_transition(below, request_for(rule), max_attempts=MAX_ATTEMPTS, now=LATER)
    assert moved.attempts == MAX_ATTEMPTS


REQUIREMENTS = [
    (rule, method, requirement)
    for rule, method in ALLOWED_MOVES
    for requirement in sorted(rule.requires, key=lambda requirement: requirement.value)
    if requirement is not Requirement.APPLICATIONS
]


@pytest.mark.parametrize(
    ("rule", "method", "requirement"),
    REQUIREMENTS,
    ids=lambda value: getattr(value, "value", None) if not isinstance(value, Rule) else None,
)
def test_a_missing_requirement_is_refused(
    rule: Rule, method: PaymentMethod, requirement: Requirement
) -> None:
    field = {Requirement.CONFIRMATION_ID: "confirmation_id", Requirement.RETURN_CODE: "return_code"}
    request = request_for(rule, **{field[requirement]: None})
    with pytest.raises(InvalidInput) as refused:
        apply_transition(payment_in(rule.source, method), request, max_attempts=3, now=LATER)
    assert refused.value.field == requirement.value


COMPLETIONS = [move for move in ALLOWED_MOVES if Requirement.APPLICATIONS in move[0].requires]


@pytest.mark.parametrize("move", COMPLETIONS, ids=_id)
def test_applications_must_add_up_to_the_amount(move: tuple[Rule, PaymentMethod]) -> None:
    rule, method = move
    payment = payment_in(rule.source, method, amount_cents=1_000)
    split = [ApplicationRequest("inst-1", 600), ApplicationRequest("inst-2", 400)]
    moved = apply_transition(
        payment, request_for(rule, applications=split), max_attempts=3, now=LATER
    )
    assert [(a.installment_id, a.amount_cents) for a in moved.applications] == [
        ("inst-1", 600),
        ("inst-2", 400),
    ]
    for wrong in ([ApplicationRequest("inst-1", 999)], []):
        with pytest.raises(InvalidInput, match="applications"):
            apply_transition(
                payment, request_for(rule, applications=wrong), max_attempts=3, now=LATER
            )
    orphan = dataclasses.replace(payment, intended_installment_id=None)
    with pytest.raises(InvalidInput, match="applications"):
        apply_transition(orphan, request_for(rule), max_attempts=3, now=LATER)


@pytest.mark.parametrize(
    "move", [m for m in ALLOWED_MOVES if Requirement.APPLICATIONS not in m[0].requires], ids=_id
)
def test_only_a_completion_takes_applications(move: tuple[Rule, PaymentMethod]) -> None:
    rule, method = move
    request = request_for(rule, applications=[ApplicationRequest("inst-1", 12_345)])
    with pytest.raises(InvalidInput, match="applications"):
        apply_transition(payment_in(rule.source, method), request, max_attempts=3, now=LATER)


@pytest.mark.parametrize(
    "move", [m for m in ALLOWED_MOVES if Requirement.RETURN_CODE not in m[0].requires], ids=_id
)
def test_only_an_ach_return_takes_a_return_code(move: tuple[Rule, PaymentMethod]) -> None:
    rule, method = move
    request = request_for(rule, return_code="R01")
    with pytest.raises(InvalidInput, match="returnCode"):
        apply_transition(payment_in(rule.source, method), request, max_attempts=3, now=LATER)


def test_a_different_confirmation_id_is_refused_where_none_is_expected() -> None:
    rule = next(rule for rule in RULES if rule.source is S.ACHSENT and rule.target is S.COMPLETED)
    payment = payment_in(S.ACHSENT, PaymentMethod.ACH)
    same = apply_transition(
        payment, request_for(rule, confirmation_id="conf-old"), max_attempts=3, now=LATER
    )
    assert same.confirmation_id == "conf-old"
    with pytest.raises(InvalidInput, match="confirmationId"):
        apply_transition(
            payment, request_for(rule, confirmation_id="conf-other"), max_attempts=3, now=LATER
        )


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("reason", {"reason": ""}),
        ("confirmationId", {"confirmation_id": "conf#1"}),
        ("returnCode", {"return_code": "R1"}),
        ("applications[0].installmentId", {"applications": [ApplicationRequest("", 12_345)]}),
        ("applications[0].amountCents", {"applications": [ApplicationRequest("inst-1", 0)]}),
    ],
)
def test_malformed_request_fields_are_refused(field: str, change: dict[str, object]) -> None:
    request = dataclasses.asdict(request_for(RULES[0])) | change
    with pytest.raises(InvalidInput) as refused:
        TransitionRequest.checked(request.pop("target"), request.pop("reason"), **request)
    assert refused.value.field == field


def test_a_checked_request_is_the_request_asked_for() -> None:
    applications = [ApplicationRequest("inst-1", 12_345)]
    checked = TransitionRequest.checked(
        PaymentStatus.COMPLETED, "settled", confirmation_id="conf-1", applications=applications
    )
    assert checked == TransitionRequest(
        PaymentStatus.COMPLETED, "settled", confirmation_id="conf-1", applications=applications
    )
