"""Each part of the sync's minute contained: one part that fails (an AWS call refused, a fault
that outlived its retries, a bug) is logged with its name and its error's code and kind
(domain/aws_errors.py), counted in the EMF metric `SyncPartFailed` (dimension `part`), and noted
in the report; the minute's other parts still run. What the failed part left undone is the next
run's, a minute later."""

from __future__ import annotations

from collections.abc import Callable

from capacity_launcher.domain.aws_errors import classify, error_code_of
from capacity_launcher.observability import MetricUnit, emit_single, logger

SYNC_PART_FAILED = "SyncPartFailed"


def contained[T](failed: list[str], part: str, work: Callable[[], T], otherwise: T) -> T:
    """`work()`, or `otherwise` when it fails: the failure logged, counted and added to
    `failed` by the part's name."""
    try:
        return work()
    except Exception as error:  # one part's failure must not end the others
        code = error_code_of(error)
        logger.exception(
            "sync part failed; the rest of the minute's work goes on",
            extra={"part": part, "code": code, "kind": classify(code).value, "error": str(error)},
        )
        emit_single(SYNC_PART_FAILED, MetricUnit.Count, 1.0, {"part": part})
        failed.append(part)
        return otherwise
