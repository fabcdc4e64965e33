"""The update validator's two checks of an expression's text alone run once for that text.

moto's update validator (`UpdateExpressionValidator.get_ast_processors`) starts with two
processors that only check and change nothing: `ActionCountValidator` (one SET, REMOVE, ADD
clause at most: three searches of the whole tree) and `OverlappingPathsValidator` (no attribute
updated twice, no path inside another: a search, then a comparison of every path with every
other). They raise, or hand back each node as it was (a walk that puts each node back where it
is). Their answer is a function of what they read: the tree, which is a function of the
expression's text, and for the paths the `ExpressionAttributeNames` its placeholders stand for.

So once an expression kept for its text (`expressions.py`) has passed one of them, the next
validations of that text (with the same names, for the paths) leave that processor out: it would
pass again and change nothing. A check that fails is made, and fails, at every call; so is any
check of a tree not kept for its text, or with names that are not a plain `str` to `str` dict.
"""

from typing import Any

from moto.dynamodb.parsing.validators import ActionCountValidator, OverlappingPathsValidator

# (check, text[, names]) of the checks passed
_PASSED: set[tuple[Any, ...]] = set()
# Distinct checks kept: a handful of texts and names; more, and all are made again.
_MOST_KEPT = 4096


def skipping_passed(validator: Any, text: Any) -> None:
    """Leave out of this validator's processors the checks its expression's text (with the parser
    that parsed it: the key it is kept under) has passed."""
    processors = []
    for processor in validator.processors:
        key = _key(processor, text, validator.expression_attribute_names)
        if key is None:
            processors.append(processor)
        elif key not in _PASSED:
            processor.traverse = _noting(processor.traverse, key)
            processors.append(processor)
    validator.processors = processors


def _key(processor: Any, text: Any, names: Any) -> tuple[Any, ...] | None:
    if type(processor) is ActionCountValidator:
        return ("counts", text)
    if (
        type(processor) is OverlappingPathsValidator
        and type(names) is dict
        and all(type(key) is str and type(value) is str for key, value in names.items())
    ):
        return ("paths", text, tuple(sorted(names.items())))
    return None


def _noting(traverse: Any, key: tuple[Any, ...]) -> Any:
    """The processor's own walk, noting the check passed when it returns."""

    def noted(node: Any) -> Any:
        walked = traverse(node)
        if len(_PASSED) >= _MOST_KEPT:
            _PASSED.clear()
        _PASSED.add(key)
        return walked

    return noted
