"""DynamoDB's TransactionCanceledException as the service answers it.

DynamoDB API Reference, "TransactWriteItems" and "TransactionCanceledException": a cancelled
transaction lists one reason per requested item, in request order, `None` for an item without
error, and `TransactionConflict` ("Transaction is ongoing for the item") when a concurrent
transaction holds the item.
"""

from moto.dynamodb.exceptions import TransactionCanceledException

TRANSACT_WRITE = "dynamodb:TransactWriteItems"
CANCELLED = "TransactionCanceledException"
# The reason codes and messages DynamoDB documents for TransactionCanceledException.
CANCELLATION_MESSAGES: dict[str, str | None] = {
    "None": None,
    "ConditionalCheckFailed": "The conditional request failed",
    "ItemCollectionSizeLimitExceeded": "Collection size exceeded",
    "TransactionConflict": "Transaction is ongoing for the item",
    "ProvisionedThroughputExceeded": (
        "The level of configured provisioned throughput for the table was exceeded. "
        "Consider increasing your provisioning level with the UpdateTable API."
    ),
    "ThrottlingError": (
        "Throughput exceeds the current capacity of your table or index. DynamoDB is "
        "automatically scaling your table or index so please try again shortly."
    ),
    "ValidationError": "One or more parameter values were invalid",
}


def parse_cancellation_reasons(reasons: object) -> tuple[str, ...]:
    """Validated reason codes, one per item of the transaction, in request order."""
    if not isinstance(reasons, list | tuple) or not reasons:
        raise ValueError("cancellationReasons must be a non-empty list of reason codes")
    unknown = [r for r in reasons if r not in CANCELLATION_MESSAGES]
    if unknown:
        raise ValueError(
            f"cancellationReasons has unknown codes {unknown}; "
            f"known: {sorted(CANCELLATION_MESSAGES)}"
        )
    return tuple(reasons)


def cancelled(reasons: tuple[str, ...]) -> TransactionCanceledException:
    """The error DynamoDB answers: the reasons in the message and in CancellationReasons."""
    return TransactionCanceledException(
        [(None if r == "None" else r, CANCELLATION_MESSAGES[r], None) for r in reasons]
    )
