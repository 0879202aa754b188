"""The public schema documents itself (issue 47): GraphiQL's explorer shows a schema's
descriptions and nothing else, so every type, field, argument, input field and enum value has
one, every deprecation names its replacement, and `DateTime` says which specification it
follows. The walk is graphql-core's, over the schema `/graphql` serves (whose introspection is
schema.graphql); each check is also tried on a small schema."""

from __future__ import annotations

import re
from collections.abc import Iterator

from graphql import (
    GraphQLArgument,
    GraphQLDirective,
    GraphQLEnumType,
    GraphQLEnumValue,
    GraphQLField,
    GraphQLInputField,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    is_introspection_type,
    is_specified_directive,
    is_specified_scalar_type,
)
from graphql import build_schema as build_sdl_schema

from schema import build_schema

PUBLIC = build_schema().served
RFC_3339 = "https://datatracker.ietf.org/doc/html/rfc3339"
# A deprecation reason names its replacement after "Use" (`Use amountCents.`, as
# docs/developing.md has it, or in backticks): a sibling of the deprecated element, or a
# coordinate of the schema (`Type.field`).
REPLACEMENT = re.compile(r"\bUse `?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)")

Element = (
    GraphQLNamedType
    | GraphQLField
    | GraphQLArgument
    | GraphQLInputField
    | GraphQLEnumValue
    | GraphQLDirective
)


def elements(schema: GraphQLSchema) -> Iterator[tuple[str, str, Element]]:
    """Each type, field, argument, input field and enum value of `schema`, and each directive it
    defines with its arguments, as (its schema coordinate, its siblings' coordinate with `{}`
    for the name, itself); introspection's types, the built-in scalars and the built-in
    directives left out."""
    for named in schema.type_map.values():
        if is_introspection_type(named) or is_specified_scalar_type(named):
            continue
        yield named.name, "{}", named
        if isinstance(named, GraphQLObjectType | GraphQLInterfaceType):
            for field_name, field in named.fields.items():
                coordinate = f"{named.name}.{field_name}"
                yield coordinate, f"{named.name}.{{}}", field
                for argument_name, argument in field.args.items():
                    yield f"{coordinate}({argument_name}:)", f"{coordinate}({{}}:)", argument
        elif isinstance(named, GraphQLInputObjectType):
            for field_name, input_field in named.fields.items():
                yield f"{named.name}.{field_name}", f"{named.name}.{{}}", input_field
        elif isinstance(named, GraphQLEnumType):
            for value_name, value in named.values.items():
                yield f"{named.name}.{value_name}", f"{named.name}.{{}}", value
    for directive in schema.directives:
        if not is_specified_directive(directive):
            yield f"@{directive.name}", "@{}", directive
            for argument_name, argument in directive.args.items():
                yield f"@{directive.name}({argument_name}:)", f"@{directive.name}({{}}:)", argument


def undescribed(schema: GraphQLSchema) -> list[str]:
    """The coordinates of the elements of `schema` without a description."""
    return [
        coordinate
        for coordinate, _, element in elements(schema)
        if not (getattr(element, "description", None) or "").strip()
    ]


def deprecations_without_replacement(schema: GraphQLSchema) -> list[str]:
    """The deprecated elements whose reason does not name, after "Use", an element of the
    schema: a sibling, or a coordinate."""
    found = list(elements(schema))
    coordinates = {coordinate for coordinate, _, _ in found}
    missing = []
    for coordinate, siblings, element in found:
        reason = getattr(element, "deprecation_reason", None)
        if reason is None:
            continue
        named = REPLACEMENT.search(reason)
        if named is None or not {named.group(1), siblings.format(named.group(1))} & coordinates:
            missing.append(f"{coordinate}: {reason}")
    return missing


def test_every_element_of_the_public_schema_has_a_description() -> None:
    missing = undescribed(PUBLIC)
    assert missing == [], f"{len(missing)} elements without a description: {', '.join(missing)}"


def test_the_walk_covers_the_payment_create_payment_and_the_statuses() -> None:
    # The elements the issue names, each with every field, argument and value of its own.
    coordinates = {coordinate for coordinate, _, _ in elements(PUBLIC)}
    assert {
        "Payment.amountCents",
        "Payment.history(first:)",
        "Mutation.createPayment(input:)",
        "CreatePaymentInput.userId",
        "PaymentStatus.RETRY",
        "ErrorCode.UNAVAILABLE",
        "DateTime",
    } <= coordinates
    assert not {coordinate for coordinate in coordinates if coordinate.startswith("__")}
    assert not {"String", "Int", "Boolean", "ID", "Float", "@deprecated"} & coordinates


def test_the_description_check_names_each_kind_of_undescribed_element() -> None:
    sdl = '''
    """Reads."""
    type Query {
      """A payment."""
      payment(id: ID!, """Its status.""" status: Status): Payment
      """Moves."""
      move(input: MoveInput!): Payment
    }
    type Payment { """Its id.""" id: ID!  amount: Int }
    """A move."""
    input MoveInput { id: ID!  """Why.""" reason: String! }
    """A status."""
    enum Status { """Waiting.""" PENDING  DONE }
    '''
    assert undescribed(build_sdl_schema(sdl)) == [
        "Query.payment(id:)",
        "Query.move(input:)",
        "Payment",
        "Payment.amount",
        "MoveInput.id",
        "Status.DONE",
    ]


def test_every_deprecation_of_the_public_schema_names_its_replacement() -> None:
    assert deprecations_without_replacement(PUBLIC) == []


def test_the_deprecation_check_wants_an_element_of_the_schema_named_after_use() -> None:
    sdl = """
    type Query {
      amountCents: Int
      amount: Int @deprecated(reason: "Use amountCents.")
      cents: Int @deprecated(reason: "Use `amountCents`: integer cents.")
      total: Int @deprecated(reason: "Use Query.amountCents, in cents.")
      sum: Int @deprecated
      count: Int @deprecated(reason: "Use `counted`.")
      payments(page: Int @deprecated(reason: "Use first."), first: Int): Int
    }
    enum Status { DONE  FINISHED @deprecated(reason: "Use `DONE`.") }
    """
    assert deprecations_without_replacement(build_sdl_schema(sdl)) == [
        "Query.sum: No longer supported",
        "Query.count: Use `counted`.",
    ]


def test_date_time_says_it_is_rfc_3339_in_utc_with_milliseconds() -> None:
    date_time = PUBLIC.type_map["DateTime"]
    assert isinstance(date_time, GraphQLScalarType)
    assert date_time.specified_by_url == RFC_3339
    assert date_time.description is not None
    assert "RFC 3339" in date_time.description
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", date_time.description)
