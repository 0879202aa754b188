"""Query limits: each refuses an operation before any resolver or DynamoDB call runs.

depth     nesting of selections, through fragments (strawberry's QueryDepthLimiter)
aliases   aliased fields, through fragment spreads (MaxAliasesLimiter)
tokens    lexical tokens of the document (MaxTokensLimiter)
cost      every field costs 1; a field with a `first` argument (a connection) multiplies
          what it selects by `first` (its default when omitted), so nested pages multiply
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLNamedType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
    get_named_type,
    validate,
)
from graphql.validation import ASTValidationRule
from strawberry.extensions import (
    AddValidationRules,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    SchemaExtension,
)
from strawberry.schema.validation_rules.maybe_null import MaybeNullValidationRule
from strawberry.schema.validation_rules.one_of import OneOfInputValidationRule

# What a connection without `first` returns (resolvers.queries.DEFAULT_PAGE_SIZE).
DEFAULT_FIRST = 20
# The largest page a list returns; a larger `first` is refused when the list runs.
MAX_FIRST = 100
# Distinct query texts kept parsed and validated; clients send a handful of fixed operations.
CACHED_DOCUMENTS = 512


@dataclass(frozen=True, slots=True)
class QueryLimits:
    max_depth: int = 10
    max_aliases: int = 15
    max_tokens: int = 1000
    max_cost: int = 10_000


def limit_extensions(
    limits: QueryLimits, *, production: bool = False
) -> list[Callable[[], SchemaExtension]]:
    """Factories, so every operation gets extensions of its own, with parsing and validation
    cached: a query text seen before is neither parsed nor validated again. In `production`,
    validation errors carry no "Did you mean ...?" hints.

    The depth and alias rules are built once here: the validation cache is keyed by the rule
    classes, and the limiters would make new ones for every operation.
    """
    rules = [
        *QueryDepthLimiter(max_depth=limits.max_depth).validation_rules,
        *MaxAliasesLimiter(max_alias_count=limits.max_aliases).validation_rules,
    ]
    return [
        partial(MaxTokensLimiter, max_token_count=limits.max_tokens),
        partial(ParserCache, maxsize=CACHED_DOCUMENTS),
        partial(AddValidationRules, rules),
        # Before the cost limit: a cached validation result must not overwrite its refusal.
        partial(CachedValidation, hide_suggestions=production),
        partial(QueryCostLimiter, max_cost=limits.max_cost),
    ]


@lru_cache(maxsize=CACHED_DOCUMENTS)
def _validate(
    schema: GraphQLSchema,
    document: DocumentNode,
    rules: tuple[type[ASTValidationRule], ...],
    hide_suggestions: bool,
) -> list[GraphQLError]:
    # The rules strawberry's own validation (strawberry.schema.schema.validate_document) adds.
    rules = (*rules, MaybeNullValidationRule, OneOfInputValidationRule)
    return validate(schema, document, rules, hide_suggestions=hide_suggestions)


class CachedValidation(SchemaExtension):
    """Strawberry's ValidationCache, with a switch for graphql-core's hints at names ("Did you
    mean 'amountCents'?"), which would map the schema out for a caller without introspection."""

    def __init__(self, *, hide_suggestions: bool) -> None:
        self.hide_suggestions = hide_suggestions

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        assert context.graphql_document is not None  # validation follows a successful parse
        context.pre_execution_errors = _validate(
            context.schema._schema,
            context.graphql_document,
            context.validation_rules,
            self.hide_suggestions,
        )
        yield


class QueryCostLimiter(SchemaExtension):
    """Refuses an operation whose cost exceeds `max_cost`, before it is validated.

    Cost needs the variables (`first: $n`), which validation rules do not see; so it is an
    extension that runs as validation starts, on the parsed document, and a refusal takes the
    place of validation's errors. The document may still be invalid here: unknown fields cost
    1 and unknown or cyclic fragments nothing, and validation then reports them.
    """

    def __init__(self, *, max_cost: int) -> None:
        self.max_cost = max_cost

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        if context.pre_execution_errors or document is None:
            yield
            return
        cost = operation_cost(
            context.schema._schema, document, context.operation_name, context.variables or {}
        )
        if cost > self.max_cost:
            context.pre_execution_errors = [
                GraphQLError(
                    f"The query costs {cost}, more than the limit of {self.max_cost}: "
                    "ask for fewer items (`first`) or fewer nested lists.",
                    extensions={"code": "QUERY_TOO_COSTLY", "cost": cost},
                )
            ]
        yield


def operation_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any],
) -> int:
    fragments = {
        definition.name.value: definition
        for definition in document.definitions
        if isinstance(definition, FragmentDefinitionNode)
    }
    costs = [0]
    for definition in document.definitions:
        if not isinstance(definition, OperationDefinitionNode):
            continue
        if operation_name is not None and (
            definition.name is None or definition.name.value != operation_name
        ):
            continue
        root = schema.get_root_type(definition.operation)
        costs.append(_Costing(schema, fragments, variables).cost(definition.selection_set, root))
    return max(costs)


@dataclass(frozen=True, slots=True)
class _Costing:
    schema: GraphQLSchema
    fragments: Mapping[str, FragmentDefinitionNode]
    variables: Mapping[str, Any]

    def cost(
        self,
        selections: SelectionSetNode | None,
        parent: GraphQLNamedType | None,
        spread: frozenset[str] = frozenset(),
    ) -> int:
        """`spread`: the fragments on the way here, so a cycle ends instead of recursing."""
        if selections is None:
            return 0
        total = 0
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                total += self._field(selection, parent, spread)
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                narrowed = self.schema.get_type(condition.name.value) if condition else parent
                total += self.cost(selection.selection_set, narrowed, spread)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.fragments.get(name)
                if fragment is None or name in spread:
                    continue
                narrowed = self.schema.get_type(fragment.type_condition.name.value)
                total += self.cost(fragment.selection_set, narrowed, spread | {name})
        return total

    def _field(
        self, node: FieldNode, parent: GraphQLNamedType | None, spread: frozenset[str]
    ) -> int:
        fields = getattr(parent, "fields", {})
        definition = fields.get(node.name.value)
        if definition is None:  # __typename, or a field validation will refuse
            return 1
        inner = self.cost(node.selection_set, get_named_type(definition.type), spread)
        if "first" not in definition.args:
            return 1 + inner
        return 1 + self._first(node) * inner

    def _first(self, node: FieldNode) -> int:
        for argument in node.arguments or ():
            if argument.name.value != "first":
                continue
            value = argument.value
            if isinstance(value, IntValueNode):
                return _page(int(value.value))
            if isinstance(value, VariableNode):
                given = self.variables.get(value.name.value)
                if isinstance(given, int):
                    return _page(given)
        return DEFAULT_FIRST


def _page(first: int) -> int:
    return min(max(1, first), MAX_FIRST)
