"""Federation's entity representations (SPEC §15): what a gateway sends `_entities`, read as
the refs they name.

    {"__typename": "Payment", "id": <a payment's node id>}      -> PaymentRef
    {"__typename": "Loan", "userId": <id>, "loanId": <id>}      -> LoanRef

Anything else (another type, a missing or malformed key) is `InvalidInput` naming its place,
`representations[i]`, so that one bad representation answers null with its error and leaves
the others resolved. Keys beyond these are ignored, as a gateway may send more than the key.
What a ref resolves to, and for whom, is `queries.node_by_ref`'s: the rules of `node`.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.errors import InvalidInput
from domain.payment import LoanRef, PaymentRef
from resolvers.node_ids import decode_node_id

__all__ = ["entity_refs"]

ENTITY_TYPES = ("Payment", "Loan")


def entity_refs(representations: Sequence[object]) -> list[PaymentRef | LoanRef | InvalidInput]:
    """Each representation's ref, or why it is refused, in order."""
    refs: list[PaymentRef | LoanRef | InvalidInput] = []
    for index, representation in enumerate(representations):
        try:
            refs.append(entity_ref(representation, f"representations[{index}]"))
        except InvalidInput as error:
            refs.append(error)
    return refs


def entity_ref(representation: object, where: str) -> PaymentRef | LoanRef:
    if not isinstance(representation, dict):
        raise InvalidInput(where, "is not an object with a __typename")
    type_name = representation.get("__typename")
    if type_name == "Payment":
        return _payment_ref(representation.get("id"), f"{where}.id")
    if type_name == "Loan":
        return _loan_ref(representation.get("userId"), representation.get("loanId"), where)
    raise InvalidInput(f"{where}.__typename", f"is not one of {', '.join(ENTITY_TYPES)}")


def _payment_ref(node_id: object, where: str) -> PaymentRef:
    refused = InvalidInput(where, "is not a payment id of this service")
    if not isinstance(node_id, str):
        raise refused
    try:
        ref = decode_node_id(node_id)
    except InvalidInput:
        raise refused from None
    if not isinstance(ref, PaymentRef):
        raise refused
    return ref


def _loan_ref(user_id: object, loan_id: object, where: str) -> LoanRef:
    if not isinstance(user_id, str):
        raise InvalidInput(f"{where}.userId", "is required, as a string")
    if not isinstance(loan_id, str):
        raise InvalidInput(f"{where}.loanId", "is required, as a string")
    try:
        return LoanRef.checked(user_id, loan_id)
    except InvalidInput as error:
        raise InvalidInput(
            f"{where}.{error.field}", error.message.removeprefix(f"{error.field}: ")
        ) from None
