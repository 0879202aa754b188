"""Parts merge into the plain answer, for any valid query (issue 66, SPEC §22): documents of the
served schema drawn by `hypothesis-graphql` and lifted as clients write them
(`tests.api.lifted_documents`), with `@defer` and `@stream` then placed at random (on fields'
selections, named fragments' spreads and list fields below the root), run against the store of
the cost's property (`tests.api.test_cost_property`). Without errors, the parts of the answer in
each format merge into exactly the answer without the directives; with errors, the answer in
parts still ends (`hasNext: false`), every part it announced is completed, and each error names
a path. `make test` runs a few examples; `HYPOTHESIS_PROFILE=long` ten times as many."""

from __future__ import annotations

import random
from typing import Any

import pytest
from graphql import (
    ArgumentNode,
    DirectiveNode,
    DocumentNode,
    FieldNode,
    FragmentSpreadNode,
    GraphQLList,
    GraphQLNonNull,
    InlineFragmentNode,
    IntValueNode,
    NameNode,
    SelectionSetNode,
    StringValueNode,
    TypeInfo,
    TypeInfoVisitor,
    Visitor,
    parse,
    print_ast,
    visit,
)
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.api.conftest import SERVICE, Api
from tests.api.lifted_documents import Stored, lift
from tests.api.test_cost_property import DOCUMENTS, SERVED, stored
from tests.api.test_incremental_delivery import APOLLO_2022, APOLLO_ALPHA_9, merged, parts
from tests.hypothesis_profiles import examples

__all__ = ["stored"]  # the fixture, shared with the cost's property


def _directive(name: str, label: str, initial_count: int | None = None) -> DirectiveNode:
    arguments = [ArgumentNode(name=NameNode(value="label"), value=StringValueNode(value=label))]
    if initial_count is not None:
        arguments.append(
            ArgumentNode(
                name=NameNode(value="initialCount"), value=IntValueNode(value=str(initial_count))
            )
        )
    return DirectiveNode(name=NameNode(value=name), arguments=tuple(arguments))


class _Placing(Visitor):
    """Puts `@defer` and `@stream` where `chance` says, below the root, each label its own."""

    def __init__(self, type_info: TypeInfo, chance: random.Random) -> None:
        super().__init__()
        self.type_info = type_info
        self.chance = chance
        self.labels = 0

    def _label(self) -> str:
        self.labels += 1
        return f"part{self.labels}"

    def _below_root(self) -> bool:
        return self.type_info.get_parent_type() is not SERVED.query_type

    def leave_field(self, node: FieldNode, *_: Any) -> FieldNode | None:
        if not self._below_root():
            return None
        field_type = self.type_info.get_type()
        if isinstance(field_type, GraphQLNonNull):
            field_type = field_type.of_type
        directives = tuple(node.directives or ())
        if isinstance(field_type, GraphQLList) and self.chance.random() < 0.4:
            stream = _directive("stream", self._label(), self.chance.randrange(4))
            directives = (*directives, stream)
        selection_set = node.selection_set
        if selection_set is not None and self.chance.random() < 0.4:
            deferred = InlineFragmentNode(
                type_condition=None,
                directives=(_directive("defer", self._label()),),
                selection_set=selection_set,
            )
            selection_set = SelectionSetNode(selections=(deferred,))
        if directives == tuple(node.directives or ()) and selection_set is node.selection_set:
            return None
        return FieldNode(
            alias=node.alias,
            name=node.name,
            arguments=node.arguments,
            directives=directives,
            selection_set=selection_set,
        )

    def leave_fragment_spread(self, node: FragmentSpreadNode, *_: Any) -> FragmentSpreadNode | None:
        if not self._below_root() or self.chance.random() >= 0.4:
            return None
        directives = (*(node.directives or ()), _directive("defer", self._label()))
        return FragmentSpreadNode(name=node.name, directives=directives)


def placed(text: str, chance: random.Random) -> str:
    type_info = TypeInfo(SERVED)
    document: DocumentNode = visit(
        parse(text), TypeInfoVisitor(type_info, _Placing(type_info, chance))
    )
    return print_ast(document)


async def _post(api: Api, query: str, values: dict[str, Any], accept: str) -> Any:
    return await api.http.post(
        "/graphql",
        json={"query": query, "variables": values},
        headers={"Authorization": f"Bearer {SERVICE}", "Accept": accept},
    )


def _without_extensions(body: dict[str, Any]) -> dict[str, Any]:
    """The answer without its extensions, each error by its path and code: the texts with and
    without the directives are printed apart (other locations), and some messages name the
    time, which the tests' clock moves on every read."""
    answer = {key: value for key, value in body.items() if key != "extensions"}
    if "errors" in answer:
        answer["errors"] = [
            (error.get("path"), error.get("extensions", {}).get("code"))
            for error in answer["errors"]
        ]
    return answer


@settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(document=DOCUMENTS, data=st.data())
async def test_the_parts_of_any_answer_merge_into_the_plain_answer(
    stored: tuple[Api, Stored], document: DocumentNode, data: st.DataObject
) -> None:
    api, holding = stored
    lifted = lift(SERVED, document, holding, data.draw)
    deferred = placed(lifted.text, data.draw(st.randoms(use_true_random=False)))
    plain = (await _post(api, lifted.text, lifted.values, "application/json")).json()

    for accept in (APOLLO_2022, APOLLO_ALPHA_9):
        response = await _post(api, deferred, lifted.values, accept)
        if not response.headers["content-type"].startswith("multipart/mixed"):
            body = response.json()
            # Refused before it ran: as the plain query was, unless two streams of one
            # response key differ (a document the placing made invalid, not the service).
            if "data" not in body and "data" in plain:
                assume(not any("stream" in e["message"] for e in body["errors"]))
            assert _without_extensions(body) == _without_extensions(plain), deferred
            event("one body")
            continue
        payloads = parts(response)
        event(f"in {len(payloads)} parts" if len(payloads) < 4 else "in 4 parts or more")
        assert payloads[-1]["hasNext"] is False, deferred
        answer = merged(payloads)
        if "errors" not in plain and "errors" not in answer:
            assert answer == _without_extensions(plain), deferred
        else:
            assert all("path" in error for error in answer.get("errors", ())), deferred
        if accept == APOLLO_ALPHA_9:
            announced = [p["id"] for payload in payloads for p in payload.get("pending", ())]
            done = [c["id"] for payload in payloads for c in payload.get("completed", ())]
            assert sorted(done) == sorted(announced), deferred


@pytest.mark.parametrize("seed", range(3))
def test_placing_keeps_the_document_and_adds_directives(seed: int) -> None:
    text = 'query { loan(loanId: "l") { id payments { edges { node { paymentId } } } } }'
    chance = random.Random(seed)

    result = placed(text, chance)

    assert print_ast(parse(result)) == result
    assert result.count("loan(") == 1
