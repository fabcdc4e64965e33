"""The DynamoDB hooks: writes validated as DynamoDB does (and transactions meeting conflicts),
transactions and queries at the cost of what they touch, scans at the cost of what they answer,
update and condition expressions parsed once for their text, the update validator's walks without
their per-node bookkeeping."""

from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node  # type: ignore[attr-defined]
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.parsing.validators import Validator
from moto.dynamodb.responses import DynamoHandler

from moto_capacity.core.patching import hook

from . import conditions, expressions, traversal
from .models import partitions, scans, transactions
from .responses import strict


def install() -> None:
    for write in ("put_item", "update_item", "delete_item", "batch_write_item"):
        hook(DynamoHandler, write, strict)
    hook(DynamoHandler, "transact_write_items", strict)
    hook(DynamoDBBackend, "transact_write_items", transactions.touching_only_its_items)
    hook(Table, "query", partitions.reading_only_its_partition)
    hook(Table, "scan", scans.scanning_in_key_order)
    hook(UpdateExpressionParser, "make", expressions.parsed_once)
    hook(Validator, "__init__", expressions.copied_by_unpickling)
    hook(ConditionExpressionParser, "parse", conditions.parsed_once)
    hook(DepthFirstTraverser, "traverse", traversal.walked_once_per_map)
    hook(Node, "find_clauses", traversal.searched_by_class)
