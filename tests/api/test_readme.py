"""The walkthrough (docs/api.md), run in order: the documentation cannot drift from the schema.
The README shows its first query and first mutation, as they are there."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from server.graphiql import FIRST_QUERY
from tests.api.conftest import Api

REPO = Path(__file__).parents[2]
WALKTHROUGH = REPO / "docs" / "api.md"
README = REPO / "README.md"
BLOCK = re.compile(r"```graphql\n(.*?)```", re.DOTALL)
VARIABLE = re.compile(r"\$(\w+):")
# The one walkthrough step that shows a refusal.
REFUSALS = {"Refused": "InvalidTransitionError"}


def walkthrough() -> list[str]:
    return BLOCK.findall(WALKTHROUGH.read_text())


async def test_readme_walkthrough_runs_in_order(api: Api) -> None:
    operations = walkthrough()
    assert len(operations) >= 7
    known: dict[str, Any] = {"userId": "user-1", "loanId": "loan-1"}

    for operation in operations:
        name = re.search(r"(?:query|mutation) (\w+)", operation)
        assert name, operation
        variables = {key: known[key] for key in VARIABLE.findall(operation)}

        data = await api.data(operation, variables)

        for field, result in data.items():
            if operation.lstrip().startswith("mutation"):
                expected = REFUSALS.get(name.group(1), "PaymentPayload")
                assert result["__typename"] == expected, (name.group(1), result)
            if field == "createPayment":
                known["paymentId"] = result["payment"]["paymentId"]
            if field == "paymentByConfirmation":
                assert result == {"paymentId": known["paymentId"], "status": "ACHSENT"}
            if name.group(1) == "History":
                history = result["history"]
                moves = [(e["node"]["fromStatus"], e["node"]["toStatus"]) for e in history["edges"]]
                # The walkthrough's three writes, and not its refused one.
                assert moves == [
                    (None, "PENDING"),
                    ("PENDING", "ACHSENT"),
                    ("ACHSENT", "COMPLETED"),
                ]
                assert history["complete"] is True
    # The walkthrough ends with the history of what it did.
    last = re.search(r"query (\w+)", operations[-1])
    assert last is not None and last.group(1) == "History"


def test_graphiql_opens_with_the_walkthroughs_first_query() -> None:
    assert walkthrough()[0] == FIRST_QUERY


def test_the_readme_shows_the_walkthroughs_first_query_and_mutation() -> None:
    shown = BLOCK.findall(README.read_text())
    assert shown == walkthrough()[:2]
    assert [block.split()[0] for block in shown] == ["query", "mutation"]


async def test_the_walkthrough_sent_twice_writes_once(api: Api) -> None:
    """Every mutation of the walkthrough carries a key: pressing Run again writes nothing."""
    known: dict[str, Any] = {"userId": "user-1", "loanId": "loan-1"}
    answers: list[list[dict[str, Any]]] = [[], []]
    for run in answers:
        for operation in walkthrough():
            variables = {key: known[key] for key in VARIABLE.findall(operation)}
            data = await api.data(operation, variables)
            created = data.get("createPayment")
            if created is not None:
                known["paymentId"] = created["payment"]["paymentId"]
            run.append(data)

    first, second = answers
    for one, two in zip(first, second, strict=True):
        [(field, result)] = one.items()
        if isinstance(result, dict) and "replayed" in result:
            assert (result["replayed"], two[field]["replayed"]) == (False, True), field
            # The payment as it is now: completed, at the version the first run left it.
            again = two[field]["payment"]
            assert (again["id"], again["version"]) == (result["payment"]["id"], 3), field
    assert first[-1] == second[-1]  # the same history: three writes, once each
